//! The persistent index on redb (DESIGN §6). The only module that names redb.
//!
//! # Tables
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"meta"` | postcard `MetaRecord`: magic, format and anchor-rules versions, N and length sums of folded blocks |
//! | `session_names` | name | session id `u32` |
//! | `sessions` | session id | postcard `SessionRecord`: name, turn count, topic segment start, source |
//! | `turns` | block key `session << 32 \| turn` | gate decision and segment, then the turn's text compressed (`turn_text`) |
//! | `text_dictionaries` | dictionary id | XXH3 of the bytes, then a zstd dictionary trained on the index's turns (`turn_text`) |
//! | `pending` | block key | postcard `ForwardRecord` of a turn not yet folded: anchor hashes with per-side tf, side lengths |
//! | `terms` | anchor hash | document frequency over folded blocks |
//! | `postings` | `hash << 64 \| session << 32 \| turn` of the row's first posting | a row of ≤128 postings of the anchor over consecutive sessions, a segment per session, delta + varint (`postings`, `lists`) |
//! | `norms` | block key of a turn numbered a multiple of 4096 | two one-byte side-length norms a folded turn (`norms`) |
//! | `posting_run_files` | run id | `(offset, length, checksum)` of an import batch's run in the run file `INDEX.runs`; empty outside an import |
//! | `posting_runs` | `run << 64 \| hash` | an import batch's postings of one anchor, as builds before the run file wrote runs; read only to merge runs such a build left |
//! | `evidence` | evidence id | postcard `EvidenceRecord`: ref, kind, digest, sizes, projection, anchors |
//! | `evidence_refs` | evidence ref | evidence id |
//! | `evidence_postings` | `(hash, evidence id)` | term frequency, document length |
//! | `evidence_terms` | anchor hash | evidence documents holding it |
//! | `import_checkpoints` | a log file's absolute path | postcard checkpoint of its last import: where the next one may start reading (`write::resume`); a cache, created by the first write that needs it |
//!
//! Evidence documents are few and large next to turns, and are replaced when their file
//! changes, so their postings are one row per (anchor, document): written and removed directly,
//! no log. `meta` holds their totals under the key `"evidence"`.
//!
//! # Log-structured postings
//! Adding a turn writes its `turns` and `pending` rows and the session row: three small rows,
//! one durable commit, whatever the size of the index. Rewriting the ~100 posting
//! lists and document frequencies a turn touches would copy ~100 pages per commit (4–8 ms,
//! DESIGN §6.8). Instead, when [`FOLD_BATCH`] turns are pending, one transaction folds them
//! into the posting rows and `terms`, rewriting each anchor's tail row once per batch.
//! Readers combine both: document frequencies and N are folded + pending, and recall scores the
//! pending turns of a session from their `pending` rows, which the fold deletes (a folded turn's
//! anchors are in the postings, and can be derived again from its text). Every write is one redb transaction, so
//! a crash leaves either the whole turn (or batch) or none of it.
//!
//! A bulk import of more than one batch does not fold each batch into the lists: it writes
//! each batch's postings as a run, in key order, to a file beside the index (module
//! `run_file`), and merges the runs into the lists at its end (module `runs`). Rows a bulk
//! write has in key order (a batch's turns) go in through one redb cursor, a leaf at a time
//! (module `sorted`).
//!
//! # Sharing the file
//! Every open uses redb's multi-writer mode (docs/DESIGN.md §6.10), but `rebuild`'s source
//! ([`SourceIndex`]: exclusive-mode read-only, which keeps writers out for its run): any number of processes
//! open the file at once, with one write transaction at a time among them.
//! [`Store::open_read_only`] opens redb's `ReadOnlyDatabase`: nothing is created or written
//! (a read-write open changes the file's header even when nothing is written, and its clean
//! close commits), and it reads the last commit without waiting for a writer. Its writes fail
//! [`Error::ReadOnly`]. A read-write open and a write transaction wait for another process's
//! write transaction up to the busy timeout, then fail [`Error::Busy`].

mod client_values;
mod damage;
// The postings subsystem under the names the store's modules use (`super::runs`, ...).
pub(crate) use crate::postings::{codec as postings, cursor, grouped, keys, lists, norms, run_file, runs, sorted};
mod error;
pub(crate) mod evidence;
mod format;
mod index_lock;
pub(crate) mod records;
pub mod redaction;
mod source_index;
pub(crate) mod tables;
pub(crate) mod turn_text;
mod view;

pub use cursor::PostingCursor;
pub use damage::{Panicked, catch_reported};
pub use error::Error;
pub use format::FORMAT_VERSION;
pub use index_lock::{IndexLock, Turnstile, real_path};
#[cfg(any(test, feature = "internals"))]
pub use crate::types::anchor_hash;
pub(crate) use keys::{block_key, split_block_key};
pub use norms::{BlockNorms, NormRows, ROW_TURNS, SessionLengths};
#[cfg(any(test, feature = "internals"))]
pub use norms::Norms;
pub use postings::Posting;
pub use runs::Merged;
#[cfg(any(test, feature = "internals"))]
pub use runs::{NextRun, WrittenRun};
pub use source_index::SourceIndex;
pub use view::{
    CorpusStats, FoldTarget, FoldedTotals, PendingCache, PendingRow, ReadSource, Removed, Source, TableSize, View,
    WriteSource,
};
#[cfg(any(test, feature = "internals"))]
pub use view::{Counts, PendingBlocks};

use error::corrupt;
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::{
    EVIDENCE, EVIDENCE_POSTINGS, EVIDENCE_REFS, EVIDENCE_TERMS, IMPORT_CHECKPOINTS, META, NORMS, PENDING, POSTINGS, POSTINGS_REWRITE,
    RUN_FILES, RUNS, SESSION_NAMES, SESSIONS, TERMS, TEXT_DICTIONARIES, TURNS,
};
use view::Tables;

/// [`Store::rewrite_postings_in_key_order`] leaves a table alone below this share of unused
/// bytes in its pages.
pub const REWRITE_UNUSED_SHARE: f64 = 0.10;

/// Pending turns folded into postings at once (see the module doc).
pub const FOLD_BATCH: usize = 128;

const META_KEY: &str = "meta";
const BUSY_RETRY: Duration = Duration::from_millis(25);

/// How long a file that looks unrepaired is looked at again before a writer repairs it: the
/// moment between one writer's close and another's open that shows a clean file so.
const UNCLEAN_GRACE: Duration = Duration::from_millis(200);

/// Times a read-only open lets a read-write open finish a file before it gives up.
const FINISH_ATTEMPTS: u32 = 3;

/// How to open the file.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// redb page cache in bytes.
    pub cache_bytes: usize,
    /// How long to wait for another process to release the file.
    pub busy_timeout: Duration,
    /// Save allocator state with every commit, so reopening after a crash is instant.
    pub quick_repair: bool,
}

/// An open index file.
pub struct Store {
    // `pub(crate)` for the tests of `crate::postings::runs`, which merge runs through a store.
    pub(crate) db: Engine,
    pub(crate) path: PathBuf,
    quick_repair: bool,
    pub(crate) busy_timeout: Duration,
    /// The pending turns decoded last, shared by the views that find the table unchanged
    /// (and by other stores given the same cache: [`Store::share_pending_cache`]).
    pending: Arc<PendingCache>,
}

/// The redb handle: read-write or read-only, both in redb's multi-writer mode (see the module
/// doc).
pub(crate) enum Engine {
    /// In an `Arc`: a write that waits for another process's waits on a thread of its own.
    ReadWrite(Arc<redb::Database>),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Engine {
    pub(crate) fn begin_read(&self) -> Result<redb::ReadTransaction, redb::TransactionError> {
        match self {
            Engine::ReadWrite(db) => db.begin_read(),
            Engine::ReadOnly(db) => db.begin_read(),
        }
    }

    /// The read-write handle, or [`Error::ReadOnly`].
    fn writable(&self, path: &Path) -> Result<&redb::Database, Error> {
        match self {
            Engine::ReadWrite(db) => Ok(db),
            Engine::ReadOnly(_) => Err(Error::ReadOnly { path: path.to_path_buf() }),
        }
    }

    /// A write transaction, once no other one (of this process or another) is open, waiting
    /// up to `timeout`; then [`Error::Busy`].
    ///
    /// The wait is redb's blocking `begin_write`, in the kernel's queue for the file's writer
    /// lock, on a thread of its own so that it can be given up: polling `try_begin_write`
    /// would almost never find the lock free between two batches of an import, which begins
    /// the next transaction as soon as it commits one. A transaction the thread gets after the
    /// timeout is aborted.
    pub(crate) fn begin_write(&self, path: &Path, timeout: Duration) -> Result<redb::WriteTransaction, Error> {
        let Engine::ReadWrite(db) = self else {
            return Err(Error::ReadOnly { path: path.to_path_buf() });
        };
        match db.try_begin_write() {
            Ok(txn) => return Ok(txn),
            Err(redb::TransactionError::WouldBlock) => {}
            Err(e) => return Err(e.into()),
        }
        let db = Arc::clone(db);
        // A transaction the thread gets after the timeout is dropped there: aborted.
        Ok(wait_on_thread(path, timeout, None, move || db.begin_write())??)
    }
}

/// The redb builder of every open: the page cache, and the multi-writer mode, which every
/// process that opens the file must use.
fn builder(options: &StoreOptions) -> redb::Builder {
    let mut builder = redb::Database::builder();
    builder.set_cache_size(options.cache_bytes).set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
    builder
}

/// What a look at an existing file without modifying it found.
enum Look {
    /// A ctxgate index of this version, open read-only.
    Index(redb::ReadOnlyDatabase),
    /// A redb file that was not closed cleanly: only a read-write open can repair it.
    Unclean,
    /// A redb file without tables: an index once a read-write open initializes it.
    Empty,
}

impl Store {
    /// Opens the index at `path`, creating it if the file does not exist or is empty.
    ///
    /// # Errors
    /// [`Error::MissingDirectory`], [`Error::NotAnIndex`], [`Error::TooNew`],
    /// [`Error::NeedsRebuild`], [`Error::Busy`] after `busy_timeout`, [`Error::Damaged`]
    /// (redb panicked reading the file, or found it inconsistent).
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store, Error> {
        damage::catch_redb_panic(path, || Store::open_checked(path, options))
    }

    /// Opens the existing index at `path` read-only: no file is created or modified, and other
    /// read-only opens may share it (a read-write open waits for them, as they wait for it).
    ///
    /// A file a writer left unfinished is first finished by a read-write open, logged: redb's
    /// repair of a file not closed cleanly, the merge of a killed import's runs, the evidence
    /// tables of an index made before evidence existed. Otherwise nothing writes.
    ///
    /// # Errors
    /// [`Error::UnknownIndex`] if there is no file (or an empty one) at `path`; else as
    /// [`Store::open`].
    pub fn open_read_only(path: &Path, options: &StoreOptions) -> Result<Store, Error> {
        damage::catch_redb_panic(path, || Store::open_read_only_checked(path, options))
    }

    fn open_read_only_checked(path: &Path, options: &StoreOptions) -> Result<Store, Error> {
        let unknown = || Error::UnknownIndex { path: path.to_path_buf() };
        match std::fs::metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(unknown()),
            Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
            Ok(m) if m.is_dir() => return Err(Error::NotAnIndex { path: path.to_path_buf() }),
            Ok(m) if !m.is_file() => return Err(Error::NotARegularFile { path: path.to_path_buf() }),
            Ok(m) if m.len() == 0 => return Err(unknown()),
            Ok(_) => {}
        }
        let mut finished = 0;
        loop {
            let unfinished = match look(path, options)? {
                Look::Empty => return Err(unknown()),
                Look::Unclean => "it was not closed cleanly",
                Look::Index(db) => {
                    let txn = db.begin_read()?;
                    let evidence = txn.list_tables()?.any(|t| redb::TableHandle::name(&t) == "evidence");
                    let runs = has_rows(&txn, RUNS)? || has_rows(&txn, RUN_FILES)?;
                    drop(txn);
                    // Runs of a live import (it holds the lock) are its to merge: read as is.
                    // A lock file this user cannot open leaves them too.
                    let interrupted = runs && IndexLock::try_exclusive(path).is_ok_and(|lock| lock.is_some());
                    if evidence && !interrupted {
                        return Ok(Store::new(Engine::ReadOnly(db), path, options));
                    }
                    if evidence && interrupted && finished < FINISH_ATTEMPTS {
                        // Merging needs room to write. A read does not: on a full disk (or a
                        // read-only one) it reads the committed turns as they are, without
                        // the runs' postings, and says so.
                        log::info!("{}: an import was interrupted; merging its runs before reading", path.display());
                        match Store::open(path, options) {
                            Ok(store) => drop(store),
                            Err(e) if e.is_write_failure() => {
                                log::warn!(
                                    "{}: the runs of an interrupted import cannot be merged ({e}); reading without them: \
                                     recall misses its last turns until a writer merges them (free disk space, then run any write, e.g. `ctxgate compact`)",
                                    path.display()
                                );
                                return Ok(Store::new(Engine::ReadOnly(db), path, options));
                            }
                            Err(e) => return Err(e),
                        }
                        finished += 1;
                        continue;
                    }
                    if interrupted { "an import was interrupted" } else { "it has no evidence tables yet" }
                }
            };
            if finished == FINISH_ATTEMPTS {
                // Other writers left it unfinished again each time: it is in use, retry.
                return Err(Error::Busy { path: path.to_path_buf(), waited: Duration::ZERO });
            }
            log::info!("{}: {unfinished}; finishing it before reading it", path.display());
            if matches!(unfinished, "it was not closed cleanly") {
                // Repair only (redb's, in place), without merging runs, which needs room.
                check_existing(path, options)?;
                drop(damage::catch_redb_panic(path, || open_writer(path, options))?);
            } else {
                drop(Store::open(path, options)?);
            }
            finished += 1;
        }
    }

    fn open_checked(path: &Path, options: &StoreOptions) -> Result<Store, Error> {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(Error::MissingDirectory { path: parent.to_path_buf() });
        }
        if path.is_dir() {
            return Err(Error::NotAnIndex { path: path.to_path_buf() });
        }
        // A FIFO or a device would block the first read or fail with EINVAL (issue 23).
        if path.metadata().is_ok_and(|m| !m.is_file()) {
            return Err(Error::NotARegularFile { path: path.to_path_buf() });
        }
        let existed = path.metadata().map(|m| m.len() > 0).unwrap_or(false);
        if existed {
            // Look before writing: opening read-write changes a redb file even if it is not ours.
            check_existing(path, options)?;
        } else if std::fs::symlink_metadata(path).is_err() {
            create_whole(path, options)?;
        }
        let db = open_writer(path, options)?;
        let store = Store::new(Engine::ReadWrite(Arc::new(db)), path, options);
        store.check_or_initialize()?;
        store.merge_interrupted_runs(None)?;
        Ok(store)
    }

    fn new(db: Engine, path: &Path, options: &StoreOptions) -> Store {
        Store {
            db,
            path: path.to_path_buf(),
            quick_repair: options.quick_repair,
            busy_timeout: options.busy_timeout,
            pending: Arc::default(),
        }
    }

    /// Shares `cache` with this store: a process that opens the index for every call (the
    /// MCP server) keeps the pending turns decoded across calls. Correct for any index, as
    /// the cache is keyed by the content of the `pending` table.
    pub(crate) fn share_pending_cache(&mut self, cache: Arc<PendingCache>) {
        self.pending = cache;
    }

    /// Merges the runs an import that was killed before its end left (see [`runs`]) — those
    /// of no live import: `held` is the index lock held exclusively, else it is tried here,
    /// and while an import holds it, its runs are left to it. Readers do not see the postings
    /// of runs, so a writer does this when it opens the index. Removes a run file no recorded
    /// run refers to.
    pub fn merge_interrupted_runs(&self, held: Option<&IndexLock>) -> Result<(), Error> {
        let txn = self.db.begin_read()?;
        let left = has_rows(&txn, RUNS)? || has_rows(&txn, RUN_FILES)?;
        let file = run_file::path_of(&self.path).exists();
        drop(txn);
        if !left && !file {
            return Ok(());
        }
        let taken = match held {
            Some(_) => None,
            None => match IndexLock::try_exclusive(&self.path)? {
                Some(lock) => Some(lock),
                None => {
                    log::debug!("{}: an import is writing runs; they are its to merge", self.path.display());
                    return Ok(());
                }
            },
        };
        if left {
            // Read through before the merge's write begins: runs that writers whose locks did
            // not hold wrote over each other are refused here, not met half-way through it.
            self.verify_file_runs()?;
            log::warn!("{}: merging the postings of an interrupted import", self.path.display());
            let merged = self.merge_runs()?;
            log::info!(
                "merged {} runs into {} posting lists ({} chunks)",
                merged.runs,
                merged.lists,
                merged.chunks
            );
        }
        self.remove_run_file(held.or(taken.as_ref()))
    }

    /// Checks every run the `posting_run_files` table records against the run file
    /// ([`run_file::verify`]).
    fn verify_file_runs(&self) -> Result<(), Error> {
        let txn = self.db.begin_read()?;
        let table = match txn.open_table(RUN_FILES) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        let mut spans = Vec::new();
        for entry in table.iter()? {
            let (run, span) = entry?;
            spans.push((run.value(), run_file::RunSpan::from_row(span.value())));
        }
        Ok(run_file::verify(&run_file::path_of(&self.path), &spans)?)
    }

    /// Removes the run file if no import can be using it: when no process holds the index
    /// lock (or `held`, this one's exclusive hold of it) and no recorded run refers to it.
    /// An import ends with this once it has merged its runs and let go of its shared hold.
    pub fn remove_unused_run_file(&self) -> Result<(), Error> {
        if !run_file::path_of(&self.path).exists() {
            return Ok(());
        }
        match IndexLock::try_exclusive(&self.path)? {
            Some(lock) => self.remove_run_file(Some(&lock)),
            None => Ok(()),
        }
    }

    /// Appends the postings of the recorded runs to the posting lists and forgets the runs, in
    /// one durable transaction (see the `runs` module); also those of the `posting_runs` table
    /// an older build left.
    pub fn merge_runs(&self) -> Result<Merged, Error> {
        let read = self.db.begin_read()?;
        if !has_rows(&read, RUNS)? {
            drop(read);
            return self.write(|view| view.merge_runs());
        }
        let mut txn = self.db.begin_write(&self.path, self.busy_timeout)?;
        // Begun once the write transaction holds the index: both see the same runs.
        let read = self.db.begin_read()?;
        txn.set_quick_repair(self.quick_repair);
        let mut spans = Vec::new();
        for entry in txn.open_table(RUN_FILES)?.iter()? {
            let (run, span) = entry?;
            spans.push((run.value(), run_file::RunSpan::from_row(span.value())));
        }
        let file = run_file::path_of(&self.path);
        let merged = runs::merge_into(&mut txn.open_table(POSTINGS)?, Some(read), spans, &file)?;
        txn.delete_table(RUNS)?;
        txn.delete_table(RUN_FILES)?;
        txn.commit()?;
        Ok(merged)
    }

    /// Removes the run file if no recorded run refers to it. `_held` proves that no import is
    /// writing runs: an import holds the index lock shared while it does. A file that stays
    /// (a failure to remove it) is cut to size by the next import's first run.
    fn remove_run_file(&self, _held: Option<&IndexLock>) -> Result<(), Error> {
        let txn = self.db.begin_read()?;
        if has_rows(&txn, RUN_FILES)? {
            return Ok(());
        }
        drop(txn);
        let path = run_file::path_of(&self.path);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => log::warn!("cannot remove {}: {e}", path.display()),
        }
        Ok(())
    }

    fn check_or_initialize(&self) -> Result<(), Error> {
        // `check_existing` looked already when the file existed; this covers a file created
        // by a concurrent process in between, and the new file.
        let txn = self.db.begin_read()?;
        match txn.open_table(META) {
            Ok(table) => {
                let bytes = table.get(META_KEY)?.ok_or_else(|| meta_missing(&self.path, &txn))?;
                format::check_meta(&self.path, bytes.value())?;
                let has_evidence = txn.list_tables()?.any(|t| redb::TableHandle::name(&t) == "evidence");
                drop(table);
                drop(txn);
                if !has_evidence {
                    // An index made before evidence existed: the same format plus four tables.
                    let txn = self.db.begin_write(&self.path, self.busy_timeout)?;
                    create_evidence_tables(&txn)?;
                    txn.commit()?;
                }
                Ok(())
            }
            Err(redb::TableError::TableDoesNotExist(_)) => {
                if txn.list_tables()?.next().is_some() {
                    return Err(Error::NotAnIndex { path: self.path.clone() });
                }
                drop(txn);
                self.initialize()
            }
            Err(redb::TableError::TableTypeMismatch { .. }) => {
                Err(Error::NotAnIndex { path: self.path.clone() })
            }
            Err(e) => Err(e.into()),
        }
    }

    fn initialize(&self) -> Result<(), Error> {
        let txn = self.db.begin_write(&self.path, self.busy_timeout)?;
        {
            let mut meta = txn.open_table(META)?;
            if meta.get(META_KEY)?.is_some() {
                // Another process created the index since this one looked.
                drop(meta);
                txn.abort()?;
                return self.check_or_initialize();
            }
            let bytes = postcard::to_allocvec(&format::new_meta()).map_err(|e| corrupt("new meta", e))?;
            meta.insert(META_KEY, bytes.as_slice())?;
            txn.open_table(SESSION_NAMES)?;
            txn.open_table(SESSIONS)?;
            txn.open_table(TURNS)?;
            txn.open_table(PENDING)?;
            txn.open_table(TEXT_DICTIONARIES)?;
            txn.open_table(TERMS)?;
            txn.open_table(POSTINGS)?;
            txn.open_table(NORMS)?;
            create_evidence_tables(&txn)?;
        }
        txn.commit()?;
        log::debug!("initialized {}", self.path.display());
        Ok(())
    }

    /// The index file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Size of the index file in bytes.
    pub fn file_size(&self) -> Result<u64, Error> {
        std::fs::metadata(&self.path)
            .map(|m| m.len())
            .map_err(|source| Error::Io { path: self.path.clone(), source })
    }

    /// Bytes the index file takes on disk, and bytes its data takes (keys, values and the
    /// B-trees' own metadata): the difference is free pages and the unused part of part-full
    /// ones (redb grows its file ahead of use; those bytes are not on disk until written).
    /// Takes the write lock for a moment, to read the trees' statistics.
    pub fn disk_and_data_bytes(&self) -> Result<(u64, u64), Error> {
        let metadata = std::fs::metadata(&self.path).map_err(|source| Error::Io { path: self.path.clone(), source })?;
        #[cfg(unix)]
        let on_disk = std::os::unix::fs::MetadataExt::blocks(&metadata).saturating_mul(512).min(metadata.len());
        #[cfg(not(unix))]
        let on_disk = metadata.len();
        let txn = self.db.begin_write(&self.path, self.busy_timeout)?;
        let stats = txn.stats()?;
        let data = stats.stored_bytes() + stats.metadata_bytes();
        txn.abort()?;
        Ok((on_disk, data))
    }

    /// The import checkpoint stored for `key` (`import_checkpoints`), in its own read
    /// transaction; `None` also for an index made before the table existed.
    pub fn import_checkpoint(&self, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        damage::catch_redb_panic(&self.path, || {
            let txn = self.db.begin_read()?;
            match txn.open_table(IMPORT_CHECKPOINTS) {
                Ok(table) => Ok(table.get(key)?.map(|v| v.value().to_vec())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// Trains the index's text dictionary if it is due after `added` more turns
    /// ([`View::text_dictionary_due`]); an import calls it after each file, as the fold of
    /// turns added one at a time does.
    /// A failure is logged, not returned: the turns are stored; they are only compressed
    /// without a dictionary.
    pub fn train_text_dictionary_if_due(&self, added: u64) {
        let due = || -> Result<bool, Error> { Ok(added > 0 && self.read()?.text_dictionary_due(added)?) };
        let trained = match due() {
            Ok(true) => self.write(|view| view.train_text_dictionary_if_due(added)),
            Ok(false) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = trained {
            log::warn!("no text dictionary trained: {e}");
        }
    }

    /// A consistent snapshot for reading (one redb read transaction).
    pub fn read(&self) -> Result<View<ReadSource>, Error> {
        let txn = self.db.begin_read()?;
        // The file passed the open's checks: one of its tables gone is damage (a flipped bit
        // in redb's table of tables), not another program's file.
        let path = &self.path;
        View::open(
            &self.path,
            Tables {
                meta: open_ours(&txn, META, path)?,
                names: open_ours(&txn, SESSION_NAMES, path)?,
                sessions: open_ours(&txn, SESSIONS, path)?,
                turns: open_ours(&txn, TURNS, path)?,
                pending: open_ours(&txn, PENDING, path)?,
                dictionaries: open_ours(&txn, TEXT_DICTIONARIES, path)?,
                terms: open_ours(&txn, TERMS, path)?,
                postings: open_ours(&txn, POSTINGS, path)?,
                norms: open_ours(&txn, NORMS, path)?,
                evidence: open_ours(&txn, EVIDENCE, path)?,
                evidence_refs: open_ours(&txn, EVIDENCE_REFS, path)?,
                evidence_postings: open_ours(&txn, EVIDENCE_POSTINGS, path)?,
                evidence_terms: open_ours(&txn, EVIDENCE_TERMS, path)?,
                runs: has_rows(&txn, RUN_FILES)? || has_rows(&txn, RUNS)?,
                checkpoints: (),
            },
            &self.pending,
        )
    }

    /// Runs `f` in one durable write transaction; commits only if `f` succeeds. A panic
    /// inside redb (a damaged file) is [`Error::Damaged`].
    pub fn write<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&mut View<WriteSource<'_>>) -> Result<T, E>,
    ) -> Result<T, E> {
        damage::catch_redb_panic(&self.path, || self.write_unguarded(f))
    }

    fn write_unguarded<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&mut View<WriteSource<'_>>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut txn = self.db.begin_write(&self.path, self.busy_timeout)?;
        txn.set_quick_repair(self.quick_repair);
        // Opening a table in a write transaction creates it: one gone from redb's table of
        // tables (damage) would come back empty, its text dictionaries' ids handed out again
        // to other dictionaries than the rows name.
        use redb::TableHandle;
        let present: Vec<String> = txn.list_tables().map_err(Error::from)?.map(|t| t.name().to_string()).collect();
        if let Some(missing) = CORE_TABLES.iter().find(|name| !present.iter().any(|p| p == *name)) {
            return Err(Error::Damaged { path: self.path.clone(), detail: format!("its table {missing} is missing") }.into());
        }
        let (result, pending) = {
            let tables = Tables {
                meta: txn.open_table(META).map_err(Error::from)?,
                names: txn.open_table(SESSION_NAMES).map_err(Error::from)?,
                sessions: txn.open_table(SESSIONS).map_err(Error::from)?,
                turns: txn.open_table(TURNS).map_err(Error::from)?,
                pending: txn.open_table(PENDING).map_err(Error::from)?,
                dictionaries: txn.open_table(TEXT_DICTIONARIES).map_err(Error::from)?,
                terms: txn.open_table(TERMS).map_err(Error::from)?,
                postings: txn.open_table(POSTINGS).map_err(Error::from)?,
                norms: txn.open_table(NORMS).map_err(Error::from)?,
                evidence: txn.open_table(EVIDENCE).map_err(Error::from)?,
                evidence_refs: txn.open_table(EVIDENCE_REFS).map_err(Error::from)?,
                evidence_postings: txn.open_table(EVIDENCE_POSTINGS).map_err(Error::from)?,
                evidence_terms: txn.open_table(EVIDENCE_TERMS).map_err(Error::from)?,
                runs: txn.open_table(RUN_FILES).map_err(Error::from)?,
                checkpoints: txn.open_table(IMPORT_CHECKPOINTS).map_err(Error::from)?,
            };
            let mut view = View::open(&self.path, tables, &self.pending)?;
            let value = f(&mut view)?;
            view.save_meta()?;
            (value, view.pending_to_cache())
        };
        txn.commit().map_err(Error::from)?;
        if let Some((fingerprint, blocks)) = pending {
            self.pending.put(fingerprint, blocks);
        }
        Ok(result)
    }

    /// Rewrites the posting chunks into a new table in key order that then replaces the old
    /// one, in one durable transaction; calls `progress(chunks copied, chunks)` before the first
    /// chunk and after each one (the caller throttles). Returns the number of chunks.
    ///
    /// A B-tree filled by inserts all over its key space (every fold adds to the lists of
    /// anchors everywhere in it) splits pages and leaves them partly empty: at 100k imported
    /// turns, 39% of the posting pages' bytes were unused. Loaded in key order, the pages fill
    /// (there: 21,359 leaf pages -> 13,684). The turns table gains nothing from this: its
    /// rows arrive in key order, and what its pages leave unused is the remainder of rows of
    /// ~700 bytes in 4 KiB pages.
    ///
    /// The copy needs about the table's size in free disk space while it runs, so a table
    /// whose pages leave less than [`REWRITE_UNUSED_SHARE`] of their bytes unused (one already
    /// rewritten, say) is left as it is: then `progress(0, 0)` and 0 chunks.
    pub fn rewrite_postings_in_key_order(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<u64, Error> {
        let mut txn = self.db.begin_write(&self.path, self.busy_timeout)?;
        txn.set_quick_repair(self.quick_repair);
        let total = {
            let old = txn.open_table(POSTINGS)?;
            let stats = old.stats()?;
            let used = stats.stored_bytes() + stats.metadata_bytes();
            let unused = stats.fragmented_bytes();
            if (unused as f64) < REWRITE_UNUSED_SHARE * (used + unused) as f64 {
                progress(0, 0);
                return Ok(0);
            }
            // Nothing is ever left in it (it lives inside this transaction), but a copy into a
            // table that held rows would keep them.
            txn.delete_table(POSTINGS_REWRITE)?;
            let mut new = txn.open_table(POSTINGS_REWRITE)?;
            let total = old.len()?;
            progress(0, total);
            let mut copied = 0u64;
            for entry in old.iter()? {
                let (key, value) = entry?;
                new.insert(key.value(), value.value())?;
                copied += 1;
                progress(copied, total);
            }
            copied
        };
        txn.delete_table(POSTINGS)?;
        txn.rename_table(POSTINGS_REWRITE, POSTINGS)?;
        txn.commit()?;
        Ok(total)
    }

    /// Compacts the file (redb `Database::compact`): moves pages down and truncates the free
    /// space at the end. Returns true if anything moved. Needs no open transaction in any
    /// process: while another has one, it tries again, up to `timeout`, then fails
    /// [`Error::Busy`]. While it runs, the other processes' transactions wait for it.
    pub fn compact(&mut self, timeout: Duration) -> Result<bool, Error> {
        let path = self.path.clone();
        let Engine::ReadWrite(db) = &mut self.db else { return Err(Error::ReadOnly { path }) };
        // A write of this store that gave up waiting still holds the handle until it ends.
        let db = Arc::get_mut(db).ok_or_else(|| Error::Busy { path: path.clone(), waited: Duration::ZERO })?;
        let started = Instant::now();
        loop {
            match db.compact() {
                Ok(moved) => return Ok(moved),
                Err(redb::CompactionError::TransactionInProgress) if started.elapsed() < timeout => {
                    std::thread::sleep(BUSY_RETRY);
                }
                Err(redb::CompactionError::TransactionInProgress) => {
                    return Err(Error::Busy { path, waited: started.elapsed() });
                }
                Err(e) => return Err(redb::Error::from(e).into()),
            }
        }
    }

    /// Whether the index was opened read-only ([`Store::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        matches!(self.db, Engine::ReadOnly(_))
    }

    /// [`Error::ReadOnly`] if the index was opened read-only: for writers that touch files
    /// beside the index before their first transaction.
    pub fn check_writable(&self) -> Result<(), Error> {
        self.db.writable(&self.path).map(|_| ())
    }
}

