//! `View`: one consistent transaction over the tables, read-only or writable.
//!
//! A read view is a redb read transaction (a snapshot); a write view is the one write
//! transaction. Both hold the pending turns decoded in memory, so document frequencies, N and
//! the pending tail of a session's postings come from memory; the store keeps the last ones
//! decoded and shares them with every view that finds the `pending` table unchanged.
//!
//! Split by job: [`pending`] (the pending turns decoded in memory), `read` (lookups),
//! `write` (new sessions and turns, the fold into lists or runs), `walk` (the whole-table
//! walkers `verify` and `rebuild` use) and `maintenance` (forgetting sessions, packing lists).

use super::cursor::PostingCursor;
use super::error::{Error, corrupt};
use super::grouped::{Grouped, NewBlock, for_each_list};
use super::keys::{self, IdentityHashMap, block_key, split_block_key};
use super::lists::{AnchorWriter, store_rows};
use super::norms::{self, Norms, SessionLengths};
use super::postings::{self, Posting};
use super::records::{ForwardRecord, MetaRecord, SessionRecord, TurnRecord};
use super::run_file::{self, RunSpan};
use super::runs::{self, Merged, NextRun, WrittenRun};
use super::sorted;
use super::turn_text::{Decoders, TextDictionary};
use super::{FOLD_BATCH, META_KEY, format};
use redb::{ReadOnlyTable, ReadableTable, ReadableTableMetadata, Table};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

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
    /// `text_dictionaries`.
    type Dictionaries: ReadableTable<u32, &'static [u8]>;
    /// `terms`.
    type Terms: ReadableTable<u64, u64>;
    /// `postings`.
    type Postings: ReadableTable<u128, &'static [u8]>;
    /// `norms`.
    type Norms: ReadableTable<u64, &'static [u8]>;
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
    /// `import_checkpoints`: only a write transaction has them (readers use
    /// `Store::import_checkpoint`: older files lack the table).
    type Checkpoints;
}

/// Tables of a read transaction.
pub struct ReadSource;
impl Source for ReadSource {
    type Meta = ReadOnlyTable<&'static str, &'static [u8]>;
    type Names = ReadOnlyTable<&'static str, u32>;
    type Sessions = ReadOnlyTable<u32, &'static [u8]>;
    type Blocks = ReadOnlyTable<u64, &'static [u8]>;
    type Dictionaries = ReadOnlyTable<u32, &'static [u8]>;
    type Terms = ReadOnlyTable<u64, u64>;
    type Postings = ReadOnlyTable<u128, &'static [u8]>;
    type Norms = ReadOnlyTable<u64, &'static [u8]>;
    type EvidenceDocs = ReadOnlyTable<u32, &'static [u8]>;
    type EvidenceRefs = ReadOnlyTable<&'static str, u32>;
    type EvidencePostings = ReadOnlyTable<(u64, u32), (u32, u32)>;
    type EvidenceTerms = ReadOnlyTable<u64, u32>;
    /// Whether an import's runs wait in the snapshot ([`View::import_running`]).
    type Runs = bool;
    type Checkpoints = ();
}

/// Tables of a write transaction.
pub struct WriteSource<'t>(std::marker::PhantomData<&'t ()>);
impl<'t> Source for WriteSource<'t> {
    type Meta = Table<'t, &'static str, &'static [u8]>;
    type Names = Table<'t, &'static str, u32>;
    type Sessions = Table<'t, u32, &'static [u8]>;
    type Blocks = Table<'t, u64, &'static [u8]>;
    type Dictionaries = Table<'t, u32, &'static [u8]>;
    type Terms = Table<'t, u64, u64>;
    type Postings = Table<'t, u128, &'static [u8]>;
    type Norms = Table<'t, u64, &'static [u8]>;
    type EvidenceDocs = Table<'t, u32, &'static [u8]>;
    type EvidenceRefs = Table<'t, &'static str, u32>;
    type EvidencePostings = Table<'t, (u64, u32), (u32, u32)>;
    type EvidenceTerms = Table<'t, u64, u32>;
    type Runs = Table<'t, u32, (u64, u64, u64)>;
    type Checkpoints = Table<'t, &'static [u8], &'static [u8]>;
}

