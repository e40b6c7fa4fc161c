//! A small key/value space in the `meta` table for clients of the library (`ctxgate sync`
//! keeps its spaces, cursors and tombstones there), so that their state travels with the index
//! file and commits in the index's transactions. Keys are prefixed so they never meet the
//! index's own (`meta`, `redaction`).

use super::error::Error;
use super::view::{Source, View, WriteSource};
use redb::ReadableTable;

pub(super) const PREFIX: &str = "client/";

impl<S: Source> View<S> {
    /// The value a client stored under `key`.
    pub fn client_value(&self, key: &str) -> Result<Option<Vec<u8>>, Error> {
        Ok(self.tables.meta.get(format!("{PREFIX}{key}").as_str())?.map(|v| v.value().to_vec()))
    }

}

impl View<WriteSource<'_>> {
    /// Stores `value` under `key`, or removes the key for `None`.
    pub fn put_client_value(&mut self, key: &str, value: Option<&[u8]>) -> Result<(), Error> {
        let key = format!("{PREFIX}{key}");
        match value {
            Some(value) => drop(self.tables.meta.insert(key.as_str(), value)?),
            None => drop(self.tables.meta.remove(key.as_str())?),
        }
        Ok(())
    }
}
