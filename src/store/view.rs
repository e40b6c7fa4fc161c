//! `View`: one consistent transaction over the tables, read-only or writable.
//!
//! A read view is a redb read transaction (a snapshot); a write view is the one write
//! transaction. Both decode the pending turns once when opened, so document frequencies, N and
//! the pending tail of a session's postings come from memory.

use super::cursor::PostingCursor;
use super::error::{Error, corrupt};
use super::grouped::{Grouped, NewBlock, for_each_list};
use super::keys::{self, IdentityHashMap, block_key, split_block_key};
use super::lists::ListWriter;
use super::postings::{self, Posting};
use super::records::{ForwardRecord, MetaRecord, SessionRecord, TurnRecord};
use super::run_file;
use super::runs::{NextRun, WrittenRun};
use super::sorted;
use super::{FOLD_BATCH, META_KEY, format};
use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, Table};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// The table types a [`View`] reads through: read-only snapshots or a write transaction.
pub trait Source {
    /// `meta`.
    type Meta: ReadableTable<&'static str, &'static [u8]>;
    /// `session_names`.
    type Names: ReadableTable<&'static str, u32>;
    /// `sessions`.
    type Sessions: ReadableTable<u32, &'static [u8]>;
    /// `turns` and `pending`.
    type Blocks: ReadableTable<u64, &'static [u8]>;
    /// `terms`.
    type Terms: ReadableTable<u64, u64>;
    /// `postings`.
    type Postings: ReadableTable<u128, &'static [u8]>;
    /// `evidence`.
    type EvidenceDocs: ReadableTable<u32, &'static [u8]>;
    /// `evidence_refs`.
    type EvidenceRefs: ReadableTable<&'static str, u32>;
    /// `evidence_postings`.
    type EvidencePostings: ReadableTable<(u64, u32), (u32, u32)>;
    /// `evidence_terms`.
    type EvidenceTerms: ReadableTable<u64, u32>;
    /// `posting_run_files`: only a write transaction has them (see `super::run_file`).
    type Runs;
}

/// Tables of a read transaction.
pub struct ReadSource;
impl Source for ReadSource {
    type Meta = ReadOnlyTable<&'static str, &'static [u8]>;
    type Names = ReadOnlyTable<&'static str, u32>;
    type Sessions = ReadOnlyTable<u32, &'static [u8]>;
    type Blocks = ReadOnlyTable<u64, &'static [u8]>;
    type Terms = ReadOnlyTable<u64, u64>;
    type Postings = ReadOnlyTable<u128, &'static [u8]>;
    type EvidenceDocs = ReadOnlyTable<u32, &'static [u8]>;
    type EvidenceRefs = ReadOnlyTable<&'static str, u32>;
    type EvidencePostings = ReadOnlyTable<(u64, u32), (u32, u32)>;
    type EvidenceTerms = ReadOnlyTable<u64, u32>;
    type Runs = ();
}

/// Tables of a write transaction.
pub struct WriteSource<'t>(std::marker::PhantomData<&'t ()>);
impl<'t> Source for WriteSource<'t> {
    type Meta = Table<'t, &'static str, &'static [u8]>;
    type Names = Table<'t, &'static str, u32>;
    type Sessions = Table<'t, u32, &'static [u8]>;
    type Blocks = Table<'t, u64, &'static [u8]>;
    type Terms = Table<'t, u64, u64>;
    type Postings = Table<'t, u128, &'static [u8]>;
    type EvidenceDocs = Table<'t, u32, &'static [u8]>;
    type EvidenceRefs = Table<'t, &'static str, u32>;
    type EvidencePostings = Table<'t, (u64, u32), (u32, u32)>;
    type EvidenceTerms = Table<'t, u64, u32>;
    type Runs = Table<'t, u32, (u64, u64, u64)>;
}

/// The opened tables of one transaction.
pub(super) struct Tables<S: Source> {
    pub meta: S::Meta,
    pub names: S::Names,
    pub sessions: S::Sessions,
    pub turns: S::Blocks,
    pub pending: S::Blocks,
    pub terms: S::Terms,
    pub postings: S::Postings,
    pub evidence: S::EvidenceDocs,
    pub evidence_refs: S::EvidenceRefs,
    pub evidence_postings: S::EvidencePostings,
    pub evidence_terms: S::EvidenceTerms,
    pub runs: S::Runs,
}

/// Rows of the `turns`, `postings`, `terms` and `evidence` tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RowCounts {
    pub turns: u64,
    pub chunks: u64,
    pub terms: u64,
    pub evidence: u64,
}

/// The pending (not yet folded) turns, decoded once per view.
#[derive(Debug, Default)]
pub struct PendingBlocks {
    /// `(block key, anchors)` in block-key order.
    blocks: Vec<(u64, ForwardRecord)>,
    /// Pending turns per anchor, while every block was counted in (see
    /// [`add_uncounted`](Self::add_uncounted)).
    df: IdentityHashMap<u64, u32>,
    /// Set once a block was added without counting: `df` is empty and unused from then on.
    uncounted: bool,
    len_user: u64,
    len_assistant: u64,
    postings: u64,
}

impl PendingBlocks {
    fn add(&mut self, key: u64, forward: ForwardRecord) {
        if !self.uncounted {
            for &(hash, _, _) in &forward.entries {
                *self.df.entry(hash).or_default() += 1;
            }
        }
        self.insert(key, forward);
    }

    /// [`add`](Self::add) without counting the turn per anchor: a bulk writer counts its batch
    /// itself as it groups it (`Grouped::counting`), and a hash map update per posting was about
    /// a twentieth of its thread's time (`perf`, 400k turns). Frequencies of pending turns are
    /// counted from the blocks from then on, which only a caller other than the gate pays for.
    fn add_uncounted(&mut self, key: u64, forward: ForwardRecord) {
        if !self.uncounted {
            self.uncounted = true;
            self.df = IdentityHashMap::default();
        }
        self.insert(key, forward);
    }