/// The opened tables of one transaction.
pub(crate) struct Tables<S: Source> {
    pub meta: S::Meta,
    pub names: S::Names,
    pub sessions: S::Sessions,
    pub turns: S::Blocks,
    pub pending: S::Blocks,
    pub dictionaries: S::Dictionaries,
    pub terms: S::Terms,
    pub postings: S::Postings,
    pub norms: S::Norms,
    pub evidence: S::EvidenceDocs,
    pub evidence_refs: S::EvidenceRefs,
    pub evidence_postings: S::EvidencePostings,
    pub evidence_terms: S::EvidenceTerms,
    pub runs: S::Runs,
    pub checkpoints: S::Checkpoints,
}

/// Rows of the `turns`, `postings`, `terms` and `evidence` tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RowCounts {
    pub turns: u64,
    pub chunks: u64,
    pub terms: u64,
    pub evidence: u64,
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

/// The space one table takes in the file (redb's table statistics).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TableSize {
    /// The table's name in the file.
    pub table: &'static str,
    /// Rows.
    pub rows: u64,
    /// Bytes of keys and values.
    pub stored_bytes: u64,
    /// Bytes of branch pages and other metadata.
    pub metadata_bytes: u64,
    /// Bytes of pages the table holds but does not fill.
    pub fragmented_bytes: u64,
}

impl TableSize {
    fn of(table: &'static str, t: &impl ReadableTableMetadata) -> Result<Self, Error> {
        let stats = t.stats()?;
        Ok(TableSize {
            table,
            rows: t.len()?,
            stored_bytes: stats.stored_bytes(),
            metadata_bytes: stats.metadata_bytes(),
            fragmented_bytes: stats.fragmented_bytes(),
        })
    }

    /// Every byte the table occupies.
    pub fn total_bytes(&self) -> u64 {
        self.stored_bytes + self.metadata_bytes + self.fragmented_bytes
    }
}

/// A consistent view of the index: one read or write transaction.
pub struct View<S: Source> {
    path: PathBuf,
    meta: MetaRecord,
    pub(crate) tables: Tables<S>,
    /// Shared with the store's [`PendingCache`] until a write changes it.
    pending: Arc<PendingBlocks>,
    /// The fingerprint of the `pending` table as `pending` holds it, while it is known: rows
    /// added one at a time keep it; any other change forgets it.
    pending_fingerprint: Option<u64>,
    meta_dirty: bool,
    /// Pending turns of this transaction without a `pending` row, by block key: their encoded
    /// `turns` rows, stored in key order by the fold, which comes before the commit.
    unlogged: BTreeMap<u64, Vec<u8>>,
    /// Folded document frequencies read in this view (a bulk import looks the same ones up
    /// for every turn). Cleared when a fold changes them.
    df_cache: Mutex<IdentityHashMap<u64, u64>>,
    /// The run this transaction took ([`View::next_run`]) and has not recorded yet.
    run_taken: Option<u32>,
    /// Decompressors of turn text, made as rows need them.
    decoders: Mutex<Decoders>,
    /// The text dictionary new turns are compressed with: the last one stored.
    text_dictionary: std::sync::OnceLock<Option<(u32, TextDictionary)>>,
    /// Ids of the text dictionaries this view looked up, by the hash of their bytes.
    dictionary_ids: IdentityHashMap<u64, u32>,
}

impl<S: Source> View<S> {
    pub(super) fn open(path: &Path, tables: Tables<S>, cache: &PendingCache) -> Result<Self, Error> {
        let meta = {
            let bytes =
                tables.meta.get(META_KEY)?.ok_or_else(|| Error::NotAnIndex { path: path.to_path_buf() })?;
            format::check_meta(path, bytes.value())?
        };
        let mut fingerprint = 0u64;
        for entry in tables.pending.iter()? {
            let (key, value) = entry?;
            fingerprint = fingerprint.wrapping_add(pending::row_fingerprint(key.value(), value.value()));
        }
        let pending = match cache.get(fingerprint) {
            Some(pending) => pending,
            None => {
                let mut pending = PendingBlocks::default();
                for entry in tables.pending.iter()? {
                    let (key, value) = entry?;
                    let key = key.value();
                    let forward: ForwardRecord = postcard::from_bytes(value.value())
                        .map_err(|e| corrupt(format!("anchors of pending turn {:?}", split_block_key(key)), e))?;
                    pending.add(key, forward);
                }
                let pending = Arc::new(pending);
                cache.put(fingerprint, Arc::clone(&pending));
                pending
            }
        };
        Ok(View {
            path: path.to_path_buf(),
            meta,
            tables,
            pending,
            pending_fingerprint: Some(fingerprint),
            meta_dirty: false,
            unlogged: BTreeMap::new(),
            df_cache: Mutex::new(IdentityHashMap::default()),
            run_taken: None,
            decoders: Mutex::new(Decoders::default()),
            text_dictionary: std::sync::OnceLock::new(),
            dictionary_ids: IdentityHashMap::default(),
        })
    }

