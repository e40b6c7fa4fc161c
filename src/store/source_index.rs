//! An index opened read-only to be rebuilt: built by any anchor rules of this format.

use super::error::{Error, corrupt};
use super::evidence::{EvidenceMeta, EvidenceRecord};
use super::keys::split_block_key;
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
    format_version: u32,
    /// The repaired copy read instead of the file, if it was not closed cleanly; removed on drop.
    repaired_copy: Option<PathBuf>,
}

impl Drop for SourceIndex {
    fn drop(&mut self) {
        if let Some(copy) = &self.repaired_copy {
            let _ = std::fs::remove_file(copy);
        }
    }
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
        Self::from_db(db, path, None)
    }

    /// [`SourceIndex::open`], and for a file that was not closed cleanly (redb reads such a
    /// file only once repaired): `copy` is made of it, repaired (redb's repair, the one any
    /// writer's open runs) and read instead, so that a repair that fails leaves the file as it
    /// was. The copy is removed when the index is dropped.
    ///
    /// # Errors
    /// As [`SourceIndex::open`], and [`Error::Damaged`] if the copy cannot be repaired.
    pub fn open_or_repair(path: &Path, copy: &Path, options: &StoreOptions) -> Result<SourceIndex, Error> {
        match Self::open(path, options) {
            Err(Error::Database(redb::Error::RepairAborted)) => {}
            other => return other,
        }
        log::warn!("{} was not closed cleanly: rebuilding from a repaired copy", path.display());
        let removed = |e: Error| {
            let _ = std::fs::remove_file(copy);
            e
        };
        std::fs::copy(path, copy).map_err(|source| removed(Error::Io { path: copy.to_path_buf(), source }))?;
        let repaired = super::damage::catch_reported(path, || {
            redb::Database::builder().set_cache_size(options.cache_bytes).create(copy).map(drop)
        });
        let cannot = |detail: String| {
            removed(Error::Unrecoverable {
                path: path.to_path_buf(),
                detail: format!("it was not closed cleanly, and repairing a copy of it failed: {detail}"),
            })
        };
        match repaired {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(cannot(e.to_string())),
            Err(super::damage::Panicked::InRedb(Error::Damaged { detail, .. })) => return Err(cannot(detail)),
            Err(super::damage::Panicked::InRedb(e)) => return Err(cannot(e.to_string())),
            Err(super::damage::Panicked::Other { message, location }) => {
                return Err(cannot(format!(
                    "internal error: {message} (at {location}); this is a bug in ctxgate: please report it with the command that caused it"
                )));
            }
        }
        let db = redb::Database::builder()
            .set_cache_size(options.cache_bytes)
            .open_read_only(copy)
            .map_err(|e| removed(e.into()))?;
        Self::from_db(db, path, Some(copy.to_path_buf())).map_err(removed)
    }

    /// Checks what `db` (the file at `path`, or its repaired copy) holds.
    fn from_db(db: redb::ReadOnlyDatabase, path: &Path, repaired_copy: Option<PathBuf>) -> Result<SourceIndex, Error> {
        let not_ours = || Error::NotAnIndex { path: path.to_path_buf() };
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
        Ok(SourceIndex { db, format_version: meta.format_version, repaired_copy })
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

    /// The values clients stored in the index ([`super::client_values`]), by key.
    pub fn client_values(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(META)?;
        let mut values = Vec::new();
        for entry in table.range::<&str>(super::client_values::PREFIX..)? {
            let (key, value) = entry?;
            let Some(key) = key.value().strip_prefix(super::client_values::PREFIX) else { break };
            values.push((key.to_string(), value.value().to_vec()));
        }
        Ok(values)
    }

    /// The repaired copy read instead of the file, if it was not closed cleanly.
    pub fn repaired_copy(&self) -> Option<&Path> {
        self.repaired_copy.as_deref()
    }

    /// Every session in id order; a record that does not decode is its error, and the others
    /// are still read.
    pub fn sessions(&self) -> Result<Vec<SessionRow>, Error> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(SESSIONS)?;
        let mut out = Vec::new();
        for entry in table.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            out.push((id, super::records::decode_session_row(id, value.value(), self.format_version >= 4)));
        }
        Ok(out)
    }

    /// Every row of `turns` in the file's key order, each decoded and checked (from format 4,
    /// against its checksum). A row that does not decode is its error and the next is read: one
    /// damaged turn costs that turn. The table is walked whole, never by a range that ends at a
    /// key: a damaged key would end such a range early, dropping the intact turns behind it.
    pub fn turn_rows(&self) -> Result<TurnRows, Error> {
        let txn = self.db.begin_read()?;
        let rows = txn.open_table(TURNS)?.range::<u64>(..)?;
        // Format 1 stored a turn as postcard `TurnRecord`; later ones as `turn_text` rows.
        let dictionaries = match self.format_version {
            1 => None,
            _ => Some(txn.open_table(TEXT_DICTIONARIES)?),
        };
        let decoders = if self.format_version < 4 { Decoders::unchecked() } else { Decoders::default() };
        Ok(TurnRows { _txn: txn, rows, dictionaries, decoders, done: false })
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

/// The rows of `turns`, decoded: [`SourceIndex::turn_rows`].
pub struct TurnRows {
    _txn: redb::ReadTransaction,
    rows: redb::Range<'static, u64, &'static [u8]>,
    dictionaries: Option<redb::ReadOnlyTable<u32, &'static [u8]>>,
    decoders: Decoders,
    done: bool,
}

/// A row of `sessions`: the session's id, and its record or why it does not decode.
pub type SessionRow = (u32, Result<SessionRecord, Error>);

/// A row of `turns`: its session and turn (as its key says), and its record or why it does not
/// decode.
pub type TurnRow = (u32, u32, Result<TurnRecord, Error>);

impl Iterator for TurnRows {
    /// A row, or the error that ended the walk (the table itself could not be read further).
    type Item = Result<TurnRow, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let (key, value) = match self.rows.next()? {
            Ok(entry) => entry,
            Err(e) => {
                self.done = true;
                return Some(Err(e.into()));
            }
        };
        let key = key.value();
        let (session, turn) = split_block_key(key);
        let what = || format!("turn {session}:{turn}");
        let record = match &self.dictionaries {
            None => postcard::from_bytes(value.value()).map_err(|e| corrupt(what(), e)),
            Some(dictionaries) => {
                let mut load =
                    |id: u32| dictionaries.get(id)?.map(|g| TextDictionary::from_row(id, g.value())).transpose();
                self.decoders.decode(key, value.value(), what, &mut load)
            }
        };
        Some(Ok((session, turn, record)))
    }
}
