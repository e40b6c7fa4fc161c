//! Runs: an import's postings, written batch by batch in key order and merged once at its end.
//!
//! Folding a batch into the anchor-major `postings` table touches the lists of every anchor
//! in the batch, all over the B-tree: each batch's commit copied most of its leaf pages, and
//! at a million turns that was two thirds of the import's time. A bulk import instead writes
//! each batch's postings as one *run*, one value per anchor in hash order, to the index's run
//! file (`super::run_file`; ctxgate before it appended runs to the `posting_runs` table, and
//! still merges those). When the import ends,
//! [`read_lists`] reads the runs side by side in anchor order, on a thread of its own, and
//! [`store_lists`] appends each session's list to `postings` once, in key order (external
//! sorting, as search engines merge their segments).
//!
//! A run's value holds, session by session, the list cut into chunks of at most
//! [`CHUNK_CAPACITY`] postings ([`super::codec`]' chunk encoding):
//! ```text
//! value = (varint session | varint chunks | (varint chunk_len | chunk)*)*
//! ```
//! The merge decodes them and appends them to the anchors' rows ([`AnchorWriter`]).
//!
//! Everything but the postings is written by the batch itself: turns, document frequencies
//! and N are exact after every commit. Queries read the lists, not the runs: the import merges
//! its runs every 131,072 turns and at its end (`write::batch::MERGE_TURNS`); a write that
//! appends to the lists itself merges waiting runs first ([`super::View::merge_runs`]), and
//! turns added one at a time stay pending meanwhile. Runs a killed import left are merged by
//! the next writer that opens the index and finds no live import (`super::IndexLock`).

use super::codec::{self, CHUNK_CAPACITY, ChunkBuilder, CorruptChunk, Posting, Reader};
use super::grouped::{Grouped, NewBlock, for_each_list};
use super::keys::{run_key, split_run_key};
use super::lists::{AnchorWriter, PostingsTable};
use super::run_file::{RunBytes, RunReader, RunSpan};
use super::{Error, corrupt};
use redb::{AccessGuard, Range, ReadableTable, TableDefinition};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;

/// Run key -> the postings of one anchor written by one batch of an import, session by
/// session as chunks, as ctxgate wrote runs before `posting_run_files`: read only by the merge
/// of runs an import killed by such a build left ([`super::runs`]).
pub(crate) const RUNS: TableDefinition<u128, &[u8]> = TableDefinition::new("posting_runs");

/// What a merge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Merged {
    /// Runs merged.
    pub runs: u32,
    /// Lists (anchor, session) appended to.
    pub lists: u64,
    /// Rows of the `postings` table stored (new or rewritten).
    pub chunks: u64,
}

/// Where a bulk batch's run goes: its id, and the run file and offset after the recorded runs.
/// Taken from the write transaction that records the run ([`super::View::next_run`]), once:
/// a second run written there would overwrite the first.
#[derive(Debug)]
pub struct NextRun {
    pub(crate) run: u32,
    pub(crate) path: PathBuf,
    pub(crate) offset: u64,
}

/// A run in the run file, for the transaction that took its [`NextRun`] to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenRun {
    pub(crate) run: u32,
    pub(crate) span: RunSpan,
    /// Lists (anchor, session) it holds.
    pub(crate) lists: usize,
    /// Anchors and postings it holds, checked against the fold's.
    pub(crate) anchors: usize,
    pub(crate) postings: usize,
}

impl NextRun {
    /// Encodes the postings of a batch, `grouped` by anchor with their `blocks` (keys filled
    /// in), and writes them to the run file. Touches no table: a bulk writer runs it on a
    /// thread of its own while it adds the batch's turns.
    pub fn write(self, grouped: &Grouped, blocks: &[NewBlock]) -> Result<WrittenRun, Error> {
        let mut run = RunBytes::default();
        let mut chunk = ChunkBuilder::new();
        let mut list = Vec::new();
        let mut lists = 0;
        for (hash, group) in grouped.groups() {
            run.start_entry(hash);
            lists += for_each_list(group, blocks, &mut list, |session, list| {
                push_list(run.value(), &mut chunk, session, list).map_err(|e| corrupt("pending postings", e))
            })?;
            run.finish_entry()?;
        }
        let span = run.append(&self.path, self.offset)?;
        Ok(WrittenRun { run: self.run, span, lists, anchors: grouped.anchors(), postings: grouped.len() })
    }
}

