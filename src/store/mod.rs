//! The persistent index on redb (DESIGN §6). The only module that names redb.
//!
//! # Tables
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `"meta"` | postcard `MetaRecord`: magic, format and anchor-rules versions, N and length sums of folded blocks |
//! | `session_names` | name | session id `u32` |
//! | `sessions` | session id | postcard `SessionRecord`: name, turn count, topic segment start, source |
//! | `turns` | block key `session << 32 \| turn` | postcard `TurnRecord`: raw text, gate decision, segment |
//! | `forward` | block key | postcard `ForwardRecord`: anchor hashes with per-side tf, side lengths |
//! | `pending` | block key | `()`: turns not yet folded into postings |
//! | `terms` | anchor hash | document frequency over folded blocks |
//! | `postings` | `hash << 64 \| session << 32 \| chunk` | a chunk of ≤128 postings, delta + varint |
//!
//! # Log-structured postings
//! Adding a turn writes its `turns`, `forward` and `pending` rows and the session row: four
//! small rows, one durable commit, whatever the size of the index. Rewriting the ~100 posting
//! lists and document frequencies a turn touches would copy ~100 pages per commit (4–8 ms,
//! REDB_NOTES §1). Instead, when [`FOLD_BATCH`] turns are pending, one transaction folds them
//! into the posting chunks and `terms`, rewriting each list's tail chunk once per batch.
//! Readers combine both: document frequencies and N are folded + pending, and recall scores the
//! pending turns of a session from their forward rows. Every write is one redb transaction, so
//! a crash leaves either the whole turn (or batch) or none of it.

mod error;
mod format;
mod keys;
pub(crate) mod postings;
pub(crate) mod records;
mod tables;

pub use error::Error;
pub use format::FORMAT_VERSION;
pub(crate) use keys::{anchor_hash, block_key, split_block_key};

use error::corrupt;
use postings::Posting;
use records::{ForwardRecord, MetaRecord, SessionRecord, TurnRecord};
use redb::{ReadOnlyTable, ReadableDatabase, ReadableTable, ReadableTableMetadata, Table};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tables::{FORWARD, META, PENDING, POSTINGS, SESSION_NAMES, SESSIONS, TERMS, TURNS};

/// Pending turns folded into postings at once (see the module doc).
pub const FOLD_BATCH: usize = 128;

const META_KEY: &str = "meta";
const BUSY_RETRY: Duration = Duration::from_millis(25);

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
    db: redb::Database,
    path: PathBuf,
    quick_repair: bool,
}