    fn insert(&mut self, key: u64, forward: ForwardRecord) {
        self.len_user += u64::from(forward.len_user);
        self.len_assistant += u64::from(forward.len_assistant);
        self.postings += forward.entries.len() as u64;
        if self.blocks.last().is_none_or(|(last, _)| *last < key) {
            self.blocks.push((key, forward));
        } else {
            let at = self.blocks.partition_point(|(k, _)| *k < key);
            self.blocks.insert(at, (key, forward));
        }
    }

    /// Pending turns with the anchor `hash`.
    fn df(&self, hash: u64) -> u64 {
        if self.uncounted {
            self.blocks.iter().filter(|(_, f)| f.get(hash).is_some()).count() as u64
        } else {
            self.df.get(&hash).copied().map_or(0, u64::from)
        }
    }

    /// The distinct anchors of the pending turns.
    fn anchors(&self) -> Vec<u64> {
        if self.uncounted {
            let mut hashes: Vec<u64> =
                self.blocks.iter().flat_map(|(_, f)| f.entries.iter().map(|e| e.0)).collect();
            hashes.sort_unstable();
            hashes.dedup();
            hashes
        } else {
            self.df.keys().copied().collect()
        }
    }

    /// Number of pending turns.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// True if every turn is folded.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
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

    /// The anchors of one pending turn.
    pub fn get(&self, session: u32, turn: u32) -> Option<&ForwardRecord> {
        let key = block_key(session, turn);
        self.blocks.binary_search_by_key(&key, |(k, _)| *k).ok().map(|i| &self.blocks[i].1)
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
    pub(super) tables: Tables<S>,
    pending: PendingBlocks,
    meta_dirty: bool,
    /// Pending turns of this transaction without a `pending` row, by block key: their encoded
    /// `turns` rows, stored in key order by the fold, which comes before the commit.
    unlogged: BTreeMap<u64, Vec<u8>>,
    /// Folded document frequencies read in this view (a bulk import looks the same ones up
    /// for every turn). Cleared when a fold changes them.
    df_cache: Mutex<IdentityHashMap<u64, u64>>,
    /// The run this transaction took ([`View::next_run`]) and has not recorded yet.
    run_taken: Option<u32>,
}

impl<S: Source> View<S> {
    pub(super) fn open(path: &Path, tables: Tables<S>) -> Result<Self, Error> {
        let meta = {
            let bytes =
                tables.meta.get(META_KEY)?.ok_or_else(|| Error::NotAnIndex { path: path.to_path_buf() })?;
            format::check_meta(path, bytes.value())?
        };
        let mut pending = PendingBlocks::default();
        for entry in tables.pending.iter()? {
            let (key, value) = entry?;
            let key = key.value();
            let forward: ForwardRecord = postcard::from_bytes(value.value())
                .map_err(|e| corrupt(format!("anchors of pending turn {:?}", split_block_key(key)), e))?;
            pending.add(key, forward);
        }
        Ok(View {
            path: path.to_path_buf(),
            meta,
            tables,
            pending,
            meta_dirty: false,
            unlogged: BTreeMap::new(),
            df_cache: Mutex::new(IdentityHashMap::default()),
            run_taken: None,
        })
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
        Ok(self.folded_df(hash)? + self.pending.df(hash))
    }

    /// Document frequency of an anchor over the folded blocks.
    pub(crate) fn folded_df(&self, hash: u64) -> Result<u64, Error> {
        if let Some(df) = self.df_cache.lock().ok().and_then(|cache| cache.get(&hash).copied()) {
            return Ok(df);
        }
        let df = self.tables.terms.get(hash)?.map_or(0, |g| g.value());
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.insert(hash, df);
        }
        Ok(df)
    }

    /// What the index holds.
    pub fn counts(&self) -> Result<Counts, Error> {
        let mut new_anchors = 0u64;
        for hash in self.pending.anchors() {
            if self.tables.terms.get(hash)?.is_none() {
                new_anchors += 1;
            }
        }
        Ok(Counts {
            sessions: self.tables.sessions.len()?,
            turns: self.tables.turns.len()? + self.unlogged.len() as u64,
            anchors: self.tables.terms.len()? + new_anchors,
            postings: self.meta.folded_postings + self.pending.postings,
            pending: self.pending.blocks.len() as u64,
        })
    }

    /// Rows of the tables a whole-index job walks, as totals for its progress. redb keeps
    /// each table's length in its header, so no row is read.
    pub(crate) fn row_counts(&self) -> Result<RowCounts, Error> {
        Ok(RowCounts {
            turns: self.tables.turns.len()? + self.unlogged.len() as u64,
            chunks: self.tables.postings.len()?,
            terms: self.tables.terms.len()?,
            evidence: self.tables.evidence.len()?,
        })
    }

    /// Looks a session up by name.
    pub fn session_by_name(&self, name: &str) -> Result<Option<(u32, SessionRecord)>, Error> {
        let Some(id) = self.tables.names.get(name)?.map(|g| g.value()) else {
            return Ok(None);
        };
        let record = self
            .session_record(id)?
            .ok_or_else(|| Error::Corrupt { what: format!("session {name:?} (id {id}) has no record") })?;
        Ok(Some((id, record)))
    }

    /// The record of session `id`, if there is one.
    pub fn session_record(&self, id: u32) -> Result<Option<SessionRecord>, Error> {
        self.tables
            .sessions
            .get(id)?
            .map(|g| postcard::from_bytes(g.value()).map_err(|e| corrupt(format!("session {id}"), e)))
            .transpose()
    }