/// Appends one session's list of postings (in turn order) to an anchor's run value, through
/// `chunk`, a builder the caller reuses from list to list (a bulk fold writes 50k lists).
pub(crate) fn push_list(
    value: &mut Vec<u8>,
    chunk: &mut ChunkBuilder,
    session: u32,
    list: &[Posting],
) -> Result<(), CorruptChunk> {
    let pieces = list.chunks(CHUNK_CAPACITY as usize);
    codec::write_varint(value, session);
    codec::write_varint(value, pieces.len() as u32);
    for piece in pieces {
        chunk.clear();
        for posting in piece {
            chunk.push(posting)?;
        }
        codec::write_varint(value, chunk.encoded_len() as u32);
        chunk.finish_into(value);
    }
    Ok(())
}

/// One session's list in one run's value of an anchor.
struct Piece<'v> {
    session: u32,
    /// Which run, in the order they were written.
    run: usize,
    /// The framed chunks: `(varint chunk_len | chunk)*`.
    chunks: &'v [u8],
}

/// Adds the pieces of a run's value to `out`.
fn read_pieces<'v>(value: &'v [u8], run: usize, out: &mut Vec<Piece<'v>>) -> Result<(), CorruptChunk> {
    let mut reader = Reader::new(value);
    while !reader.is_done() {
        let session = reader.varint()?;
        let count = reader.varint()?;
        let start = reader.offset();
        for _ in 0..count {
            let len = reader.varint()?;
            reader.take(len as usize)?;
        }
        let end = reader.offset();
        out.push(Piece { session, run, chunks: &value[start..end] });
    }
    Ok(())
}

/// The chunks of a piece, checked by [`read_pieces`] to be framed right.
fn chunks_of<'v>(piece: &Piece<'v>) -> impl Iterator<Item = &'v [u8]> {
    let mut reader = Reader::new(piece.chunks);
    std::iter::from_fn(move || {
        let len = reader.varint().ok()?;
        reader.take(len as usize).ok()
    })
}

/// One run's entries, the current one held.
pub(crate) enum RunCursor<'r> {
    /// A run in the run file.
    File(RunReader),
    /// A run in the `posting_runs` table, where ctxgate wrote them before the run file.
    Table(Box<TableRun<'r>>),
}

/// A run of the `posting_runs` table: its range of entries, the current one held.
pub(crate) struct TableRun<'r> {
    entries: Range<'r, u128, &'static [u8]>,
    current: Option<AccessGuard<'r, &'static [u8]>>,
}

impl<'r> RunCursor<'r> {
    /// The runs of the `posting_runs` table, in the order they were written, found by seeking
    /// past each one.
    pub fn table_runs(runs: &'r impl ReadableTable<u128, &'static [u8]>) -> Result<Vec<Self>, Error> {
        let mut cursors = Vec::new();
        let mut from = 0u128;
        while let Some(entry) = runs.range(from..)?.next() {
            let (run, _) = split_run_key(entry?.0.value());
            let range = run_key(run, 0)..=run_key(run, u64::MAX);
            cursors.push(RunCursor::Table(Box::new(TableRun { entries: runs.range(range)?, current: None })));
            match run.checked_add(1) {
                Some(next) => from = run_key(next, 0),
                None => break,
            }
        }
        Ok(cursors)
    }

    /// Moves to the next anchor of the run and returns its hash.
    fn advance(&mut self) -> Result<Option<u64>, Error> {
        match self {
            RunCursor::File(reader) => reader.advance(),
            RunCursor::Table(run) => {
                run.current = None;
                let Some(entry) = run.entries.next() else { return Ok(None) };
                let (key, value) = entry?;
                run.current = Some(value);
                Ok(Some(split_run_key(key.value()).1))
            }
        }
    }

    /// The current anchor's value.
    fn value(&self) -> Option<&[u8]> {
        match self {
            RunCursor::File(reader) => Some(reader.value()),
            RunCursor::Table(run) => run.current.as_ref().map(|guard| guard.value()),
        }
    }
}

/// The runs read side by side, one anchor at a time in hash order (a k-way merge).
struct RunMerge<'r> {
    cursors: Vec<RunCursor<'r>>,
    /// The runs' next anchors: smallest first, among equal ones the earlier run.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    /// The runs that hold the current anchor.
    holding: Vec<usize>,
}

impl<'r> RunMerge<'r> {
    /// Merges `cursors`, given in the order their runs were written.
    fn open(mut cursors: Vec<RunCursor<'r>>) -> Result<Self, Error> {
        let mut heap = BinaryHeap::with_capacity(cursors.len());
        for (i, cursor) in cursors.iter_mut().enumerate() {
            if let Some(hash) = cursor.advance()? {
                heap.push(Reverse((hash, i)));
            }
        }
        Ok(RunMerge { holding: Vec::with_capacity(cursors.len()), cursors, heap })
    }