    /// The pending turns.
    pub fn pending(&self) -> &PendingBlocks {
        &self.pending
    }

    /// The pending turns, to change: the view's own copy from then on, its fingerprint
    /// forgotten unless the caller keeps it.
    fn pending_mut(&mut self) -> &mut PendingBlocks {
        self.pending_fingerprint = None;
        Arc::make_mut(&mut self.pending)
    }

    /// The pending turns as this view leaves the table, with the table's fingerprint, when
    /// it is known: for the store's cache once the transaction commits.
    pub(in crate::store) fn pending_to_cache(&self) -> Option<(u64, Arc<PendingBlocks>)> {
        self.pending_fingerprint.map(|f| (f, Arc::clone(&self.pending)))
    }
}

mod maintenance;
mod pending;
mod read;
mod walk;
mod write;

pub use maintenance::Removed;
pub use pending::{PendingBlocks, PendingCache};
pub use walk::FoldedTotals;
pub use write::{FoldTarget, PendingRow};

#[cfg(test)]
mod tests {
    use super::super::{Store, StoreOptions};
    use super::*;

    fn posting(turn: u32) -> Posting {
        Posting { turn, tf_user: 1, tf_assistant: 0, len_user: 3, len_assistant: 0 }
    }

    /// A posting row of `anchor` in session 0 with these turns.
    fn row(anchor: u64, turns: std::ops::Range<u32>) -> Vec<u8> {
        let entries: Vec<(u32, Posting)> = turns.map(|turn| (0, posting(turn))).collect();
        let mut out = Vec::new();
        postings::encode_row(anchor, &entries, &mut out);
        out
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
    fn pack_postings_merges_loose_rows_in_order() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        store.write(|view| -> Result<(), Error> {
            // An anchor with a short row before its last (one over capacity), and a packed
            // anchor that must stay as it is.
            view.tables.postings.insert(keys::posting_key(7, 0, 0), row(7, 0..10).as_slice())?;
            view.tables.postings.insert(keys::posting_key(7, 0, 10), row(7, 10..300).as_slice())?;
            view.tables.postings.insert(keys::posting_key(8, 0, 0), row(8, 0..5).as_slice())?;
            let blocks: Vec<NewBlock> =
                (0..300).map(|turn| NewBlock { key: block_key(0, turn), len_user: 3, len_assistant: 0 }).collect();
            norms::put(&mut view.tables.norms, &blocks)?;
            Ok(())
        })?;
        let packed = store.write(|view| view.pack_postings())?;
        assert_eq!(packed, (1, 2, 3));
        let view = store.read()?;
        let mut turns = Vec::new();
        view.session_postings(7, 0, |p| turns.push(p.turn))?;
        assert_eq!(turns, (0..300).collect::<Vec<_>>());
        let mut rows = Vec::new();
        view.for_each_row(|hash, key, bytes| {
            rows.push((hash, key, postings::row_len(hash, key, bytes).unwrap_or(0)));
            true
        })?;
        assert_eq!(rows, [(7, (0, 0), 128), (7, (0, 128), 128), (7, (0, 256), 44), (8, (0, 0), 5)]);
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
            view.put_turn(0, 0, &turn_record(), None, forward(&[5, 6]), PendingRow::Logged)?;
            assert_eq!(view.df(5)?, 1);
            // A bulk writer's turns are not counted per anchor as they are put: the view
            // counts them from the pending blocks.
            view.put_turn(1, 0, &turn_record(), None, forward(&[5]), PendingRow::FoldInTransaction)?;
            view.put_turn(1, 1, &turn_record(), None, forward(&[7]), PendingRow::FoldInTransaction)?;
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

    /// The pending turns a store decoded serve its next views while the `pending` table is
    /// unchanged, and never stand in for a table another handle changed.
    #[test]
    fn pending_turns_are_decoded_again_only_when_the_table_changed() -> Result<(), Box<dyn std::error::Error>> {
        let (dir, store) = temp_store()?;
        let options =
            StoreOptions { cache_bytes: 1 << 20, busy_timeout: std::time::Duration::from_secs(1), quick_repair: false };
        let other = Store::open(&dir.path().join("index.redb"), &options)?;
        let forward = |hashes: &[u64]| ForwardRecord {
            len_user: hashes.len() as u32,
            len_assistant: 0,
            entries: hashes.iter().map(|&h| (h, 1, 0)).collect(),
        };
        let put = |store: &Store, session: u32, turn: u32, hashes: &[u64]| {
            store.write(|view| view.put_turn(session, turn, &turn_record(), None, forward(hashes), PendingRow::Logged))
        };
        put(&store, 0, 0, &[5, 6])?;
        // The write's own blocks serve the reads after it, one copy shared.
        let misses = store.pending.misses();
        let (a, b) = (store.read()?, store.read()?);
        assert_eq!(store.pending.misses(), misses, "the write's blocks kept");
        assert!(std::ptr::eq(a.pending(), b.pending()), "one copy");
        assert_eq!((a.pending().len(), a.df(5)?, a.df(6)?), (1, 1, 1));
        drop((a, b));
        // Another handle adds a turn: this one's blocks are stale and not used.
        put(&other, 0, 1, &[5])?;
        let view = store.read()?;
        assert_eq!(store.pending.misses(), misses + 1);
        assert_eq!((view.pending().len(), view.df(5)?, view.df(6)?), (2, 2, 1));
        drop(view);
        // Another handle removes the session: the table is empty again.
        let remove = |store: &Store| store.write(|view| view.remove_sessions(&[0], |_| (0, 0)).map(|_| ()));
        remove(&other)?;
        let view = store.read()?;
        assert_eq!((view.pending().len(), view.df(5)?), (0, 0));
        drop(view);
        // A row's content counts, not only its key: this handle keeps {0:0 -> [5, 6]}, another
        // puts other anchors under the same key.
        put(&store, 0, 0, &[5, 6])?;
        remove(&other)?;
        put(&other, 0, 0, &[7])?;
        let view = store.read()?;
        assert_eq!((view.pending().len(), view.df(5)?, view.df(7)?), (1, 0, 1));
        drop(view);
        // A removal by this handle hands nothing on: when another handle puts back the very
        // rows it held before, they are read, not the removal's empty blocks.
        remove(&store)?;
        put(&other, 0, 0, &[7])?;
        let view = store.read()?;
        assert_eq!((view.pending().len(), view.df(7)?), (1, 1));
        drop(view);
        // A fold empties the table and hands on empty blocks, read without a decode.
        store.write(|view| view.put_turn(1, 0, &turn_record(), None, forward(&[9]), PendingRow::FoldInTransaction))?;
        let misses = store.pending.misses();
        let view = store.read()?;
        assert_eq!(store.pending.misses(), misses, "the fold's empty blocks kept");
        assert_eq!((view.pending().len(), view.df(7)?, view.df(9)?), (0, 1, 1));
        drop(view);
        put(&store, 0, 1, &[8])?;
        let fresh = Store::open(&dir.path().join("index.redb"), &options)?;
        for view in [store.read()?, other.read()?, fresh.read()?] {
            assert_eq!((view.pending().len(), view.df(7)?, view.df(8)?, view.df(9)?), (1, 1, 1, 1));
        }
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
            view.put_turn(0, 0, &turn_record(), None, forward(&[5, 6]), PendingRow::FoldInTransaction)
        })?;
        store.write(|view| -> Result<(), Error> {
            assert_eq!(view.df(5)?, 1, "read by this view; 6 is not");
            view.put_turn(0, 1, &turn_record(), None, forward(&[5, 6, 7]), PendingRow::FoldInTransaction)?;
            view.fold()?;
            // Folded again by the same view: from the frequencies the first fold wrote.
            view.put_turn(0, 2, &turn_record(), None, forward(&[6, 8]), PendingRow::FoldInTransaction)?;
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
                    view.put_turn(s, t, &turn_record(), None, forward, PendingRow::Logged)?;
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
        // Each is a caller's bug (kind internal), not a damaged file.
        let refused = |r: Result<(), Error>| r.is_err_and(|e| e.kind() == crate::ErrorKind::Internal);
        assert!(refused(fold(&[(0, 0), (1, 0), (0, 1)], None, false)));
        assert!(refused(fold(&[(0, 1), (0, 0), (1, 0)], None, false)));
        assert!(refused(fold(&[(0, 0), (0, 1)], None, false)));
        assert!(refused(fold(&[(0, 0), (0, 1), (1, 0)], Some(7), false)));
        assert!(refused(fold(&[(0, 0), (0, 1), (1, 0)], None, true)));
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

    #[test]
    fn session_lengths_are_those_a_filled_list_has() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        // Two anchors over three norm rows of session 0 (lengths varying by turn), and one
        // posting in session 1.
        let turns: Vec<u32> = (0..9000).step_by(7).collect();
        let length = |turn: u32| 1 + turn % 97;
        store.write(|view| -> Result<(), Error> {
            for hash in [7, 8] {
                let mut entries: Vec<(u32, Posting)> =
                    turns.iter().map(|&turn| (0, Posting::new(turn, 1, 0, 0, 0))).collect();
                entries.push((1, Posting::new(3, 0, 1, 0, 0)));
                for chunk in entries.chunks(postings::ROW_CAPACITY) {
                    let (session, first) = (chunk[0].0, chunk[0].1.turn);
                    let mut row = Vec::new();
                    postings::encode_row(hash, chunk, &mut row);
                    view.tables.postings.insert(keys::posting_key(hash, session, first), row.as_slice())?;
                }
            }
            let mut blocks: Vec<NewBlock> = (0..9000)
                .map(|turn| NewBlock { key: block_key(0, turn), len_user: length(turn), len_assistant: 5 })
                .collect();
            blocks.extend((0..4).map(|turn| NewBlock { key: block_key(1, turn), len_user: 2, len_assistant: 9 }));
            norms::put(&mut view.tables.norms, &blocks)?;
            // A pending turn after the folded ones, in the third row: its lengths are its record's.
            let forward = |len_user| ForwardRecord { len_user, len_assistant: 2, entries: vec![(7, 1, 1)] };
            view.put_turn(0, 9000, &turn_record(), None, forward(300), PendingRow::Logged)?;
            // Session 3: pending turns only, across a row's end. Session 4: a gap in its pending
            // turns (a damaged index), past which none has lengths.
            for (session, turn) in [(3, 4094), (3, 4095), (3, 4096), (3, 4097), (4, 10), (4, 11), (4, 13)] {
                view.put_turn(session, turn, &turn_record(), None, forward(turn), PendingRow::Logged)?;
            }
            Ok(())
        })?;
        let view = store.read()?;
        let filled = |hash, session| -> Result<Vec<Posting>, Error> {
            let mut list = Vec::new();
            view.session_postings(hash, session, |p| list.push(p))?;
            Ok(list)
        };
        let mut expected = filled(7, 0)?;
        assert_eq!(expected.len(), turns.len());
        assert!(expected.iter().all(|p| p.len_user == postings::decode_norm(postings::encode_norm(length(p.turn)))));
        expected.push(Posting::new(9000, 1, 1, postings::decode_norm(postings::encode_norm(300)), 2));
        let looked_up = |lengths: &SessionLengths<'_, _>, hash, session| -> Result<Vec<Posting>, Error> {
            let mut list = Vec::new();
            view.session_postings_without_lengths(hash, session, &mut list)?;
            assert!(list.iter().all(|p| (p.len_user, p.len_assistant) == (0, 0)));
            (list.iter())
                .map(|p| {
                    let low = p.turn - p.turn % norms::ROW_TURNS;
                    let block = lengths.block(low)?;
                    let k = (p.turn - low) as usize;
                    let (user, assistant) = block.lengths(k).ok_or_else(|| block.missing(k))?;
                    Ok(Posting::new(p.turn, p.tf_user, p.tf_assistant, user, assistant))
                })
                .collect()
        };
        // Two threads share the rows of session 0: each finds what filling the list would.
        let lengths = view.session_lengths(0, 9001);
        let (seven, eight) = std::thread::scope(|scope| {
            let seven = scope.spawn(|| looked_up(&lengths, 7, 0));
            let eight = scope.spawn(|| looked_up(&lengths, 8, 0));
            (seven.join().expect("thread"), eight.join().expect("thread"))
        });
        assert_eq!(seven?, expected);
        assert_eq!(eight?, filled(8, 0)?);
        assert_eq!(looked_up(&view.session_lengths(1, 4), 7, 1)?, [Posting::new(3, 0, 1, 0, 9)]);
        let quantized = |len| postings::decode_norm(postings::encode_norm(len));
        let three = view.session_lengths(3, 4098);
        let (first, second) = (three.block(0)?, three.block(4096)?);
        assert_eq!((first.lengths(4093), first.lengths(4094)), (None, Some((quantized(4094), 2))));
        assert_eq!(first.lengths(4095), Some((quantized(4095), 2)));
        assert_eq!((second.lengths(0), second.lengths(1)), (Some((quantized(4096), 2)), Some((quantized(4097), 2))));
        assert_eq!(second.lengths(2), None);
        let [before, after] = first.gaps();
        assert_eq!((before, after.start >= 4096), (0..4094, true), "the pending turns run into the next block");
        assert_eq!(second.gaps(), [0..0, 2..usize::MAX]);
        let four = view.session_lengths(4, 14);
        let block = four.block(0)?;
        assert_eq!((block.lengths(11), block.lengths(13)), (Some((11, 2)), None));
        // A session whose norm rows are missing: an error naming the turn, not lengths of 0.
        let none = view.session_lengths(2, 10);
        let block = none.block(0)?;
        assert_eq!(block.lengths(3), None);
        assert!(block.missing(3).to_string().contains("norms of turn 2:3"), "{}", block.missing(3));
        Ok(())
    }