    /// Every session, in id (creation) order.
    pub fn sessions(&self) -> Result<Vec<(u32, SessionRecord)>, Error> {
        let mut out = Vec::new();
        for entry in self.tables.sessions.iter()? {
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
        let key = block_key(session, turn);
        let decode = |bytes: &[u8]| {
            postcard::from_bytes(bytes).map_err(|e| corrupt(format!("turn {session}:{turn}"), e))
        };
        if let Some(row) = self.unlogged.get(&key) {
            return decode(row).map(Some);
        }
        self.tables.turns.get(key)?.map(|g| decode(g.value())).transpose()
    }

    /// Calls `emit` with the folded postings of `hash` in `session`, in turn order.
    pub fn session_postings(
        &self,
        hash: u64,
        session: u32,
        mut emit: impl FnMut(Posting),
    ) -> Result<(), Error> {
        let range = keys::list_range(hash, session);
        for entry in self.tables.postings.range(range)? {
            let (key, value) = entry?;
            postings::decode(value.value(), &mut emit).map_err(|e| {
                corrupt(format!("posting chunk {:?}", keys::split_posting_key(key.value())), e)
            })?;
        }
        Ok(())
    }
    /// A cursor over the anchor's folded postings in every session, in block-key order (pending
    /// turns are in [`View::pending`]).
    pub fn anchor_cursor(&self, hash: u64) -> Result<PostingCursor<'_>, Error> {
        let range = keys::anchor_range(hash);
        PostingCursor::new(self.tables.postings.range(range)?)
    }

    /// Calls `emit(session, posting)` for every folded posting of the anchor, in every
    /// session, in session then turn order: one range scan, since posting keys lead with the
    /// anchor (pending turns are in [`View::pending`]).
    pub fn anchor_postings(&self, hash: u64, mut emit: impl FnMut(u32, Posting)) -> Result<(), Error> {
        let range = keys::anchor_range(hash);
        for entry in self.tables.postings.range(range)? {
            let (key, value) = entry?;
            let (_, session, _) = keys::split_posting_key(key.value());
            postings::decode(value.value(), |p| emit(session, p)).map_err(|e| {
                corrupt(format!("posting chunk {:?}", keys::split_posting_key(key.value())), e)
            })?;
        }
        Ok(())
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
        self.tables.names.insert(name, id)?;
        self.put_session(id, &record)?;
        Ok((id, record))
    }

    /// Stores a session record.
    pub fn put_session(&mut self, id: u32, record: &SessionRecord) -> Result<(), Error> {
        let bytes = postcard::to_allocvec(record).map_err(|e| corrupt(format!("session {id}"), e))?;
        self.tables.sessions.insert(id, bytes.as_slice())?;
        Ok(())
    }

    /// Stores a new turn; its anchors wait for the fold where `row` says.
    pub fn put_turn(
        &mut self,
        session: u32,
        turn: u32,
        record: &TurnRecord,
        forward: ForwardRecord,
        row: PendingRow,
    ) -> Result<(), Error> {
        let key = block_key(session, turn);
        match row {
            PendingRow::Logged => {
                let anchors = postcard::to_allocvec(&forward)
                    .map_err(|e| corrupt(format!("turn {session}:{turn}"), e))?;
                self.tables.pending.insert(key, anchors.as_slice())?;
                self.tables.turns.insert(key, encode_turn(session, turn, record)?.as_slice())?;
                self.pending.add(key, forward);
            }
            PendingRow::FoldInTransaction => {
                // A turn stored before makes the fold's insert fail; one put twice fails here.
                if self.unlogged.insert(key, encode_turn(session, turn, record)?).is_some() {
                    return Err(corrupt(format!("turn {session}:{turn}"), "put twice"));
                }
                self.pending.add_uncounted(key, forward);
            }
        }
        Ok(())
    }

    /// Folds pending turns into postings once [`FOLD_BATCH`] of them are waiting.
    pub fn fold_if_due(&mut self) -> Result<(), Error> {
        if self.pending.blocks.len() >= FOLD_BATCH { self.fold() } else { Ok(()) }
    }

    /// Folds every pending turn into the posting chunks and document frequencies.
    pub fn fold(&mut self) -> Result<(), Error> {
        if self.pending.blocks.is_empty() {
            return Ok(());
        }
        // Pending turns are in block-key order: each session's blocks are consecutive.
        let blocks: Vec<NewBlock> = (self.pending.blocks.iter())
            .map(|(key, f)| NewBlock { key: *key, len_user: f.len_user, len_assistant: f.len_assistant })
            .collect();
        let entries: Vec<&[(u64, u32, u32)]> =
            self.pending.blocks.iter().map(|(_, f)| &f.entries[..]).collect();
        let grouped = Grouped::by_anchor(&entries);
        self.fold_grouped(&grouped, &blocks, FoldTarget::Postings)
    }

    /// Where the run of this transaction's bulk batch goes (see [`NextRun::write`]); once per
    /// transaction.
    pub fn next_run(&mut self) -> Result<NextRun, Error> {
        if self.run_taken.is_some() {
            return Err(corrupt("posting runs", "a second run taken in one transaction"));
        }
        let (run, offset) = run_file::next_run(&self.tables.runs)?;
        self.run_taken = Some(run);
        Ok(NextRun { run, path: run_file::path_of(&self.path), offset })
    }