    /// Moves to the next anchor any run holds and returns its hash.
    fn advance(&mut self) -> Result<Option<u64>, Error> {
        for &i in &self.holding {
            if let Some(next) = self.cursors[i].advance()? {
                self.heap.push(Reverse((next, i)));
            }
        }
        self.holding.clear();
        let Some(&Reverse((hash, _))) = self.heap.peek() else { return Ok(None) };
        while let Some(Reverse((_, i))) = self.heap.peek().filter(|Reverse((h, _))| *h == hash).copied() {
            self.heap.pop();
            self.holding.push(i);
        }
        Ok(Some(hash))
    }

    /// The current anchor's pieces, each session's in the order of their runs: its turns in
    /// order.
    fn pieces(&self, hash: u64) -> Result<Vec<Piece<'_>>, Error> {
        let mut pieces = Vec::new();
        for &i in &self.holding {
            if let Some(value) = self.cursors[i].value() {
                read_pieces(value, i, &mut pieces)
                    .map_err(|e| corrupt(format!("run {i} of anchor {hash:x}"), e))?;
            }
        }
        pieces.sort_unstable_by_key(|p| (p.session, p.run));
        Ok(pieces)
    }
}

/// Lists read from the runs for [`store_lists`], their chunks copied out: a stretch of
/// anchors, sent from the reading thread to the writing one.
#[derive(Debug, Default)]
pub(crate) struct Lists {
    /// `(anchor, session, chunks)` of each list, in key order.
    lists: Vec<(u64, u32, u32)>,
    /// Where each chunk ends in `bytes`.
    ends: Vec<usize>,
    bytes: Vec<u8>,
}

/// Bytes of chunks a [`Lists`] collects before it is handed on (in tests, few: lists then
/// cross many stretches).
const LISTS_BYTES: usize = if cfg!(test) { 256 } else { 1 << 20 };

/// Appends the postings of the runs recorded in `spans` of the run `file` (after those of the
/// `posting_runs` table of `legacy`, when given) to `postings`, and returns what it did. The
/// caller forgets the runs in the same transaction.
///
/// A second thread reads the runs while this one stores the lists (reading them was the
/// larger half of the work).
pub(crate) fn merge_into(
    postings: &mut PostingsTable<'_>,
    legacy: Option<redb::ReadTransaction>,
    spans: Vec<(u32, RunSpan)>,
    file: &std::path::Path,
) -> Result<Merged, Error> {
    let (read, stored) = std::thread::scope(|scope| {
        let (sender, receiver) = std::sync::mpsc::sync_channel(4);
        let reader = scope.spawn(move || {
            let table = legacy.map(|read| read.open_table(RUNS)).transpose()?;
            // The table's runs are older than the file's: a build that writes the file merges
            // the table's when it opens the index, before it imports anything.
            let mut cursors = match &table {
                Some(table) => RunCursor::table_runs(table)?,
                None => Vec::new(),
            };
            let side_by_side = spans.len();
            for (run, span) in spans {
                cursors.push(RunCursor::File(RunReader::open(file, run, span, side_by_side)?));
            }
            read_lists(cursors, |lists| sender.send(lists).is_ok())
        });
        let stored = store_lists(postings, receiver.iter());
        drop(receiver); // a reader still sending stops
        // A panic while reading goes on where it would have on this thread.
        (reader.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), stored)
    });
    let (runs, (lists, chunks)) = (read?, stored?);
    Ok(Merged { runs, lists, chunks })
}

/// Reads every run side by side (`runs` in the order they were written), in anchor order and
/// each session's pieces in the order of their runs, and hands the lists on a stretch at a
/// time. `hand_on` returns false when the receiving side has stopped. Returns the number of
/// runs.
pub(crate) fn read_lists(
    runs: Vec<RunCursor<'_>>,
    mut hand_on: impl FnMut(Lists) -> bool,
) -> Result<u32, Error> {
    let mut merge = RunMerge::open(runs)?;
    let mut out = Lists::default();
    while let Some(hash) = merge.advance()? {
        let pieces = merge.pieces(hash)?;
        for list in pieces.chunk_by(|a, b| a.session == b.session) {
            let mut chunks = 0u32;
            for chunk in list.iter().flat_map(chunks_of) {
                out.bytes.extend_from_slice(chunk);
                out.ends.push(out.bytes.len());
                chunks += 1;
            }
            out.lists.push((hash, list[0].session, chunks));
        }
        if out.bytes.len() >= LISTS_BYTES && !hand_on(std::mem::take(&mut out)) {
            return Ok(merge.cursors.len() as u32);
        }
    }
    if !out.lists.is_empty() {
        hand_on(out);
    }
    Ok(merge.cursors.len() as u32)
}