impl Store {
    /// Opens the index at `path`, creating it if the file does not exist or is empty.
    ///
    /// # Errors
    /// [`Error::MissingDirectory`], [`Error::NotAnIndex`], [`Error::TooNew`],
    /// [`Error::NeedsRebuild`], [`Error::Busy`] after `busy_timeout`.
    pub fn open(path: &Path, options: &StoreOptions) -> Result<Store, Error> {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(Error::MissingDirectory { path: parent.to_path_buf() });
        }
        if path.is_dir() {
            return Err(Error::NotAnIndex { path: path.to_path_buf() });
        }
        let existed = path.metadata().map(|m| m.len() > 0).unwrap_or(false);
        if existed {
            // Look before writing: opening read-write changes a redb file even if it is not ours.
            check_existing(path, options)?;
        }
        let db = with_busy_wait(path, options.busy_timeout, || {
            redb::Database::builder().set_cache_size(options.cache_bytes).create(path)
        })?;
        let store = Store { db, path: path.to_path_buf(), quick_repair: options.quick_repair };
        store.check_or_initialize()?;
        Ok(store)
    }

    fn check_or_initialize(&self) -> Result<(), Error> {
        // `check_existing` looked already when the file existed; this covers a file created
        // by a concurrent process in between, and the new file.
        let txn = self.db.begin_read()?;
        match txn.open_table(META) {
            Ok(table) => {
                let bytes =
                    table.get(META_KEY)?.ok_or_else(|| Error::NotAnIndex { path: self.path.clone() })?;
                format::check_meta(&self.path, bytes.value())?;
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
        let txn = self.db.begin_write()?;
        {
            let mut meta = txn.open_table(META)?;
            let bytes = postcard::to_allocvec(&format::new_meta()).map_err(|e| corrupt("new meta", e))?;
            meta.insert(META_KEY, bytes.as_slice())?;
            txn.open_table(SESSION_NAMES)?;
            txn.open_table(SESSIONS)?;
            txn.open_table(TURNS)?;
            txn.open_table(FORWARD)?;
            txn.open_table(PENDING)?;
            txn.open_table(TERMS)?;
            txn.open_table(POSTINGS)?;
        }
        txn.commit()?;
        log::info!("created index {}", self.path.display());
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

    /// A consistent snapshot for reading (one redb read transaction).
    pub fn read(&self) -> Result<View<ReadSource>, Error> {
        let txn = self.db.begin_read()?;
        View::open(
            &self.path,
            txn.open_table(META)?,
            txn.open_table(SESSION_NAMES)?,
            txn.open_table(SESSIONS)?,
            txn.open_table(TURNS)?,
            txn.open_table(FORWARD)?,
            txn.open_table(PENDING)?,
            txn.open_table(TERMS)?,
            txn.open_table(POSTINGS)?,
        )
    }

    /// Runs `f` in one durable write transaction; commits only if `f` succeeds.
    pub fn write<T, E: From<Error>>(
        &self,
        f: impl FnOnce(&mut View<WriteSource<'_>>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut txn = self.db.begin_write().map_err(Error::from)?;
        txn.set_quick_repair(self.quick_repair);
        let result = {
            let mut view = View::open(
                &self.path,
                txn.open_table(META).map_err(Error::from)?,
                txn.open_table(SESSION_NAMES).map_err(Error::from)?,
                txn.open_table(SESSIONS).map_err(Error::from)?,
                txn.open_table(TURNS).map_err(Error::from)?,
                txn.open_table(FORWARD).map_err(Error::from)?,
                txn.open_table(PENDING).map_err(Error::from)?,
                txn.open_table(TERMS).map_err(Error::from)?,
                txn.open_table(POSTINGS).map_err(Error::from)?,
            )?;
            let value = f(&mut view)?;
            view.save_meta()?;
            value
        };
        txn.commit().map_err(Error::from)?;
        Ok(result)
    }
}

/// The first bytes of every redb file.
const REDB_MAGIC: &[u8] = b"redb\x1a\x0a\xa9\x0d\x0a";

/// Checks, without modifying it, that an existing file is a ctxgate index of this version.
fn check_existing(path: &Path, options: &StoreOptions) -> Result<(), Error> {
    let not_ours = || Error::NotAnIndex { path: path.to_path_buf() };
    let mut head = [0u8; 9];
    let read = std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut head));
    match read {
        Ok(()) if head == REDB_MAGIC => {}
        Ok(()) => return Err(not_ours()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Err(not_ours()),
        Err(source) => return Err(Error::Io { path: path.to_path_buf(), source }),
    }
    let db = with_busy_wait(path, options.busy_timeout, || {
        redb::Database::builder().set_cache_size(options.cache_bytes).open_read_only(path)
    })?;
    let txn = db.begin_read()?;
    match txn.open_table(META) {
        Ok(table) => {
            let bytes = table.get(META_KEY)?.ok_or_else(not_ours)?;
            format::check_meta(path, bytes.value())?;
            Ok(())
        }
        // An empty redb file becomes an index; one with other tables is someone else's.
        Err(redb::TableError::TableDoesNotExist(_)) if txn.list_tables()?.next().is_none() => Ok(()),
        Err(redb::TableError::TableDoesNotExist(_) | redb::TableError::TableTypeMismatch { .. }) => {
            Err(not_ours())
        }
        Err(e) => Err(e.into()),
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
            Err(
                redb::DatabaseError::UpgradeRequired(_)
                | redb::DatabaseError::Storage(redb::StorageError::Corrupted(_)),
            ) => {
                return Err(Error::NotAnIndex { path: path.to_path_buf() });
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// The table types a [`View`] reads through: read-only snapshots or a write transaction.
pub trait Source {
    /// `meta`.
    type Meta: ReadableTable<&'static str, &'static [u8]>;
    /// `session_names`.
    type Names: ReadableTable<&'static str, u32>;
    /// `sessions`.
    type Sessions: ReadableTable<u32, &'static [u8]>;
    /// `turns` and `forward`.
    type Blocks: ReadableTable<u64, &'static [u8]>;
    /// `pending`.
    type Pending: ReadableTable<u64, ()>;
    /// `terms`.
    type Terms: ReadableTable<u64, u64>;
    /// `postings`.
    type Postings: ReadableTable<u128, &'static [u8]>;
}

/// Tables of a read transaction.
pub struct ReadSource;
impl Source for ReadSource {
    type Meta = ReadOnlyTable<&'static str, &'static [u8]>;
    type Names = ReadOnlyTable<&'static str, u32>;
    type Sessions = ReadOnlyTable<u32, &'static [u8]>;
    type Blocks = ReadOnlyTable<u64, &'static [u8]>;
    type Pending = ReadOnlyTable<u64, ()>;
    type Terms = ReadOnlyTable<u64, u64>;
    type Postings = ReadOnlyTable<u128, &'static [u8]>;
}

/// Tables of a write transaction.
pub struct WriteSource<'t>(std::marker::PhantomData<&'t ()>);
impl<'t> Source for WriteSource<'t> {
    type Meta = Table<'t, &'static str, &'static [u8]>;
    type Names = Table<'t, &'static str, u32>;
    type Sessions = Table<'t, u32, &'static [u8]>;
    type Blocks = Table<'t, u64, &'static [u8]>;
    type Pending = Table<'t, u64, ()>;
    type Terms = Table<'t, u64, u64>;
    type Postings = Table<'t, u128, &'static [u8]>;
}

/// The pending (not yet folded) turns, decoded once per view.
#[derive(Debug, Default)]
pub struct PendingBlocks {
    /// `(block key, anchors)` in block-key order.
    blocks: Vec<(u64, ForwardRecord)>,
    df: HashMap<u64, u32>,
    len_user: u64,
    len_assistant: u64,
    postings: u64,
}

impl PendingBlocks {
    fn add(&mut self, key: u64, forward: ForwardRecord) {
        for &(hash, _, _) in &forward.entries {
            *self.df.entry(hash).or_default() += 1;
        }
        self.len_user += u64::from(forward.len_user);
        self.len_assistant += u64::from(forward.len_assistant);
        self.postings += forward.entries.len() as u64;
        let at = self.blocks.partition_point(|(k, _)| *k < key);
        self.blocks.insert(at, (key, forward));
    }

    /// The pending turns of `session`, in turn order.
    pub fn of_session(&self, session: u32) -> impl Iterator<Item = (u32, &ForwardRecord)> {
        let start = self.blocks.partition_point(|(k, _)| *k < block_key(session, 0));
        self.blocks[start..]
            .iter()
            .map(|(k, f)| (split_block_key(*k), f))
            .take_while(move |((s, _), _)| *s == session)
            .map(|((_, t), f)| (t, f))
    }

    /// Every pending turn as `(session, turn, anchors)`.
    pub fn all(&self) -> impl Iterator<Item = (u32, u32, &ForwardRecord)> {
        self.blocks.iter().map(|(k, f)| {
            let (s, t) = split_block_key(*k);
            (s, t, f)
        })
    }
}

/// Corpus statistics for IDF and BM25: N and average side lengths.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CorpusStats {
    /// Number of blocks (turns) in the whole index.
    pub blocks: u64,
    /// Average user-side length in anchors.
    pub avg_len_user: f64,
    /// Average assistant-side length in anchors.
    pub avg_len_assistant: f64,
}

/// Counts of what the index holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Sessions.
    pub sessions: u64,
    /// Turns.
    pub turns: u64,
    /// Distinct anchors.
    pub anchors: u64,
    /// Postings (anchor occurrences per block).
    pub postings: u64,
    /// Turns not yet folded into postings.
    pub pending: u64,
}

/// A consistent view of the index: one read or write transaction.
pub struct View<S: Source> {
    path: PathBuf,
    meta: MetaRecord,
    meta_table: S::Meta,
    names: S::Names,
    sessions: S::Sessions,
    turns: S::Blocks,
    forward: S::Blocks,
    pending_table: S::Pending,
    terms: S::Terms,
    postings: S::Postings,
    pending: PendingBlocks,
    meta_dirty: bool,
    /// Folded document frequencies read in this view (a bulk import looks the same ones up
    /// for every turn). Cleared when a fold changes them.
    df_cache: std::sync::Mutex<HashMap<u64, u64>>,
}

impl<S: Source> View<S> {
    #[allow(clippy::too_many_arguments)]
    fn open(
        path: &Path,
        meta_table: S::Meta,
        names: S::Names,
        sessions: S::Sessions,
        turns: S::Blocks,
        forward: S::Blocks,
        pending_table: S::Pending,
        terms: S::Terms,
        postings: S::Postings,
    ) -> Result<Self, Error> {
        let meta = {
            let bytes =
                meta_table.get(META_KEY)?.ok_or_else(|| Error::NotAnIndex { path: path.to_path_buf() })?;
            format::check_meta(path, bytes.value())?
        };
        let mut view = View {
            path: path.to_path_buf(),
            meta,
            meta_table,
            names,
            sessions,
            turns,
            forward,
            pending_table,
            terms,
            postings,
            pending: PendingBlocks::default(),
            meta_dirty: false,
            df_cache: std::sync::Mutex::new(HashMap::new()),
        };
        let mut pending = PendingBlocks::default();
        let mut keys = Vec::new();
        for entry in ReadableTable::<u64, ()>::iter(&view.pending_table)? {
            keys.push(entry?.0.value());
        }
        for key in keys {
            let (s, t) = split_block_key(key);
            let forward = view
                .forward_record(s, t)?
                .ok_or_else(|| Error::Corrupt { what: format!("pending turn {s}:{t} has no anchors row") })?;
            pending.add(key, forward);
        }
        view.pending = pending;
        Ok(view)
    }

    /// The index file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The pending turns.
    pub fn pending(&self) -> &PendingBlocks {
        &self.pending
    }

    /// N and average side lengths over the whole index (folded + pending).
    pub fn corpus_stats(&self) -> CorpusStats {
        let blocks = self.meta.folded_blocks + self.pending.blocks.len() as u64;
        let avg = |folded: u64, pending: u64| {
            if blocks == 0 { 0.0 } else { (folded + pending) as f64 / blocks as f64 }
        };
        CorpusStats {
            blocks,
            avg_len_user: avg(self.meta.folded_len_user, self.pending.len_user),
            avg_len_assistant: avg(self.meta.folded_len_assistant, self.pending.len_assistant),
        }
    }

    /// Document frequency of an anchor over the whole index.
    pub fn df(&self, hash: u64) -> Result<u64, Error> {
        let cached = self.df_cache.lock().ok().and_then(|cache| cache.get(&hash).copied());
        let folded = match cached {
            Some(df) => df,
            None => {
                let df = self.terms.get(hash)?.map_or(0, |g| g.value());
                if let Ok(mut cache) = self.df_cache.lock() {
                    cache.insert(hash, df);
                }
                df
            }
        };
        let pending = self.pending.df.get(&hash).copied().unwrap_or(0);
        Ok(folded + u64::from(pending))
    }

    /// What the index holds.
    pub fn counts(&self) -> Result<Counts, Error> {
        let mut new_anchors = 0u64;
        for hash in self.pending.df.keys() {
            if self.terms.get(*hash)?.is_none() {
                new_anchors += 1;
            }
        }
        Ok(Counts {
            sessions: self.sessions.len()?,
            turns: self.turns.len()?,
            anchors: self.terms.len()? + new_anchors,
            postings: self.meta.folded_postings + self.pending.postings,
            pending: self.pending.blocks.len() as u64,
        })
    }

    /// Looks a session up by name.
    pub fn session_by_name(&self, name: &str) -> Result<Option<(u32, SessionRecord)>, Error> {
        let Some(id) = self.names.get(name)?.map(|g| g.value()) else {
            return Ok(None);
        };
        let record = self
            .session_record(id)?
            .ok_or_else(|| Error::Corrupt { what: format!("session {name:?} (id {id}) has no record") })?;
        Ok(Some((id, record)))
    }

    fn session_record(&self, id: u32) -> Result<Option<SessionRecord>, Error> {
        self.sessions
            .get(id)?
            .map(|g| postcard::from_bytes(g.value()).map_err(|e| corrupt(format!("session {id}"), e)))
            .transpose()
    }

    /// Every session, in id (creation) order.
    pub fn sessions(&self) -> Result<Vec<(u32, SessionRecord)>, Error> {
        let mut out = Vec::new();
        for entry in self.sessions.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            let record =
                postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("session {id}"), e))?;
            out.push((id, record));
        }
        Ok(out)
    }

    /// A turn's text and gate record.
    pub fn turn_record(&self, session: u32, turn: u32) -> Result<Option<TurnRecord>, Error> {
        self.turns
            .get(block_key(session, turn))?
            .map(|g| {
                postcard::from_bytes(g.value()).map_err(|e| corrupt(format!("turn {session}:{turn}"), e))
            })
            .transpose()
    }

    /// A turn's anchors (hashes with per-side tf).
    pub fn forward_record(&self, session: u32, turn: u32) -> Result<Option<ForwardRecord>, Error> {
        let key = block_key(session, turn);
        if let Ok(i) = self.pending.blocks.binary_search_by_key(&key, |(k, _)| *k) {
            return Ok(self.pending.blocks.get(i).map(|(_, f)| f.clone()));
        }
        self.forward
            .get(block_key(session, turn))?
            .map(|g| {
                postcard::from_bytes(g.value())
                    .map_err(|e| corrupt(format!("anchors of turn {session}:{turn}"), e))
            })
            .transpose()
    }

    /// Calls `emit` with the folded postings of `hash` in `session`, in turn order.
    pub fn session_postings(
        &self,
        hash: u64,
        session: u32,
        mut emit: impl FnMut(Posting),
    ) -> Result<(), Error> {
        let range = keys::posting_key(hash, session, 0)..=keys::posting_key(hash, session, u32::MAX);
        for entry in self.postings.range(range)? {
            let (key, value) = entry?;
            postings::decode(value.value(), &mut emit).map_err(|e| {
                corrupt(format!("posting chunk {:?}", keys::split_posting_key(key.value())), e)
            })?;
        }
        Ok(())
    }

    /// The raw chunks of `hash` in every session, as `(session, bytes)` in key order.
    pub fn all_posting_chunks(&self, hash: u64) -> Result<Vec<(u32, Vec<u8>)>, Error> {
        let range = keys::posting_key(hash, 0, 0)..=keys::posting_key(hash, u32::MAX, u32::MAX);
        let mut out = Vec::new();
        for entry in self.postings.range(range)? {
            let (key, value) = entry?;
            let (_, session, _) = keys::split_posting_key(key.value());
            out.push((session, value.value().to_vec()));
        }
        Ok(out)
    }
}