    /// Folds every pending turn, given their postings already grouped (a bulk writer groups a
    /// batch on the rayon pool while the previous one is written), into `target`. `blocks` must
    /// be exactly the pending turns, each session's consecutive and in turn order, and `grouped`
    /// exactly their anchors: both are checked, since a mismatch would write wrong postings.
    ///
    /// Into the lists, each list's tail chunk is read and rewritten once, anchor by anchor in
    /// key order. Into a run ([`FoldTarget::Run`], written from the same `grouped` and `blocks`
    /// by [`NextRun::write`]), the run is recorded instead: its postings stay out of reach of
    /// readers until [`super::Store::merge_runs`].
    pub fn fold_grouped(
        &mut self,
        grouped: &Grouped,
        blocks: &[NewBlock],
        target: FoldTarget,
    ) -> Result<(), Error> {
        let pending = std::mem::take(&mut self.pending);
        check_fold_input(&pending, grouped, blocks)?;
        let unlogged = std::mem::take(&mut self.unlogged);
        sorted::insert_new(&mut self.tables.turns, unlogged.iter().map(|(key, row)| (*key, row.as_slice())))?;
        drop(unlogged);
        if pending.blocks.is_empty() {
            return Ok(());
        }
        let lists = match target {
            FoldTarget::Postings => {
                // Its lists would go before postings of earlier turns that wait in a run.
                self.refuse_while_runs_wait()?;
                self.fold_into_lists(&pending, grouped, blocks)?
            }
            FoldTarget::Run(run) => {
                if self.run_taken.take() != Some(run.run) {
                    return Err(corrupt("posting runs", "a run not taken in this transaction"));
                }
                if (run.anchors, run.postings) != (grouped.anchors(), grouped.len()) {
                    return Err(corrupt("posting runs", "a run written from other postings"));
                }
                self.tables.runs.insert(run.run, run.span.to_row())?;
                run.lists
            }
        };
        // Document frequency: one update per anchor. One this view has not read yet is read
        // by the insert that stores it: a new anchor (most of a growing vocabulary) costs one
        // descent of `terms` instead of a lookup and an insert.
        let read = std::mem::take(self.df_cache.get_mut().unwrap_or_else(PoisonError::into_inner));
        let mut new_df = IdentityHashMap::default();
        new_df.reserve(grouped.anchors());
        for (hash, group) in grouped.groups() {
            let added = group.len() as u64;
            let folded = match read.get(&hash) {
                Some(&folded) => Some(folded),
                None => self.tables.terms.insert(hash, added)?.map(|stored| stored.value()),
            };
            let df = match folded {
                Some(folded) => {
                    self.tables.terms.insert(hash, folded + added)?;
                    folded + added
                }
                None => added,
            };
            new_df.insert(hash, df);
        }
        // Only the folded anchors' frequencies changed; keeping just them bounds the cache
        // by one fold while the next batch of an import, which shares most of its anchors
        // with this one, finds them.
        *self.df_cache.get_mut().unwrap_or_else(PoisonError::into_inner) = new_df;
        self.tables.pending.retain(|_, _| false)?;
        self.meta.folded_blocks += pending.blocks.len() as u64;
        self.meta.folded_len_user += pending.len_user;
        self.meta.folded_len_assistant += pending.len_assistant;
        self.meta.folded_postings += pending.postings;
        self.meta_dirty = true;
        let into = match target {
            FoldTarget::Postings => "the lists".to_string(),
            FoldTarget::Run(run) => format!("run {}", run.run),
        };
        log::debug!("folded {} turns into {lists} posting lists ({into})", pending.blocks.len());
        Ok(())
    }

    /// Appends the postings of `grouped` to their lists; returns the number of lists.
    fn fold_into_lists(
        &mut self,
        pending: &PendingBlocks,
        grouped: &Grouped,
        blocks: &[NewBlock],
    ) -> Result<usize, Error> {
        // Folds take every pending turn, so a session's folded turns are a prefix of its turns:
        // one whose turn 0 is pending has no posting chunk yet, and its lists need no lookup.
        let fresh: Vec<u32> = pending.iter().filter(|&(_, turn, _)| turn == 0).map(|(s, _, _)| s).collect();
        let table = &mut self.tables.postings;
        let mut list = Vec::new();
        let mut lists = 0;
        for (hash, group) in grouped.groups() {
            lists += for_each_list(group, blocks, &mut list, |session, list| {
                let mut writer = if fresh.binary_search(&session).is_ok() {
                    ListWriter::new(hash, session)
                } else {
                    ListWriter::continuing(table, hash, session)?
                };
                for posting in list {
                    writer.push(table, posting)?;
                }
                writer.finish(table)
            })?;
        }
        Ok(lists)
    }

    /// Runs wait only inside an import, or after a merge that failed in a process still
    /// running (the next open merges them): the lists are not whole until then.
    fn refuse_while_runs_wait(&self) -> Result<(), Error> {
        if self.tables.runs.is_empty()? {
            Ok(())
        } else {
            Err(corrupt("posting runs", "an import's runs are not merged yet; open the index again"))
        }
    }

    /// Finishes a write view before its commit: folds the turns stored without a `pending` row
    /// ([`PendingRow::FoldInTransaction`]), then stores `meta` if it changed.
    pub(super) fn save_meta(&mut self) -> Result<(), Error> {
        if !self.unlogged.is_empty() {
            self.fold()?;
        }
        if !self.meta_dirty {
            return Ok(());
        }
        let bytes = postcard::to_allocvec(&self.meta).map_err(|e| corrupt("meta", e))?;
        self.tables.meta.insert(META_KEY, bytes.as_slice())?;
        Ok(())
    }
}

/// Where a new turn's anchors wait until they are folded ([`View::put_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingRow {
    /// A `pending` row, folded by a later transaction (at the latest once [`FOLD_BATCH`] wait).
    Logged,
    /// Memory only: this transaction folds them into the postings before it commits (at the
    /// latest when `Store::write` finishes the view). For bulk writers, which fold at the end of
    /// every batch anyway: the row would be written and deleted in the same transaction. The
    /// `turns` row waits for the fold too, which stores a batch's rows in key order
    /// (`super::sorted`). Readers see exactly what a logged row and a fold give.
    FoldInTransaction,
}