/// Appends the lists to `postings`, each after its stored postings, anchor by anchor through
/// [`AnchorWriter`]. Returns `(lists, rows)` stored.
pub(crate) fn store_lists(
    postings: &mut PostingsTable<'_>,
    stretches: impl IntoIterator<Item = Lists>,
) -> Result<(u64, u64), Error> {
    let (mut lists, mut rows) = (0u64, 0u64);
    let mut writer: Option<AnchorWriter> = None;
    let mut decoded = Vec::new();
    for stretch in stretches {
        let mut ends = stretch.ends.iter();
        let mut start = 0;
        for &(hash, session, count) in &stretch.lists {
            let writer = match &mut writer {
                Some(w) if w.hash() == hash => w,
                _ => {
                    if let Some(mut done) = writer.take() {
                        done.finish(postings)?;
                        rows += done.rows();
                    }
                    writer.insert(AnchorWriter::new(hash))
                }
            };
            decoded.clear();
            for &end in ends.by_ref().take(count as usize) {
                let chunk =
                    stretch.bytes.get(start..end).ok_or_else(|| corrupt("merged lists", "bad bounds"))?;
                codec::decode(chunk, |p| decoded.push(p))
                    .map_err(|e| corrupt(format!("run chunk of {hash:x}/{session}"), e))?;
                start = end;
            }
            writer.append(postings, session, decoded.iter().copied())?;
            lists += 1;
        }
    }
    if let Some(mut done) = writer {
        done.finish(postings)?;
        rows += done.rows();
    }
    Ok((lists, rows))
}

#[cfg(test)]
mod tests {
    /// These tests write through the store, whose error this module's turns into.
    type Error = crate::store::Error;
    use super::super::grouped::{Grouped, NewBlock};
    use super::super::{keys::block_key, run_file};
    use super::*;
    use crate::store::records::{ForwardRecord, GateRecord, TurnRecord};
    use crate::store::tables::RUN_FILES;
    use crate::store::{FoldTarget, IndexLock, PendingRow, Store, StoreOptions, View, WriteSource};
    use redb::ReadableTableMetadata;
    use std::collections::BTreeSet;
    use std::time::Duration;

    type Turn = (u32, u32, Vec<u64>);
    /// An anchor, its document frequency and its postings with their sessions.
    type AnchorList = (u64, u64, Vec<(u32, Posting)>);

    fn temp_store(dir: &tempfile::TempDir) -> Result<Store, Error> {
        let options = StoreOptions {
            cache_bytes: 1 << 20,
            busy_timeout: std::time::Duration::from_secs(1),
            quick_repair: false,
        };
        Store::open(&dir.path().join("index.redb"), &options)
    }

    /// A turn's anchors: one in every turn (lists longer than a chunk), a few that recur, one
    /// per session and one per stretch of turns. Sorted, without repeats.
    fn anchors(session: u32, turn: u32) -> Vec<u64> {
        let set: BTreeSet<u64> =
            [1, 10 + u64::from(turn % 7), 100 + u64::from(session), 1000 + u64::from(turn / 50)].into();
        set.into_iter().collect()
    }

    /// Adds `turns` (each session's in turn order) to be folded; returns their postings grouped
    /// and their block table.
    fn put_to_fold(
        view: &mut View<WriteSource<'_>>,
        turns: &[Turn],
    ) -> Result<(Grouped, Vec<NewBlock>), Error> {
        let gate = GateRecord { switch: false, overlap: 0.0, new_ratio: 0.0, deictic: None };
        let record = TurnRecord {
            user: "u".into(),
            assistant: "a".into(),
            gate,
            segment_start: 0,
            time: None,
            tools: vec![],
        };
        for (session, turn, hashes) in turns {
            let entries = hashes.iter().map(|&h| (h, 1, 0)).collect();
            let forward = ForwardRecord { len_user: hashes.len() as u32, len_assistant: 0, entries };
            view.put_turn(*session, *turn, &record, None, forward, PendingRow::FoldInTransaction)?;
        }
        let mut ordered: Vec<&Turn> = turns.iter().collect();
        ordered.sort_by_key(|(session, turn, _)| block_key(*session, *turn));
        let blocks: Vec<NewBlock> = (ordered.iter())
            .map(|(s, t, h)| NewBlock { key: block_key(*s, *t), len_user: h.len() as u32, len_assistant: 0 })
            .collect();
        let entries: Vec<Vec<(u64, u32, u32)>> =
            ordered.iter().map(|(_, _, h)| h.iter().map(|&x| (x, 1, 0)).collect()).collect();
        let slices: Vec<&[(u64, u32, u32)]> = entries.iter().map(|e| &e[..]).collect();
        Ok((Grouped::by_anchor(&slices), blocks))
    }

