//! An index opened read-only to be rebuilt: built by any anchor rules of this format.

use super::error::{Error, corrupt};
use super::evidence::{EvidenceMeta, EvidenceRecord};
use super::keys::{block_key, split_block_key};
use super::records::{MetaRecord, SessionRecord, TurnRecord};
use super::format::OLDEST_REBUILT_FORMAT;
use super::tables::{EVIDENCE, META, SESSIONS, TEXT_DICTIONARIES, TURNS};
use super::turn_text::{Decoders, TextDictionary};
use super::{FORMAT_VERSION, META_KEY, StoreOptions, format, with_busy_wait};
use redb::{ReadableDatabase, ReadableTable};
use std::path::{Path, PathBuf};

/// The sessions and turns of an existing index, whatever anchor rules built its postings.
/// Holds the file open (read-only) so no writer changes it while it is being rebuilt.
pub struct SourceIndex {
    db: redb::ReadOnlyDatabase,
    path: PathBuf,
    format_version: u32,
}

impl SourceIndex {
    /// Opens `path` read-only. Accepts any anchor-rules version, and any format from
    /// [`OLDEST_REBUILT_FORMAT`] to this one.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`], [`Error::NotAnIndex`], [`Error::TooNew`], [`Error::Busy`].
    pub fn open(path: &Path, options: &StoreOptions) -> Result<SourceIndex, Error> {
        let not_ours = || Error::NotAnIndex { path: path.to_path_buf() };
        // No file, or an empty one: nothing to rebuild (and a new index would be empty).
        if !path.exists() || path.metadata().is_ok_and(|m| m.is_file() && m.len() == 0) {
            return Err(Error::UnknownIndex { path: path.to_path_buf() });
        }
        if !path.is_file() {
            return Err(not_ours());
        }
        let db = with_busy_wait(path, options.busy_timeout, || {
            redb::Database::builder().set_cache_size(options.cache_bytes).open_read_only(path)
        })?;
        let meta: MetaRecord = {
            let txn = db.begin_read()?;
            let table = txn.open_table(META).map_err(|_| not_ours())?;
            let bytes = table.get(META_KEY)?.ok_or_else(not_ours)?;
            postcard::from_bytes(bytes.value()).map_err(|_| not_ours())?
        };
        if meta.magic != format::MAGIC {
            return Err(not_ours());
        }
        if !(OLDEST_REBUILT_FORMAT..=FORMAT_VERSION).contains(&meta.format_version) {
            // Format 1 is the first and is still read: any other is newer.
            return Err(Error::TooNew {
                path: path.to_path_buf(),
                found: meta.format_version,
                supported: FORMAT_VERSION,
            });
        }
        Ok(SourceIndex { db, path: path.to_path_buf(), format_version: meta.format_version })
    }

    /// What the index records of its redaction ([`super::redaction`]).
    pub fn redaction(&self) -> Result<Option<super::redaction::RedactionRecord>, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(META)?;
        match table.get("redaction")? {
            Some(bytes) => postcard::from_bytes(bytes.value()).map(Some).map_err(|e| corrupt("redaction", e)),
            None => Ok(None),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every session in id order.
    pub fn sessions(&self) -> Result<Vec<(u32, SessionRecord)>, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(SESSIONS)?;
        let mut out = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            out.push((
                id,
                postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("session {id}"), e))?,
            ));
        }
        Ok(out)
    }

    /// Up to `limit` turns of `session` from turn `from` on, in turn order.
    pub fn turns(&self, session: u32, from: u32, limit: usize) -> Result<Vec<(u32, TurnRecord)>, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(TURNS)?;
        // Format 1 stored a turn as postcard `TurnRecord`; later ones as `turn_text` rows.
        let dictionaries = match self.format_version {
            1 => None,
            _ => Some(txn.open_table(TEXT_DICTIONARIES)?),
        };
        let mut decoders = Decoders::default();
        let mut out = Vec::new();
        for entry in table.range(block_key(session, from)..=block_key(session, u32::MAX))?.take(limit) {
            let (key, value) = entry?;
            let (_, turn) = split_block_key(key.value());
            let what = || format!("turn {session}:{turn}");
            let record = match &dictionaries {
                None => postcard::from_bytes(value.value()).map_err(|e| corrupt(what(), e))?,
                Some(dictionaries) => {
                    let mut load = |id: u32| {
                        dictionaries.get(id)?.map(|g| TextDictionary::from_row(id, g.value())).transpose()
                    };
                    decoders.decode(value.value(), what, &mut load)?
                }
            };
            out.push((turn, record));
        }
        Ok(out)
    }

    /// Evidence totals and root (defaults for a file made before evidence existed).
    pub fn evidence_meta(&self) -> Result<EvidenceMeta, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(META)?;
        match table.get(super::evidence::EVIDENCE_META_KEY)? {
            Some(bytes) => postcard::from_bytes(bytes.value()).map_err(|e| corrupt("evidence meta", e)),
            None => Ok(EvidenceMeta::default()),
        }
    }

    /// Every evidence record in id order (none for a file made before evidence existed).
    pub fn evidence(&self) -> Result<Vec<EvidenceRecord>, Error> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(EVIDENCE) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut out = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            out.push(postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("evidence {id}"), e))?);
        }
        Ok(out)
    }
}