/// Where a fold writes the postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldTarget {
    /// The posting lists readers see.
    Postings,
    /// A run of an import, written to the run file.
    Run(WrittenRun),
}

/// The statistics of folded blocks as `meta` records them (what `verify` checks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldedTotals {
    /// Folded blocks (N less the pending ones).
    pub blocks: u64,
    /// Sum of user-side lengths.
    pub len_user: u64,
    /// Sum of assistant-side lengths.
    pub len_assistant: u64,
    /// Postings in posting chunks.
    pub postings: u64,
}

/// What removing sessions took out of the folded statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Turns deleted.
    pub turns: u64,
    /// Of them, pending (not yet folded) turns.
    pub pending: u64,
    /// Posting chunks deleted.
    pub chunks: u64,
    /// Postings deleted.
    pub postings: u64,
    /// Anchors whose document frequency fell to zero (their `terms` row is deleted).
    pub anchors: u64,
}

impl PendingBlocks {
    /// Every pending turn as `(session, turn, anchors)`, in block-key order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, &ForwardRecord)> {
        self.blocks.iter().map(|(k, f)| {
            let (s, t) = split_block_key(*k);
            (s, t, f)
        })
    }
}

/// A turn's `turns` row.
fn encode_turn(session: u32, turn: u32, record: &TurnRecord) -> Result<Vec<u8>, Error> {
    // One allocation: the texts and a little framing.
    let capacity = record.user.len() + record.assistant.len() + 64;
    postcard::to_extend(record, Vec::with_capacity(capacity))
        .map_err(|e| corrupt(format!("turn {session}:{turn}"), e))
}

/// Checks what [`View::fold_grouped`] is given against the pending turns: the same blocks,
/// each session's consecutive and in turn order, and the same postings per anchor.
fn check_fold_input(pending: &PendingBlocks, grouped: &Grouped, blocks: &[NewBlock]) -> Result<(), Error> {
    let wrong = |what: &str| Err(corrupt("fold input", what.to_string()));
    if blocks.len() != pending.blocks.len() || grouped.len() as u64 != pending.postings {
        return wrong("not the pending turns");
    }
    let mut keys: Vec<u64> = blocks.iter().map(|b| b.key).collect();
    keys.sort_unstable();
    if !keys.iter().eq(pending.blocks.iter().map(|(k, _)| k)) {
        return wrong("not the pending turns");
    }
    let mut finished: Vec<u32> = Vec::new();
    for pair in blocks.windows(2) {
        let ((s0, t0), (s1, t1)) = (split_block_key(pair[0].key), split_block_key(pair[1].key));
        if s0 == s1 && t1 <= t0 {
            return wrong("a session's turns out of order");
        }
        if s0 != s1 {
            finished.push(s0);
        }
    }
    finished.sort_unstable();
    if finished.windows(2).any(|w| w[0] == w[1])
        || blocks.last().is_some_and(|b| finished.binary_search(&split_block_key(b.key).0).is_ok())
    {
        return wrong("a session's turns not consecutive");
    }
    // Each block's postings against its turn's anchors, by a sum of their hashes: a posting
    // given to the wrong block, or of an anchor the turn does not have, changes two sums.
    let mut sums = vec![0u64; blocks.len()];
    for (hash, group) in grouped.groups() {
        for posting in group {
            let Some(sum) = sums.get_mut(posting.block as usize) else {
                return wrong("a posting of no block");
            };
            *sum = sum.wrapping_add(hash);
        }
    }
    for (block, sum) in blocks.iter().zip(&sums) {
        let forward =
            pending.blocks.binary_search_by_key(&block.key, |(k, _)| *k).map(|i| &pending.blocks[i].1);
        let expected = forward.map_or(0, |f| f.entries.iter().fold(0u64, |s, e| s.wrapping_add(e.0)));
        if *sum != expected {
            return wrong("postings not the pending anchors");
        }
    }
    Ok(())
}

/// Counts the postings of a chunk (decoding it all: the count must match the body).
pub(crate) fn chunk_len(chunk: &[u8]) -> Result<u64, postings::CorruptChunk> {
    let mut n = 0u64;
    postings::decode(chunk, |_| n += 1)?;
    Ok(n)
}

impl<S: Source> View<S> {
    /// The folded statistics stored in `meta`.
    pub fn folded_totals(&self) -> FoldedTotals {
        FoldedTotals {
            blocks: self.meta.folded_blocks,
            len_user: self.meta.folded_len_user,
            len_assistant: self.meta.folded_len_assistant,
            postings: self.meta.folded_postings,
        }
    }