    /// Writes `turns` (each session's in turn order) in one transaction, folding their
    /// postings into the lists or into a run.
    fn write_batch(store: &Store, turns: &[Turn], into_run: bool) -> Result<(), Error> {
        store.write(|view| {
            if !into_run {
                view.fold()?; // as the importer does: turns added one at a time go first
            }
            let (grouped, blocks) = put_to_fold(view, turns)?;
            if into_run {
                let run = view.next_run()?.write(&grouped, &blocks)?;
                view.fold_grouped(&grouped, &blocks, FoldTarget::Run(run))
            } else {
                view.fold_grouped(&grouped, &blocks, FoldTarget::Postings)
            }
        })
    }

    /// Every anchor's postings as readers see them, with its document frequency.
    fn lists(store: &Store) -> Result<Vec<AnchorList>, Error> {
        let view = store.read()?;
        let mut hashes = BTreeSet::new();
        view.for_each_term(|hash, _| {
            hashes.insert(hash);
        })?;
        let mut out = Vec::new();
        for hash in hashes {
            let mut list = Vec::new();
            view.anchor_postings(hash, |session, posting| list.push((session, posting)))?;
            out.push((hash, view.df(hash)?, list));
        }
        Ok(out)
    }

    fn runs_left(store: &Store) -> Result<u64, Error> {
        store.write(|view| Ok(view.tables.runs.len()?))
    }

    /// Sessions 0 and 3 have turns in the lists before the import; the import then adds 300
    /// turns to each of sessions 0, 1 and 2, interleaved, in batches of 200. The new lists of
    /// an anchor go after stored chunks of session 0 and before those of session 3.
    fn history() -> (Vec<Turn>, Vec<Vec<Turn>>) {
        let before = [0, 3].into_iter().flat_map(|s| (0..50).map(move |t| (s, t, anchors(s, t)))).collect();
        let imported: Vec<Turn> = (0..300)
            .flat_map(|i| {
                (0..3).map(
                    move |s| if s == 0 { (0, 50 + i, anchors(0, 50 + i)) } else { (s, i, anchors(s, i)) },
                )
            })
            .collect();
        (before, imported.chunks(200).map(<[Turn]>::to_vec).collect())
    }

    /// Two indexes given the same turns: `before` folded into both, then `batches` folded into
    /// the lists of the first (`folded`) and written as runs to the second (`runs`).
    struct FoldedAndRuns {
        dir_folded: tempfile::TempDir,
        folded: Store,
        dir_runs: tempfile::TempDir,
        runs: Store,
    }

    fn folded_and_runs(before: &[Turn], batches: &[Vec<Turn>]) -> Result<FoldedAndRuns, Error> {
        let tmp = |e: std::io::Error| Error::Io { path: "tempdir".into(), source: e };
        let (dir_folded, dir_runs) = (tempfile::tempdir().map_err(tmp)?, tempfile::tempdir().map_err(tmp)?);
        let (folded, runs) = (temp_store(&dir_folded)?, temp_store(&dir_runs)?);
        write_batch(&folded, before, false)?;
        write_batch(&runs, before, false)?;
        for batch in batches {
            write_batch(&folded, batch, false)?;
            write_batch(&runs, batch, true)?;
        }
        Ok(FoldedAndRuns { dir_folded, folded, dir_runs, runs })
    }