    #[test]
    fn rows_that_overlap_are_an_error_not_a_list_out_of_order() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        // Two rows of session 0, each whole, the second keyed inside the first's turns (as a
        // damaged delta could leave them): scoring would index its sums out of range.
        store.write(|view| -> Result<(), Error> {
            for (first, count) in [(0u32, 10u32), (5, 10)] {
                let entries: Vec<(u32, Posting)> =
                    (first..first + count).map(|turn| (0, Posting::new(turn, 1, 0, 0, 0))).collect();
                let mut row = Vec::new();
                postings::encode_row(7, &entries, &mut row);
                view.tables.postings.insert(keys::posting_key(7, 0, first), row.as_slice())?;
            }
            let blocks: Vec<NewBlock> =
                (0..20).map(|turn| NewBlock { key: block_key(0, turn), len_user: 3, len_assistant: 4 }).collect();
            norms::put(&mut view.tables.norms, &blocks)?;
            Ok(())
        })?;
        let view = store.read()?;
        let mut list = Vec::new();
        let read = view.session_postings_without_lengths(7, 0, &mut list);
        assert!(read.is_err(), "{:?}", list.iter().map(|p| p.turn).collect::<Vec<_>>());
        Ok(())
    }

    #[test]
    fn a_session_holds_an_anchor_only_where_a_row_reaches_it() -> Result<(), Box<dyn std::error::Error>> {
        let (_dir, store) = temp_store()?;
        // One row keyed by session 0 holds anchor 7 in sessions 0 and 1; session 2 has none.
        store.write(|view| -> Result<(), Error> {
            let entries = [(0, posting(4)), (1, posting(2))];
            let mut row = Vec::new();
            postings::encode_row(7, &entries, &mut row);
            view.tables.postings.insert(keys::posting_key(7, 0, 4), row.as_slice())?;
            Ok(())
        })?;
        let view = store.read()?;
        let held: Vec<bool> = (0..3).map(|s| view.session_holds(7, s)).collect::<Result<_, _>>()?;
        assert_eq!(held, [true, true, false], "the row before session 2's place does not reach it");
        assert!(!view.session_holds(8, 0)?);
        Ok(())
    }
}