/// Whether `table` exists in the snapshot and has a row.
pub(crate) fn has_rows<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    table: redb::TableDefinition<K, V>,
) -> Result<bool, Error> {
    match txn.open_table(table) {
        Ok(table) => Ok(!table.is_empty()?),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

fn create_evidence_tables(txn: &redb::WriteTransaction) -> Result<(), Error> {
    txn.open_table(EVIDENCE)?;
    txn.open_table(EVIDENCE_REFS)?;
    txn.open_table(EVIDENCE_POSTINGS)?;
    txn.open_table(EVIDENCE_TERMS)?;
    Ok(())
}

/// The tables every index of this format is created with.
const CORE_TABLES: [&str; 13] = [
    "meta",
    "session_names",
    "sessions",
    "turns",
    "pending",
    "text_dictionaries",
    "terms",
    "postings",
    "norms",
    "evidence",
    "evidence_refs",
    "evidence_postings",
    "evidence_terms",
];

/// Opens one of the tables every index has, in a read transaction: a missing one means the
/// file is damaged.
fn open_ours<K: redb::Key + 'static, V: redb::Value + 'static>(
    txn: &redb::ReadTransaction,
    table: redb::TableDefinition<K, V>,
    path: &Path,
) -> Result<redb::ReadOnlyTable<K, V>, Error> {
    match txn.open_table(table) {
        Ok(table) => Ok(table),
        Err(redb::TableError::TableDoesNotExist(name)) => {
            Err(Error::Damaged { path: path.to_path_buf(), detail: format!("its table {name} is missing") })
        }
        Err(e) => Err(e.into()),
    }
}

/// A `meta` table without its record: a damaged index if the file has the other tables an
/// index is created with in the same transaction (a key whose bytes changed), else a file of
/// another program.
fn meta_missing(path: &Path, txn: &redb::ReadTransaction) -> Error {
    let names: Vec<String> = match txn.list_tables() {
        Ok(tables) => tables.map(|t| t.name().to_string()).collect(),
        Err(_) => Vec::new(),
    };
    use redb::TableHandle;
    let ours = [SESSION_NAMES.name(), TURNS.name(), POSTINGS.name()];
    if ours.iter().all(|name| names.iter().any(|n| n == name)) {
        Error::Damaged { path: path.to_path_buf(), detail: "its meta table has no meta record".into() }
    } else {
        Error::NotAnIndex { path: path.to_path_buf() }
    }
}

/// The first bytes of every redb file.
const REDB_MAGIC: &[u8] = b"redb\x1a\x0a\xa9\x0d\x0a";

/// How many bits differ between `a` and `b`.
fn bits_apart(a: &[u8], b: &[u8]) -> u32 {
    a.iter().zip(b).map(|(x, y)| (x ^ y).count_ones()).sum()
}

/// Checks, without modifying it, that an existing file is a ctxgate index of this version.
/// Creates a new index at `path` whole: made and initialized under a name of its own, then
/// linked in (a link fails if the name exists). Processes that open a new index at once (hooks
/// of agents started together) never see one half made, which is not an index yet; the first
/// link wins, and the others open it. Where the file system has no hard links, the index is
/// made in place as before.
fn create_whole(path: &Path, options: &StoreOptions) -> Result<(), Error> {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(format!(".new-{}", std::process::id()));
    let made = path.with_file_name(name);
    let _ = std::fs::remove_file(&made); // left by a killed process of the same id
    let initialized = open_writer(&made, options).and_then(|db| {
        Store::new(Engine::ReadWrite(Arc::new(db)), &made, options).check_or_initialize()
    });
    if let Err(e) = initialized {
        let _ = std::fs::remove_file(&made);
        return Err(e);
    }
    let linked = std::fs::hard_link(&made, path);
    let _ = std::fs::remove_file(&made);
    match linked {
        Ok(()) => log::info!("created index {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => log::info!("created index {} ({e}: made in place)", path.display()),
    }
    Ok(())
}

fn check_existing(path: &Path, options: &StoreOptions) -> Result<(), Error> {
    if let Look::Unclean = look(path, options)? {
        log::warn!("{} was not closed cleanly; repairing it", path.display());
    }
    Ok(())
}

/// Looks at an existing file without modifying it: a ctxgate index of this version (open
/// read-only), a redb file to repair or to initialize, or an error.
fn look(path: &Path, options: &StoreOptions) -> Result<Look, Error> {
    let not_ours = || Error::NotAnIndex { path: path.to_path_buf() };
    let mut head = [0u8; 9];
    let read = std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    match read {
        Ok(()) if head == REDB_MAGIC => {}
        // A bit or two off: a damaged redb header, not a file of another format.
        Ok(()) if bits_apart(&head, REDB_MAGIC) <= 2 => {
            let detail = "its first bytes are not quite redb's".into();
            return Err(Error::Damaged { path: path.to_path_buf(), detail });
        }
        Ok(()) => return Err(not_ours()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(not_ours()),
        Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
    }
    let started = Instant::now();
    let db = loop {
        let db = with_busy_wait(path, options.busy_timeout, || match builder(options).open_read_only(path) {
            // Marked unrepaired with no live writer holding it consistent: a process was
            // killed with the file open, or, for a moment, the last writer closed while
            // another was opening. A read-only open cannot repair it; the read-write open that
            // follows does, then checks that it is an index.
            Err(redb::DatabaseError::RepairAborted) => Ok(None),
            other => other.map(Some),
        })?;
        match db {
            Some(db) => break db,
            None if started.elapsed() < UNCLEAN_GRACE => std::thread::sleep(UNCLEAN_GRACE / 20),
            None => return Ok(Look::Unclean),
        }
    };
    let txn = db.begin_read()?;
    match txn.open_table(META) {
        Ok(table) => {
            let bytes = table.get(META_KEY)?.ok_or_else(|| meta_missing(path, &txn))?;
            format::check_meta(path, bytes.value())?;
            drop(table);
            drop(txn);
            Ok(Look::Index(db))
        }
        // An empty redb file becomes an index; one with other tables is someone else's.
        Err(redb::TableError::TableDoesNotExist(_)) if txn.list_tables()?.next().is_none() => Ok(Look::Empty),
        Err(redb::TableError::TableDoesNotExist(_) | redb::TableError::TableTypeMismatch { .. }) => {
            Err(not_ours())
        }
        Err(e) => Err(e.into()),
    }
}

/// Opens the file read-write, waiting up to the busy timeout: for a process that holds it
/// whole (a maintenance job, an older ctxgate), and for another process's write transaction,
/// which a read-write open waits for (redb takes the writer lock to load the allocator
/// state). The wait runs on a thread of its own so that it can be given up; a database it
/// opens after that is closed again.
fn open_writer(path: &Path, options: &StoreOptions) -> Result<redb::Database, Error> {
    // Held until the file is open: a rebuild that closed it is let in first (`IndexLock`'s
    // module doc).
    let _pass = Turnstile::pass(path, options.busy_timeout)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if !index_lock::locks_hold(dir) {
        return Err(Error::LocksDoNotHold { path: path.to_path_buf() });
    }
    let (owned, options) = (path.to_path_buf(), options.clone());
    // A little past the timeout: a wait for a process that holds the file ends on its own.
    let timeout = options.busy_timeout + BUSY_RETRY * 2;
    // Once the open repairs the file it holds it: the wait is over, and the repair (a walk of
    // the whole file) takes as long as it takes.
    let repairing = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = Arc::clone(&repairing);
    let shown = path.display().to_string();
    wait_on_thread(path, timeout, Some(&repairing), move || {
        with_busy_wait(&owned, options.busy_timeout, || {
            let mut builder = builder(&options);
            let (seen, shown) = (Arc::clone(&seen), shown.clone());
            builder.set_repair_callback(move |session| {
                seen.store(true, std::sync::atomic::Ordering::Release);
                log::info!("{shown}: repair {:.0}% done", session.progress() * 100.0);
            });
            builder.create(&owned)
        })
    })?
}

/// Runs `work`, which may block on another process's lock, on a thread of its own, and gives
/// up on it after `timeout`: [`Error::Busy`]; unless `past_the_wait` is set by then (`work`
/// holds the lock and is busy with the file itself), when it waits for `work` to end. What it
/// returns after it was given up is dropped on its thread. A panic in `work` (redb's, on a
/// damaged file) goes on on this thread, where the callers catch it.
fn wait_on_thread<T: Send + 'static>(
    path: &Path,
    timeout: Duration,
    past_the_wait: Option<&std::sync::atomic::AtomicBool>,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    let started = Instant::now();
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    let thread = std::thread::Builder::new()
        .name("ctxgate-wait".into())
        .spawn(move || {
            let _ = sender.send(work());
        })
        .map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    let mut answer = receiver.recv_timeout(timeout);
    if matches!(answer, Err(std::sync::mpsc::RecvTimeoutError::Timeout))
        && past_the_wait.is_some_and(|flag| flag.load(std::sync::atomic::Ordering::Acquire))
    {
        answer = receiver.recv().map_err(|_| std::sync::mpsc::RecvTimeoutError::Disconnected);
    }
    match answer {
        Ok(done) => {
            // It ends right after sending; joined, it has dropped what it held (the handle a
            // compaction needs alone).
            let _ = thread.join();
            Ok(done)
        }
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => match thread.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => Err(Error::bug("a waiting thread ended without an answer")),
        },
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
            Err(Error::Busy { path: path.to_path_buf(), waited: started.elapsed() })
        }
    }
}

/// Calls `open` until the file is not held by another process, or `timeout` has passed.
fn with_busy_wait<T>(
    path: &Path,
    timeout: Duration,
    open: impl Fn() -> Result<T, redb::DatabaseError>,
) -> Result<T, Error> {
    let started = Instant::now();
    loop {
        match open() {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                if started.elapsed() >= timeout {
                    return Err(Error::Busy { path: path.to_path_buf(), waited: started.elapsed() });
                }
                std::thread::sleep(BUSY_RETRY);
            }
            Err(redb::DatabaseError::Storage(redb::StorageError::Io(source))) => {
                return Err(Error::Io { path: path.to_path_buf(), source });
            }
            Err(redb::DatabaseError::UpgradeRequired(_)) => {
                return Err(Error::NotAnIndex { path: path.to_path_buf() });
            }
            // The file begins as a redb file does (`check_existing` looked), so it is damaged.
            Err(redb::DatabaseError::Storage(redb::StorageError::Corrupted(message))) => {
                let detail = format!("the database engine reports: {message}");
                return Err(Error::Damaged { path: path.to_path_buf(), detail });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_tables_are_those_a_new_index_is_made_with() -> Result<(), Error> {
        use redb::TableHandle;
        let dir = tempfile::tempdir().map_err(|e| Error::Io { path: "tempdir".into(), source: e })?;
        let path = dir.path().join("index.redb");
        let options = StoreOptions { cache_bytes: 1 << 20, busy_timeout: Duration::from_secs(5), quick_repair: false };
        let store = Store::open(&path, &options)?;
        let Engine::ReadWrite(db) = &store.db else { panic!("opened read-write") };
        let mut made: Vec<String> = db.begin_read()?.list_tables()?.map(|t| t.name().to_string()).collect();
        made.sort();
        let mut core = CORE_TABLES.map(str::to_string).to_vec();
        core.sort();
        assert_eq!(made, core);
        for name in [TEXT_DICTIONARIES.name(), EVIDENCE_TERMS.name(), TURNS.name()] {
            assert!(CORE_TABLES.contains(&name), "{name}");
        }
        Ok(())
    }

    /// The busy timeout bounds the wait for another process, not work past it: an open that
    /// has begun repairing the file is waited for; one still waiting is given up.
    #[test]
    fn a_wait_is_given_up_but_not_the_work_past_it() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let path = Path::new("index.redb");
        // Work past the wait, ten times the timeout: waited for.
        let past = AtomicBool::new(true);
        let slow = || {
            std::thread::sleep(Duration::from_millis(200));
            7
        };
        assert_eq!(wait_on_thread(path, Duration::from_millis(20), Some(&past), slow).unwrap(), 7);
        // Work that gets past the wait during it (as an open that begins to repair does): a
        // second for its thread to start and set the flag, then it outlasts the timeout.
        let past = Arc::new(AtomicBool::new(false));
        let work = {
            let past = Arc::clone(&past);
            move || {
                past.store(true, Ordering::Release);
                std::thread::sleep(Duration::from_millis(1500));
                8
            }
        };
        assert_eq!(wait_on_thread(path, Duration::from_secs(1), Some(&past), work).unwrap(), 8);
        // Still waiting (the work cannot end before the test lets it, however the threads are
        // scheduled; a wait that ignored the timeout ends at 5 s, with an answer): given up.
        let waiting = AtomicBool::new(false);
        let (release, released) = std::sync::mpsc::channel::<()>();
        let work = move || released.recv_timeout(Duration::from_secs(5)).is_ok();
        let given_up = wait_on_thread(path, Duration::from_millis(20), Some(&waiting), work);
        assert!(matches!(given_up, Err(Error::Busy { .. })), "{given_up:?}");
        drop(release);
    }

    fn leaf_pages(store: &Store) -> u64 {
        let txn = store.db.begin_read().unwrap();
        txn.open_table(POSTINGS).unwrap().stats().unwrap().leaf_pages()
    }

    fn rows(store: &Store) -> Vec<(u128, Vec<u8>)> {
        let txn = store.db.begin_read().unwrap();
        let table = txn.open_table(POSTINGS).unwrap();
        table.iter().unwrap().map(|e| e.map(|(k, v)| (k.value(), v.value().to_vec())).unwrap()).collect()
    }

    #[test]
    fn postings_rewritten_in_key_order_keep_every_chunk_in_fewer_pages() {
        let dir = tempfile::tempdir().unwrap();
        let options =
            StoreOptions { cache_bytes: 1 << 20, busy_timeout: Duration::from_secs(1), quick_repair: false };
        let store = Store::open(&dir.path().join("index.redb"), &options).unwrap();
        // Keys in a scrambled order, and chunks growing fold after fold, as folds write them:
        // pages split and stay part empty.
        for fold in 1..=4 {
            store
                .write(|view| -> Result<(), Error> {
                    for i in 0..5_000u64 {
                        let key = u128::from(i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                        let len = fold * (10 + (i % 20) as usize);
                        view.tables.postings.insert(key, vec![i as u8; len].as_slice())?;
                    }
                    Ok(())
                })
                .unwrap();
        }
        let (before, pages_before) = (rows(&store), leaf_pages(&store));
        let mut reports = Vec::new();
        let rewritten =
            store.rewrite_postings_in_key_order(&mut |done, total| reports.push((done, total))).unwrap();
        assert_eq!(rewritten, 5_000);
        assert_eq!(reports.first(), Some(&(0, 5_000)));
        assert_eq!(reports.last(), Some(&(5_000, 5_000)));
        assert_eq!(rows(&store), before, "same chunks under the same keys");
        let pages_after = leaf_pages(&store);
        assert!(pages_after * 10 < pages_before * 9, "{pages_before} leaf pages -> {pages_after}");
        // Now the pages are full: a second rewrite would only cost disk space while it runs.
        let mut again = Vec::new();
        assert_eq!(
            store.rewrite_postings_in_key_order(&mut |done, total| again.push((done, total))).unwrap(),
            0
        );
        assert_eq!(again, [(0, 0)]);
        assert_eq!(leaf_pages(&store), pages_after);
        let txn = store.db.begin_read().unwrap();
        let names: Vec<String> =
            txn.list_tables().unwrap().map(|t| redb::TableHandle::name(&t).to_string()).collect();
        assert!(!names.contains(&"postings_rewrite".to_string()), "no scratch table left: {names:?}");
    }
}