    #[test]
    fn runs_merged_give_the_lists_a_fold_of_each_batch_gives() -> Result<(), Box<dyn std::error::Error>> {
        let (before, batches) = history();
        let FoldedAndRuns { dir_runs, folded, runs, .. } = folded_and_runs(&before, &batches)?;
        // Before the merge, statistics are complete and the runs hold the postings.
        assert_eq!(runs.read()?.corpus_stats(), folded.read()?.corpus_stats());
        assert!(runs_left(&runs)? > 0);
        let file = run_file::path_of(&dir_runs.path().join("index.redb"));
        assert!(file.exists());
        let merged = runs.merge_runs()?;
        assert_eq!(merged.runs, batches.len() as u32);
        assert_eq!(runs_left(&runs)?, 0);
        // Removed once no import holds the index lock.
        let import = IndexLock::shared(runs.path(), Duration::ZERO)?;
        runs.remove_unused_run_file()?;
        assert!(file.exists(), "an import still running may append to it");
        drop(import);
        runs.remove_unused_run_file()?;
        assert!(!file.exists(), "no import left to use it");
        let expected = lists(&folded)?;
        assert_eq!(lists(&runs)?, expected);
        assert!(expected.iter().any(|(_, _, list)| list.len() > 300), "a list longer than a chunk");
        // Rows keyed by their first posting (decode_row checks it), none over capacity, and
        // rows that span sessions.
        let mut spanning = 0;
        runs.read()?.for_each_row(|hash, key, bytes| {
            let mut sessions = BTreeSet::new();
            assert!(
                codec::decode_row(hash, key, bytes, |s, _| {
                    sessions.insert(s);
                })
                .is_ok()
            );
            assert!(codec::row_len(hash, key, bytes).is_ok_and(|n| n <= codec::ROW_CAPACITY as u64));
            spanning += usize::from(sessions.len() > 1);
            true
        })?;
        assert!(spanning > 0, "rows hold several sessions' postings");
        Ok(())
    }

    #[test]
    fn runs_left_by_a_killed_import_are_merged_when_the_index_opens() -> Result<(), Box<dyn std::error::Error>>
    {
        let (before, batches) = history();
        let FoldedAndRuns { dir_folded: _dir_folded, folded, dir_runs, runs } =
            folded_and_runs(&before, &batches[..2])?;
        drop(runs); // closed without a merge, as a killed import leaves it
        {
            // While the import that wrote them may be alive (it holds the lock shared), an
            // open leaves them to it.
            let import = IndexLock::shared(&dir_runs.path().join("index.redb"), Duration::ZERO)?;
            let opened = temp_store(&dir_runs)?;
            assert_eq!(runs_left(&opened)?, 2);
            drop(import);
        }
        let reopened = temp_store(&dir_runs)?;
        assert_eq!(runs_left(&reopened)?, 0);
        assert!(!run_file::path_of(&dir_runs.path().join("index.redb")).exists());
        assert_eq!(lists(&reopened)?, lists(&folded)?);
        // And the lists go on from there.
        write_batch(&folded, &batches[2], false)?;
        write_batch(&reopened, &batches[2], false)?;
        assert_eq!(lists(&reopened)?, lists(&folded)?);
        Ok(())
    }

    #[test]
    fn a_batch_that_merges_then_fails_leaves_the_committed_runs_readable()
    -> Result<(), Box<dyn std::error::Error>> {
        let (before, batches) = history();
        let FoldedAndRuns { dir_folded: _dir_folded, folded, dir_runs: _dir_runs, runs } =
            folded_and_runs(&before, &batches[..2])?;
        // As the importer does every few batches: the next run is placed (after the recorded
        // ones), the waiting runs merged, the run written; then the batch fails, uncommitted.
        let failed = runs.write(|view| -> Result<(), Error> {
            let next = view.next_run()?;
            view.merge_runs()?;
            let (grouped, blocks) = put_to_fold(view, &batches[2])?;
            let run = next.write(&grouped, &blocks)?;
            view.fold_grouped(&grouped, &blocks, FoldTarget::Run(run))?;
            Err(Error::bug("the batch fails before its commit"))
        });
        assert!(failed.is_err());
        assert_eq!(runs_left(&runs)?, 2, "the committed index still records the two runs");
        runs.merge_runs()?;
        assert_eq!(lists(&runs)?, lists(&folded)?, "their bytes are still in the file");
        Ok(())
    }

    #[test]
    fn a_write_to_the_lists_merges_waiting_runs_first() -> Result<(), Box<dyn std::error::Error>> {
        let (before, batches) = history();
        let FoldedAndRuns { dir_folded: _dir_folded, folded, dir_runs: _dir_runs, runs } =
            folded_and_runs(&before, &batches[..2])?;
        // Into the lists, batch 2 must go after the postings of batches 0 and 1 in the runs.
        write_batch(&folded, &batches[2], false)?;
        write_batch(&runs, &batches[2], false)?;
        assert_eq!(runs_left(&runs)?, 0);
        assert_eq!(lists(&runs)?, lists(&folded)?);
        // Removing a session after writing runs: merged first, its postings go with the rest.
        let more: Vec<Turn> = (350..400).map(|t| (1, t, anchors(1, t))).collect();
        write_batch(&runs, &more, true)?;
        runs.write(|view| view.remove_sessions(&[1], |_| (0, 0)))?;
        assert_eq!(runs_left(&runs)?, 0);
        runs.read()?.for_each_row(|hash, key, bytes| {
            assert!(codec::decode_row(hash, key, bytes, |session, _| assert_ne!(session, 1)).is_ok());
            true
        })?;
        Ok(())
    }