impl View<WriteSource<'_>> {
    /// Creates a session with no turns.
    pub fn create_session(&mut self, name: &str) -> Result<(u32, SessionRecord), Error> {
        let id = self.meta.next_session_id;
        self.meta.next_session_id =
            id.checked_add(1).ok_or_else(|| Error::Corrupt { what: "session ids exhausted".into() })?;
        self.meta_dirty = true;
        let record = SessionRecord::new(name);
        self.names.insert(name, id)?;
        self.put_session(id, &record)?;
        Ok((id, record))
    }

    /// Stores a session record.
    pub fn put_session(&mut self, id: u32, record: &SessionRecord) -> Result<(), Error> {
        let bytes = postcard::to_allocvec(record).map_err(|e| corrupt(format!("session {id}"), e))?;
        self.sessions.insert(id, bytes.as_slice())?;
        Ok(())
    }

    /// Stores a new turn and queues its anchors for folding.
    pub fn put_turn(
        &mut self,
        session: u32,
        turn: u32,
        record: &TurnRecord,
        forward: ForwardRecord,
    ) -> Result<(), Error> {
        let key = block_key(session, turn);
        let text = postcard::to_allocvec(record).map_err(|e| corrupt(format!("turn {session}:{turn}"), e))?;
        let anchors =
            postcard::to_allocvec(&forward).map_err(|e| corrupt(format!("turn {session}:{turn}"), e))?;
        self.turns.insert(key, text.as_slice())?;
        self.forward.insert(key, anchors.as_slice())?;
        self.pending_table.insert(key, ())?;
        self.pending.add(key, forward);
        Ok(())
    }

    /// Folds pending turns into postings once [`FOLD_BATCH`] of them are waiting.
    pub fn fold_if_due(&mut self) -> Result<(), Error> {
        if self.pending.blocks.len() >= FOLD_BATCH { self.fold() } else { Ok(()) }
    }

    /// Folds every pending turn into the posting chunks and document frequencies.
    pub fn fold(&mut self) -> Result<(), Error> {
        let pending = std::mem::take(&mut self.pending);
        if pending.blocks.is_empty() {
            return Ok(());
        }
        let mut lists: BTreeMap<(u64, u32), Vec<Posting>> = BTreeMap::new();
        for (key, forward) in &pending.blocks {
            let (session, turn) = split_block_key(*key);
            for &(hash, tf_user, tf_assistant) in &forward.entries {
                lists.entry((hash, session)).or_default().push(Posting {
                    turn,
                    tf_user,
                    tf_assistant,
                    len_user: forward.len_user,
                    len_assistant: forward.len_assistant,
                });
            }
        }
        let mut df_delta: BTreeMap<u64, u64> = BTreeMap::new();
        for ((hash, session), list) in &lists {
            *df_delta.entry(*hash).or_default() += list.len() as u64;
            self.append_postings(*hash, *session, list)?;
        }
        for (hash, delta) in df_delta {
            let df = self.terms.get(hash)?.map_or(0, |g| g.value());
            self.terms.insert(hash, df + delta)?;
        }
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.clear();
        }
        for (key, _) in &pending.blocks {
            self.pending_table.remove(*key)?;
        }
        self.meta.folded_blocks += pending.blocks.len() as u64;
        self.meta.folded_len_user += pending.len_user;
        self.meta.folded_len_assistant += pending.len_assistant;
        self.meta.folded_postings += pending.postings;
        self.meta_dirty = true;
        log::debug!("folded {} turns into {} posting lists", pending.blocks.len(), lists.len());
        Ok(())
    }

    fn append_postings(&mut self, hash: u64, session: u32, list: &[Posting]) -> Result<(), Error> {
        let range = keys::posting_key(hash, session, 0)..=keys::posting_key(hash, session, u32::MAX);
        let tail = self.postings.range(range)?.next_back().transpose()?.map(|(k, v)| {
            let (_, _, chunk) = keys::split_posting_key(k.value());
            (chunk, v.value().to_vec())
        });
        let (mut chunk_no, mut chunk) = tail.unwrap_or_else(|| (0, postings::encode(&[])));
        for posting in list {
            let what = || format!("posting chunk {hash:x}/{session}/{chunk_no}");
            match postings::append(&chunk, posting).map_err(|e| corrupt(what(), e))? {
                Some(next) => chunk = next,
                None => {
                    self.postings.insert(keys::posting_key(hash, session, chunk_no), chunk.as_slice())?;
                    chunk_no += 1;
                    chunk = postings::encode(std::slice::from_ref(posting));
                }
            }
        }
        self.postings.insert(keys::posting_key(hash, session, chunk_no), chunk.as_slice())?;
        Ok(())
    }

    fn save_meta(&mut self) -> Result<(), Error> {
        if !self.meta_dirty {
            return Ok(());
        }
        let bytes = postcard::to_allocvec(&self.meta).map_err(|e| corrupt("meta", e))?;
        self.meta_table.insert(META_KEY, bytes.as_slice())?;
        Ok(())
    }
}