    /// Calls `f` with every `sessions` row: its id and the record, or why it does not decode.
    pub fn for_each_session_row(
        &self,
        mut f: impl FnMut(u32, Result<SessionRecord, Error>),
    ) -> Result<(), Error> {
        for entry in self.tables.sessions.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            f(id, postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("session {id}"), e)));
        }
        Ok(())
    }

    /// Calls `f` with every `session_names` row: name and id.
    pub fn for_each_name(&self, mut f: impl FnMut(&str, u32)) -> Result<(), Error> {
        for entry in self.tables.names.iter()? {
            let (key, value) = entry?;
            f(key.value(), value.value());
        }
        Ok(())
    }

    /// Calls `f` with every stored turn in block-key order: session, turn, and the record or
    /// why it does not decode. `f` returns false to stop. Not for a write view with turns
    /// waiting for their fold ([`PendingRow::FoldInTransaction`]): their rows are not stored yet.
    pub fn for_each_turn_row(
        &self,
        mut f: impl FnMut(u32, u32, Result<TurnRecord, Error>) -> bool,
    ) -> Result<(), Error> {
        debug_assert!(self.unlogged.is_empty(), "turn rows wait for their fold");
        for entry in self.tables.turns.iter()? {
            let (key, value) = entry?;
            let (session, turn) = split_block_key(key.value());
            let record =
                postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("turn {session}:{turn}"), e));
            if !f(session, turn, record) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with every turn of `session` in turn order (not for a write view with turns
    /// waiting for their fold, as [`for_each_turn_row`](Self::for_each_turn_row)).
    pub fn for_each_turn_of(
        &self,
        session: u32,
        mut f: impl FnMut(u32, Result<TurnRecord, Error>) -> Result<(), Error>,
    ) -> Result<(), Error> {
        debug_assert!(self.unlogged.is_empty(), "turn rows wait for their fold");
        let range = block_key(session, 0)..=block_key(session, u32::MAX);
        for entry in self.tables.turns.range(range)? {
            let (key, value) = entry?;
            let (_, turn) = split_block_key(key.value());
            let record =
                postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("turn {session}:{turn}"), e));
            f(turn, record)?;
        }
        Ok(())
    }

    /// Calls `f` with every posting chunk in key order: anchor hash, session, chunk number and
    /// the encoded bytes. `f` returns false to stop.
    pub fn for_each_chunk(&self, mut f: impl FnMut(u64, u32, u32, &[u8]) -> bool) -> Result<(), Error> {
        for entry in self.tables.postings.iter()? {
            let (key, value) = entry?;
            let (hash, session, chunk) = keys::split_posting_key(key.value());
            if !f(hash, session, chunk, value.value()) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f` with every `terms` row: anchor hash and folded document frequency.
    pub fn for_each_term(&self, mut f: impl FnMut(u64, u64)) -> Result<(), Error> {
        for entry in self.tables.terms.iter()? {
            let (key, value) = entry?;
            f(key.value(), value.value());
        }
        Ok(())
    }
}

impl View<WriteSource<'_>> {
    /// Deletes sessions with their turns, pending rows, postings and names, and takes them out
    /// of the document frequencies and folded statistics. `folded_lengths` gives the exact side
    /// lengths of each folded turn (derived from its text: postings hold only their norms).
    ///
    /// Posting keys lead with the anchor, so the postings table is scanned once for all the
    /// sessions.
    pub fn remove_sessions(
        &mut self,
        ids: &[u32],
        mut folded_lengths: impl FnMut(&TurnRecord) -> (u32, u32),
    ) -> Result<Removed, Error> {
        let mut removed = Removed::default();
        if ids.is_empty() {
            return Ok(removed);
        }
        // A merge after this would bring back the postings of removed sessions.
        self.refuse_while_runs_wait()?;
        let doomed: std::collections::BTreeSet<u32> = ids.iter().copied().collect();
        let mut folded = FoldedTotals::default();
        for &id in &doomed {
            let record = self.session_record(id)?;
            let range = block_key(id, 0)..=block_key(id, u32::MAX);
            let mut keys_to_remove = Vec::new();
            for entry in self.tables.turns.range(range.clone())? {
                let (key, value) = entry?;
                let key = key.value();
                keys_to_remove.push(key);
                let (s, t) = split_block_key(key);
                if self.pending.get(s, t).is_some() {
                    removed.pending += 1;
                    continue;
                }
                let turn: TurnRecord =
                    postcard::from_bytes(value.value()).map_err(|e| corrupt(format!("turn {s}:{t}"), e))?;
                let (len_user, len_assistant) = folded_lengths(&turn);
                folded.blocks += 1;
                folded.len_user += u64::from(len_user);
                folded.len_assistant += u64::from(len_assistant);
            }
            for key in &keys_to_remove {
                self.tables.turns.remove(*key)?;
            }
            removed.turns += keys_to_remove.len() as u64;
            self.tables.pending.retain_in(range, |_, _| false)?;
            self.tables.sessions.remove(id)?;
            if let Some(record) = record {
                self.tables.names.remove(record.name.as_str())?;
            }
        }
        // Pending turns of the doomed sessions leave the in-memory log too.
        let pending = std::mem::take(&mut self.pending);
        for (key, forward) in pending.blocks {
            if !doomed.contains(&split_block_key(key).0) {
                self.pending.add(key, forward);
            }
        }
        // Folded postings: one pass over the postings table.
        let mut df_drop: IdentityHashMap<u64, u64> = IdentityHashMap::default();
        let mut bad: Option<Error> = None;
        self.tables.postings.retain(|key, value| {
            let (hash, session, chunk) = keys::split_posting_key(key);
            if !doomed.contains(&session) {
                return true;
            }
            match chunk_len(value) {
                Ok(n) => {
                    *df_drop.entry(hash).or_default() += n;
                    removed.postings += n;
                    removed.chunks += 1;
                }
                Err(e) => {
                    bad.get_or_insert_with(|| {
                        corrupt(format!("posting chunk {hash:x}/{session}/{chunk}"), e)
                    });
                }
            }
            false
        })?;
        if let Some(e) = bad {
            return Err(e);
        }
        let mut hashes: Vec<(u64, u64)> = df_drop.into_iter().collect();
        hashes.sort_unstable();
        for (hash, drop) in hashes {
            let df = self.tables.terms.get(hash)?.map_or(0, |g| g.value());
            let left = df.checked_sub(drop).ok_or_else(|| Error::Corrupt {
                what: format!("anchor {hash:x} has df {df}, below its {drop} postings being removed"),
            })?;
            if left == 0 {
                self.tables.terms.remove(hash)?;
                removed.anchors += 1;
            } else {
                self.tables.terms.insert(hash, left)?;
            }
        }
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.clear();
        }
        let sub = |have: u64, less: u64, what: &str| {
            have.checked_sub(less).ok_or_else(|| Error::Corrupt {
                what: format!("meta {what} {have} is below {less} being removed"),
            })
        };
        self.meta.folded_blocks = sub(self.meta.folded_blocks, folded.blocks, "folded blocks")?;
        self.meta.folded_len_user = sub(self.meta.folded_len_user, folded.len_user, "user length sum")?;
        self.meta.folded_len_assistant =
            sub(self.meta.folded_len_assistant, folded.len_assistant, "assistant length sum")?;
        self.meta.folded_postings = sub(self.meta.folded_postings, removed.postings, "postings")?;
        self.meta_dirty = true;
        Ok(removed)
    }

    /// Rewrites the posting lists whose chunks are not packed (a chunk before the tail with
    /// fewer than `CHUNK_CAPACITY` (128) postings, or chunk numbers with gaps) as full
    /// chunks numbered from 0. Returns `(lists rewritten, chunks before, chunks after)`.
    pub fn pack_postings(&mut self) -> Result<(u64, u64, u64), Error> {
        self.pack_postings_with_progress(&mut |_, _| {})
    }

    /// [`View::pack_postings`], calling `progress(lists rewritten, lists to rewrite)` once the
    /// lists to rewrite are found and after each one is rewritten (the caller throttles).
    pub fn pack_postings_with_progress(
        &mut self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, u64, u64), Error> {
        // Find the lists to rewrite in one read pass.
        let mut loose: Vec<(u64, u32)> = Vec::new();
        let mut current: Option<(u64, u32)> = None;
        let mut expected_chunk = 0u32;
        let mut previous_full = true;
        let mut flagged = false;
        let mut bad: Option<Error> = None;
        for entry in self.tables.postings.iter()? {
            let (key, value) = entry?;
            let (hash, session, chunk) = keys::split_posting_key(key.value());
            if current != Some((hash, session)) {
                current = Some((hash, session));
                expected_chunk = 0;
                previous_full = true;
                flagged = false;
            }
            let n = match chunk_len(value.value()) {
                Ok(n) => n,
                Err(e) => {
                    bad = Some(corrupt(format!("posting chunk {hash:x}/{session}/{chunk}"), e));
                    break;
                }
            };
            if !flagged && (chunk != expected_chunk || !previous_full) {
                loose.push((hash, session));
                flagged = true;
            }
            expected_chunk = chunk.wrapping_add(1);
            previous_full = n >= u64::from(postings::CHUNK_CAPACITY);
        }
        if let Some(e) = bad {
            return Err(e);
        }
        let (mut before, mut after) = (0u64, 0u64);
        let total = loose.len() as u64;
        progress(0, total);
        for (done, &(hash, session)) in (1u64..).zip(&loose) {
            let mut list = Vec::new();
            let range = keys::list_range(hash, session);
            let mut old_keys = Vec::new();
            for entry in self.tables.postings.range(range.clone())? {
                let (key, value) = entry?;
                old_keys.push(key.value());
                postings::decode(value.value(), |p| list.push(p)).map_err(|e| {
                    corrupt(format!("posting chunk {:?}", keys::split_posting_key(key.value())), e)
                })?;
            }
            before += old_keys.len() as u64;
            self.tables.postings.retain_in(range, |_, _| false)?;
            let table = &mut self.tables.postings;
            let mut writer = ListWriter::new(hash, session);
            for posting in &list {
                writer.push(table, posting)?;
            }
            after += writer.chunks();
            writer.finish(table)?;
            progress(done, total);
        }
        Ok((total, before, after))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Store, StoreOptions};
    use super::*;

    fn posting(turn: u32) -> Posting {
        Posting { turn, tf_user: 1, tf_assistant: 0, len_user: 3, len_assistant: 0 }
    }

    fn chunk(turns: std::ops::Range<u32>) -> Vec<u8> {
        let mut builder = postings::ChunkBuilder::new();
        for turn in turns {
            builder.push(&posting(turn)).unwrap_or_default();
        }
        builder.finish()
    }

    /// An empty index in a temporary directory (kept alive by the returned guard).
    fn temp_store() -> Result<(tempfile::TempDir, Store), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let options = StoreOptions {
            cache_bytes: 1 << 20,
            busy_timeout: std::time::Duration::from_secs(1),
            quick_repair: false,
        };
        let store = Store::open(&dir.path().join("index.redb"), &options)?;
        Ok((dir, store))
    }

    #[test]
    fn pack_postings_merges_loose_chunks_in_order() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        store.write(|view| -> Result<(), Error> {
            // A list with a short chunk before the tail and a gap in the numbering, and a
            // packed list that must stay as it is.
            view.tables.postings.insert(keys::posting_key(7, 0, 0), chunk(0..10).as_slice())?;
            view.tables.postings.insert(keys::posting_key(7, 0, 3), chunk(10..300).as_slice())?;
            view.tables.postings.insert(keys::posting_key(8, 0, 0), chunk(0..5).as_slice())?;
            Ok(())
        })?;
        let packed = store.write(|view| view.pack_postings())?;
        assert_eq!(packed, (1, 2, 3));
        let view = store.read()?;
        let mut turns = Vec::new();
        view.session_postings(7, 0, |p| turns.push(p.turn))?;
        assert_eq!(turns, (0..300).collect::<Vec<_>>());
        let mut chunks = Vec::new();
        view.for_each_chunk(|hash, _, chunk, bytes| {
            chunks.push((hash, chunk, chunk_len(bytes).unwrap_or(0)));
            true
        })?;
        assert_eq!(chunks, [(7, 0, 128), (7, 1, 128), (7, 2, 44), (8, 0, 5)]);
        Ok(())
    }

    fn turn_record() -> TurnRecord {
        let gate =
            super::super::records::GateRecord { switch: false, overlap: 0.0, new_ratio: 0.0, deictic: None };
        TurnRecord {
            user: "u".into(),
            assistant: "a".into(),
            gate,
            segment_start: 0,
            time: None,
            tools: Vec::new(),
        }
    }

    #[test]
    fn turns_put_to_fold_count_in_frequencies_and_counts() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        let forward = |hashes: &[u64]| ForwardRecord {
            len_user: 2,
            len_assistant: 0,
            entries: hashes.iter().map(|&h| (h, 1, 0)).collect(),
        };
        store.write(|view| -> Result<(), Error> {
            view.put_turn(0, 0, &turn_record(), forward(&[5, 6]), PendingRow::Logged)?;
            assert_eq!(view.df(5)?, 1);
            // A bulk writer's turns are not counted per anchor as they are put: the view
            // counts them from the pending blocks.
            view.put_turn(1, 0, &turn_record(), forward(&[5]), PendingRow::FoldInTransaction)?;
            view.put_turn(1, 1, &turn_record(), forward(&[7]), PendingRow::FoldInTransaction)?;
            assert_eq!((view.df(5)?, view.df(6)?, view.df(7)?, view.df(8)?), (2, 1, 1, 0));
            let counts = view.counts()?;
            assert_eq!((counts.turns, counts.anchors, counts.postings, counts.pending), (3, 3, 4, 3));
            Ok(())
        })?;
        let view = store.read()?;
        assert_eq!((view.df(5)?, view.df(6)?, view.df(7)?), (2, 1, 1), "folded at the commit");
        assert!(view.pending().is_empty());
        Ok(())
    }

    #[test]
    fn a_fold_adds_to_the_stored_frequencies_whether_the_view_read_them_or_not()
    -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        let forward = |hashes: &[u64]| ForwardRecord {
            len_user: hashes.len() as u32,
            len_assistant: 0,
            entries: hashes.iter().map(|&h| (h, 1, 0)).collect(),
        };
        store.write(|view| {
            view.put_turn(0, 0, &turn_record(), forward(&[5, 6]), PendingRow::FoldInTransaction)
        })?;
        store.write(|view| -> Result<(), Error> {
            assert_eq!(view.df(5)?, 1, "read by this view; 6 is not");
            view.put_turn(0, 1, &turn_record(), forward(&[5, 6, 7]), PendingRow::FoldInTransaction)?;
            view.fold()?;
            // Folded again by the same view: from the frequencies the first fold wrote.
            view.put_turn(0, 2, &turn_record(), forward(&[6, 8]), PendingRow::FoldInTransaction)?;
            view.fold()
        })?;
        let view = store.read()?;
        for (hash, expected) in [(5, 2), (6, 3), (7, 1), (8, 1)] {
            let mut postings = 0;
            view.anchor_postings(hash, |_, _| postings += 1)?;
            assert_eq!((view.df(hash)?, postings), (expected, expected), "anchor {hash}");
        }
        Ok(())
    }

    #[test]
    fn fold_grouped_takes_only_the_pending_turns_in_session_order() -> Result<(), Box<dyn std::error::Error>>
    {
        let (_dir, store) = temp_store()?;
        // Session 0 turns 0 and 1, session 1 turn 0; anchors 5 and 6.
        let turns: [(u32, u32, &[u64]); 3] = [(0, 0, &[5, 6]), (0, 1, &[6]), (1, 0, &[5])];
        let block = |(s, t): (u32, u32)| NewBlock { key: block_key(s, t), len_user: 2, len_assistant: 0 };
        let fold = |order: &[(u32, u32)], extra: Option<u64>, swapped: bool| {
            store.write(|view| -> Result<(), Error> {
                for &(s, t, hashes) in &turns {
                    let entries = hashes.iter().map(|&h| (h, 1, 0)).collect();
                    let forward = ForwardRecord { len_user: 2, len_assistant: 0, entries };
                    view.put_turn(s, t, &turn_record(), forward, PendingRow::Logged)?;
                }
                let blocks: Vec<NewBlock> = order.iter().map(|&b| block(b)).collect();
                let mut postings = Vec::new();
                for (i, b) in (0u32..).zip(order) {
                    let hashes = turns.iter().find(|t| (t.0, t.1) == *b).map_or(&[][..], |t| t.2);
                    let hashes = hashes.iter().copied().chain(extra.filter(|_| i == 0));
                    postings.push(hashes.map(|hash| (hash, 1, 0)).collect::<Vec<_>>());
                }
                if swapped {
                    postings.swap(1, 2);
                }
                let slices: Vec<&[(u64, u32, u32)]> = postings.iter().map(|p| &p[..]).collect();
                let grouped = Grouped::by_anchor(&slices);
                view.fold_grouped(&grouped, &blocks, FoldTarget::Postings)
            })
        };
        // Refused: a session's turns apart or out of order, a turn missing, an anchor added,
        // two turns' anchors exchanged (each anchor's count unchanged).
        assert!(fold(&[(0, 0), (1, 0), (0, 1)], None, false).is_err());
        assert!(fold(&[(0, 1), (0, 0), (1, 0)], None, false).is_err());
        assert!(fold(&[(0, 0), (0, 1)], None, false).is_err());
        assert!(fold(&[(0, 0), (0, 1), (1, 0)], Some(7), false).is_err());
        assert!(fold(&[(0, 0), (0, 1), (1, 0)], None, true).is_err());
        assert_eq!(store.read()?.counts()?.turns, 0, "a refused fold writes nothing");
        // Sessions in either order are fine.
        fold(&[(1, 0), (0, 0), (0, 1)], None, false)?;
        let view = store.read()?;
        assert!(view.pending().is_empty());
        let mut six = Vec::new();
        view.session_postings(6, 0, |p| six.push(p.turn))?;
        assert_eq!(six, [0, 1]);
        let mut five = Vec::new();
        view.session_postings(5, 1, |p| five.push(p.turn))?;
        assert_eq!((five, view.df(5)?, view.df(6)?), (vec![0], 2, 2));
        Ok(())
    }
}