    #[test]
    fn turns_added_while_runs_wait_stay_pending_beside_the_next_run() -> Result<(), Box<dyn std::error::Error>>
    {
        let (before, batches) = history();
        let FoldedAndRuns { dir_folded: _dir_folded, folded, dir_runs: _dir_runs, runs } =
            folded_and_runs(&before, &batches[..1])?;
        // Another writer adds turns to session 3 (logged, pending) while the import runs.
        let added: Vec<Turn> = (50..60).map(|t| (3, t, anchors(3, t))).collect();
        for store in [&folded, &runs] {
            store.write(|view| -> Result<(), Error> {
                for (session, turn, hashes) in &added {
                    let entries = hashes.iter().map(|&h| (h, 1, 0)).collect();
                    let forward = ForwardRecord { len_user: hashes.len() as u32, len_assistant: 0, entries };
                    let record = TurnRecord {
                        user: "u".into(),
                        assistant: "a".into(),
                        gate: GateRecord { switch: false, overlap: 0.0, new_ratio: 0.0, deictic: None },
                        segment_start: 0,
                        time: None,
                        tools: vec![],
                    };
                    view.put_turn(*session, *turn, &record, None, forward, PendingRow::Logged)?;
                }
                view.fold_if_due()
            })?;
        }
        assert_eq!(runs.read()?.pending().len(), added.len(), "runs wait: no fold");
        // The import's next batch goes to a run; the added turns stay pending, and recall sees
        // the same frequencies and N as in the index that folded everything.
        write_batch(&runs, &batches[1], true)?;
        write_batch(&folded, &batches[1], false)?;
        assert_eq!(runs.read()?.pending().len(), added.len());
        assert_eq!(runs.read()?.corpus_stats(), folded.read()?.corpus_stats());
        runs.merge_runs()?;
        runs.write(|view| view.fold())?;
        folded.write(|view| view.fold())?;
        assert_eq!(lists(&runs)?, lists(&folded)?);
        Ok(())
    }

    #[test]
    fn runs_an_older_ctxgate_left_in_the_table_are_merged_when_the_index_opens()
    -> Result<(), Box<dyn std::error::Error>> {
        let (before, batches) = history();
        let FoldedAndRuns { dir_folded: _dir_folded, folded, dir_runs, runs } =
            folded_and_runs(&before, &batches)?;
        {
            // Moved from the file to `posting_runs`, keyed as such a build wrote them.
            let file = run_file::path_of(&dir_runs.path().join("index.redb"));
            let txn = runs.db.begin_write(&runs.path, runs.busy_timeout)?;
            {
                let spans: Vec<(u32, run_file::RunSpan)> = (txn.open_table(RUN_FILES)?.iter()?)
                    .map(|e| e.map(|(run, span)| (run.value(), run_file::RunSpan::from_row(span.value()))))
                    .collect::<Result<_, _>>()?;
                let mut table = txn.open_table(RUNS)?;
                for (run, span) in spans {
                    let mut reader = RunReader::open(&file, run, span, 1)?;
                    while let Some(hash) = reader.advance()? {
                        table.insert(run_key(run, hash), reader.value())?;
                    }
                }
            }
            txn.delete_table(RUN_FILES)?;
            txn.commit()?;
            std::fs::remove_file(&file)?;
        }
        drop(runs);
        let reopened = temp_store(&dir_runs)?;
        assert_eq!(lists(&reopened)?, lists(&folded)?);
        let read = reopened.db.begin_read()?;
        assert!(!crate::store::has_rows(&read, RUNS)?, "the table's runs are gone");
        Ok(())
    }

    #[test]
    fn a_run_file_no_run_refers_to_is_removed_when_the_index_opens() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        drop(temp_store(&dir)?);
        // What a first batch that failed before its commit leaves.
        let file = run_file::path_of(&dir.path().join("index.redb"));
        std::fs::write(&file, b"bytes of a run never recorded")?;
        drop(temp_store(&dir)?);
        assert!(!file.exists());
        Ok(())
    }

    #[test]
    fn a_merge_that_meets_a_damaged_run_changes_nothing() -> Result<(), Box<dyn std::error::Error>> {
        let (before, batches) = history();
        let dir = tempfile::tempdir()?;
        let store = temp_store(&dir)?;
        write_batch(&store, &before, false)?;
        for batch in &batches {
            write_batch(&store, batch, true)?;
        }
        let lists_before = lists(&store)?;
        let runs_before = runs_left(&store)?;
        // A byte of the last anchor of the last run: the reader fails after handing lists on.
        let file = run_file::path_of(&dir.path().join("index.redb"));
        let mut bytes = std::fs::read(&file)?;
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        std::fs::write(&file, &bytes)?;
        let err = store.merge_runs().unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        assert_eq!(lists(&store)?, lists_before);
        assert_eq!(runs_left(&store)?, runs_before);
        assert!(file.exists(), "the runs stay for another try");
        // Without its file, the runs are refused, and the index does not open: the error
        // names the file and what to do.
        std::fs::remove_file(&file)?;
        assert!(store.merge_runs().is_err());
        drop(store);
        let err = temp_store(&dir).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("index.redb.runs is missing") && err.contains("put it back"), "{err}");
        Ok(())
    }

    #[test]
    fn a_run_is_recorded_only_as_taken_and_for_what_it_was_written() -> Result<(), Box<dyn std::error::Error>>
    {
        let (before, batches) = history();
        let dir = tempfile::tempdir()?;
        let store = temp_store(&dir)?;
        write_batch(&store, &before, false)?;
        write_batch(&store, &batches[0], true)?;
        let runs_before = runs_left(&store)?;
        // A run written from postings other than the fold's is refused, and so is taking a
        // second run in one transaction; either leaves the index as it was.
        let other: Vec<&[(u64, u32, u32)]> = vec![&[(1, 1, 0)]];
        let other_blocks = [NewBlock { key: block_key(9, 0), len_user: 1, len_assistant: 0 }];
        let err = store
            .write(|view| -> Result<(), Error> {
                let (grouped, blocks) = put_to_fold(view, &batches[1])?;
                let run = view.next_run()?.write(&Grouped::by_anchor(&other), &other_blocks)?;
                view.fold_grouped(&grouped, &blocks, FoldTarget::Run(run))
            })
            .unwrap_err();
        assert!(err.to_string().contains("other postings"), "{err}");
        assert_eq!(err.kind(), crate::ErrorKind::Internal, "a caller's bug, not a damaged file: {err}");
        let err = store.write(|view| view.next_run().and_then(|_| view.next_run())).unwrap_err();
        assert!(err.to_string().contains("second run"), "{err}");
        assert_eq!(err.kind(), crate::ErrorKind::Internal, "{err}");
        assert_eq!(runs_left(&store)?, runs_before);
        // What the refused write left in the file after the recorded run is not read.
        store.merge_runs()?;
        let folded = tempfile::tempdir()?;
        let reference = temp_store(&folded)?;
        write_batch(&reference, &before, false)?;
        write_batch(&reference, &batches[0], false)?;
        assert_eq!(lists(&store)?, lists(&reference)?);
        Ok(())
    }

    #[test]
    fn a_run_value_holds_each_sessions_list_as_chunks() -> Result<(), Box<dyn std::error::Error>> {
        let list: Vec<Posting> = (0..300)
            .map(|turn| Posting {
                turn: turn * 2,
                tf_user: 1,
                tf_assistant: 0,
                len_user: 4,
                len_assistant: 0,
            })
            .collect();
        let mut value = Vec::new();
        let mut chunk = ChunkBuilder::new();
        push_list(&mut value, &mut chunk, 7, &list)?;
        push_list(&mut value, &mut chunk, 9, &list[..3])?;
        let mut pieces = Vec::new();
        read_pieces(&value, 4, &mut pieces)?;
        let sessions: Vec<(u32, usize)> = pieces.iter().map(|p| (p.session, p.run)).collect();
        assert_eq!(sessions, [(7, 4), (9, 4)]);
        let chunks: Vec<Vec<u8>> = chunks_of(&pieces[0]).map(<[u8]>::to_vec).collect();
        assert_eq!(chunks, codec::encode_list(list.iter())?);
        assert_eq!(chunks_of(&pieces[1]).count(), 1);
        // A value cut short is corrupt, not a panic.
        for end in 0..value.len() {
            let mut cut = Vec::new();
            let read = read_pieces(&value[..end], 0, &mut cut);
            assert!(read.is_err() || cut.len() < 2, "cut at {end}");
        }
        Ok(())
    }
}
