//! Writing imported turns: batches of [`BATCH_TURNS`] turns, one transaction each.
//!
//! The next batch is read and prepared (anchor extraction on the rayon pool, then the grouping
//! of its postings by anchor) on a scoped thread while the calling thread writes the current
//! one (gate, store, fold, commit). Under `rayon::join` the writer took one of the pool's
//! workers, leaving the extraction one; now the pool keeps both and the OS shares the cores
//! among the three threads. A file longer than a batch writes each batch's postings as a run
//! (encoded, written and synced by a fourth thread while the turns are gated and stored) and
//! merges the runs into the lists every [`MERGE_TURNS`] turns and at its end.
//!
//! Grouping a batch also counts, for each anchor of each turn, the turns of the batch before it
//! that have it: the part of the gate's document frequencies the write view would otherwise
//! count turn by turn, with a hash map update per posting.

use super::turn::{self, Postings, PreparedTurn};
use crate::import::turns::ParsedTurn;
use crate::index::Index;
use crate::postings::grouped::{Grouped, NewBlock, NewPosting};
use crate::store::records::{SessionRecord, ToolRecord};
use crate::store::turn_text::{self, TextDictionary};
use crate::store::{FOLD_BATCH, FoldTarget, View, WriteSource, block_key};
use rayon::prelude::*;
use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Turns written per transaction. A crash loses at most the batch being written; importing the
/// file again resumes after the turns already in the index.
///
/// Measured importing 1M generated turns when each batch folded into the posting lists: 8,192
/// turns a batch took 67–78 s at 241–246 MiB peak RSS, 16,384 took 52–53 s at 256–280 MiB,
/// 32,768 took 51 s at 532 MiB. Batches of a longer file now go to runs (`store::runs`), and
/// the memory budget (`ImportOptions::memory_bytes`) ends most batches before this many turns.
pub const BATCH_TURNS: usize = 16_384;

/// Turns an import lets wait in runs before it merges them into the lists, inside the
/// transaction of its next batch. Until then readers see the runs' turns but do not recall
/// them (recall reads the lists): recall lags at most this many turns behind the import. Each
/// merge rewrites the pages of the whole postings table, so merging often is folding each
/// batch into the lists, what runs were made to avoid. Measured importing 1M generated turns in
/// batches of 16,384 (62 runs): a merge every 8 runs took 19.4 s against 17.7 s with one merge
/// at the end (+9%), and the file grew 4%; every 4 runs at 200k turns, +15% and twice the
/// file. Counted in turns, not runs, since the memory budget sizes the batches: at 100k turns,
/// a merge every 8 batches of ~10,000 turns left 548 bytes a turn on disk against 345.
pub const MERGE_TURNS: usize = 8 * BATCH_TURNS;

/// Memory an import holds in turns on their way to the index, unless told otherwise: the
/// batch being written and the one being prepared beside it, with the page cache of the index
/// (`Options::cache_bytes`) on top (README "Import memory").
pub const DEFAULT_IMPORT_MEMORY: usize = 128 << 20;

/// A batch of turns, each with the index of its session in [`Writer::sessions`].
pub type Batch = Vec<(usize, ParsedTurn)>;

/// Sizes an import's batches to its memory budget: a batch ends at [`BATCH_TURNS`] turns or
/// when its turns, once prepared, would hold half the budget (two are in memory at once).
///
/// What a turn holds once prepared (its anchors, postings and gate filter beside its text)
/// grows with its text by a factor that depends on the language and on the log: each prepared
/// batch measures it (its bytes on the heap over its turns' bytes as read), and the next batch
/// is sized by the largest factor measured so far (batches of one log differ by a fifth). The
/// first batch is sized by [`FIRST_GROWTH`], then, when more turns follow it, measured on a
/// copy of its first turns ([`Sizer::probe`]) and filled to what that allows.
pub(super) struct Sizer {
    /// Bytes a prepared batch may hold.
    batch_bytes: usize,
    /// The largest number of prepared bytes per byte read a batch measured, in 1/1024ths; 0
    /// before the first.
    growth: AtomicUsize,
    /// What [`Sizer::probe`] measured, in 1/1024ths; 0 if it did not run. Used until a batch
    /// is measured: a probe's few turns hold more per byte than a batch's (the batch's anchors
    /// are shared among more turns, and its text is compressed with a dictionary).
    guess: AtomicUsize,
    /// The most turns a batch takes: [`BATCH_TURNS`], or fewer for an import with a time limit
    /// ([`Writer::with_until`]).
    max_turns: AtomicUsize,
}

/// Turns of the first batch of an import with a time limit, before its speed is measured: a
/// few hundred milliseconds of a debug build's import.
const FIRST_TIMED_BATCH: usize = 256;

/// The share of the time left that a batch of an import with a time limit is sized to take:
/// the next batch is prepared while one is written, so it is sized a batch ahead.
const TIMED_BATCH_SHARE: f64 = 0.5;

/// Prepared bytes per byte read that the first batch is sized by, before any is measured: above
/// what batches measured (4.4–9.3 on English chats and generated logs, 15–16 on Chinese ones,
/// whose every character is an anchor), so the first batch stays inside the budget too.
const FIRST_GROWTH: usize = 24 << 10;

/// Bytes as read of the turns [`Sizer::probe`] prepares to measure the first batch's growth:
/// ~10 ms of extraction, once an import.
const PROBE_BYTES: usize = 1 << 20;

impl Sizer {
    /// A sizer for `budget` bytes of turns in flight.
    pub(super) fn new(budget: usize) -> Self {
        Sizer {
            batch_bytes: budget / 2,
            growth: AtomicUsize::new(0),
            guess: AtomicUsize::new(0),
            max_turns: AtomicUsize::new(BATCH_TURNS),
        }
    }

    /// Batches from now on take at most `turns` turns (at least one, at most [`BATCH_TURNS`]).
    fn cap(&self, turns: usize) {
        self.max_turns.store(turns.clamp(1, BATCH_TURNS), Ordering::Relaxed);
    }

    /// The next batch of `turns`, with its bytes as read; `None` at their end.
    fn next_batch<I>(
        &self,
        turns: &mut std::iter::Peekable<I>,
    ) -> Option<Result<(Batch, usize), crate::Error>>
    where
        I: Iterator<Item = Result<(usize, ParsedTurn), crate::Error>>,
    {
        let (mut batch, mut read) = (Vec::new(), 0);
        match self.fill(&mut batch, &mut read, turns) {
            Ok(()) => (!batch.is_empty()).then_some(Ok((batch, read))),
            Err(e) => Some(Err(e)),
        }
    }

    /// Adds turns to `batch`, of `read` bytes as read, while the budget allows.
    fn fill<I>(
        &self,
        batch: &mut Batch,
        read: &mut usize,
        turns: &mut std::iter::Peekable<I>,
    ) -> Result<(), crate::Error>
    where
        I: Iterator<Item = Result<(usize, ParsedTurn), crate::Error>>,
    {
        let growth = match (self.growth.load(Ordering::Relaxed), self.guess.load(Ordering::Relaxed)) {
            (0, 0) => FIRST_GROWTH,
            (0, guess) => guess,
            (measured, _) => measured,
        };
        // The most bytes read a batch may take: at least one turn goes, whatever its size.
        let limit = ((self.batch_bytes as u128 * 1024) / growth as u128) as usize;
        let max_turns = self.max_turns.load(Ordering::Relaxed);
        while batch.len() < max_turns {
            let Some(item) = turns.next_if(|item| {
                batch.is_empty() || item.as_ref().map_or(true, |(_, t)| *read + read_bytes(t) <= limit)
            }) else {
                break;
            };
            let turn = item?;
            *read += read_bytes(&turn.1);
            batch.push(turn);
        }
        Ok(())
    }

    /// Measures the growth of the first turns of `batch`, about [`PROBE_BYTES`] of them as read,
    /// by preparing a copy of them. A batch sized by [`FIRST_GROWTH`] is then filled up to
    /// what the budget allows: a first batch of a third of its size trained the text
    /// dictionary on fewer sessions, and the turns table took 177 bytes a turn against 147.
    fn probe(&self, batch: &Batch) {
        let (mut read, mut end) = (0, 0);
        while end < batch.len() && read < PROBE_BYTES {
            read += read_bytes(&batch[end].1);
            end += 1;
        }
        let prepared = prepare(batch[..end].to_vec(), None).heap_bytes();
        self.guess.store(growth(read, prepared), Ordering::Relaxed);
    }

    /// Learns the growth of a batch of `read` bytes as read that holds `prepared` bytes.
    fn learn(&self, read: usize, prepared: usize) {
        self.growth.fetch_max(growth(read, prepared), Ordering::Relaxed);
    }
}

/// Prepared bytes per byte read, in 1/1024ths, at least 1.
fn growth(read: usize, prepared: usize) -> usize {
    let growth = (prepared as u128 * 1024).div_ceil(read.max(1) as u128);
    growth.clamp(1, usize::MAX as u128) as usize
}

/// What a turn of a batch holds as read, its slot in the batch included.
fn read_bytes(turn: &ParsedTurn) -> usize {
    size_of::<(usize, ParsedTurn)>() + turn.heap_bytes()
}

/// A session the batches write to.
pub struct Destination {
    pub name: String,
    pub title: Option<String>,
    /// The id its first new turn takes: the turns the session had when the import planned
    /// it. Another writer that adds to the session in between makes the import fail
    /// ([`crate::Error::Raced`]) instead of interleaving the two.
    pub first_turn: u32,
}

/// Writes the turns of one file.
pub struct Writer<'g> {
    index: &'g Index,
    source: String,
    path: std::path::PathBuf,
    sessions: Vec<Destination>,
    /// Each session's next turn id, as this import has written it.
    next_turns: RefCell<Vec<u32>>,
    /// The file's import checkpoint, stored with the turns of a file of one batch.
    checkpoint: RefCell<Option<(Vec<u8>, super::resume::Checkpoint)>>,
    wrote_checkpoint: std::cell::Cell<bool>,
    /// What the batches' text is compressed with: the index's text dictionary, or one trained
    /// on the first batch when the index has none (stored with the first batch written).
    dictionary: RefCell<Option<TextDictionary>>,
    sizer: Sizer,
    /// Turns this import wrote to runs that wait to be merged.
    run_turns: std::cell::Cell<usize>,
    /// No batch is begun past this instant ([`crate::ImportOptions::until`]).
    until: Option<Instant>,
    /// Whether a batch was left unwritten for [`Self::until`].
    cut_short: std::cell::Cell<bool>,
}

impl<'g> Writer<'g> {
    /// A writer for turns read from the file at `path` into `sessions`.
    pub fn new(index: &'g Index, path: &std::path::Path, sessions: Vec<Destination>) -> Self {
        let next_turns = RefCell::new(sessions.iter().map(|d| d.first_turn).collect());
        Writer {
            index,
            source: path.display().to_string(),
            path: path.to_path_buf(),
            sessions,
            next_turns,
            checkpoint: RefCell::new(None),
            wrote_checkpoint: std::cell::Cell::new(false),
            dictionary: RefCell::new(None),
            sizer: Sizer::new(DEFAULT_IMPORT_MEMORY),
            run_turns: std::cell::Cell::new(0),
            until: None,
            cut_short: std::cell::Cell::new(false),
        }
    }

    /// Begins no batch past `until`: the batches written stay, and the next import of the file
    /// goes on from them.
    pub(super) fn with_until(mut self, until: Option<Instant>) -> Self {
        self.until = until;
        self
    }

    /// Whether turns were left unwritten for the time limit ([`Self::with_until`]).
    pub(super) fn cut_short(&self) -> bool {
        self.cut_short.get()
    }

    /// The turns written into the `i`-th destination.
    pub(super) fn written(&self, i: usize) -> u64 {
        let first = self.sessions.get(i).map_or(0, |d| d.first_turn);
        u64::from(self.next_turns.borrow().get(i).map_or(first, |&next| next) - first)
    }

    /// Sizes the batches to hold at most `budget` bytes of turns in flight ([`Sizer`]).
    pub(super) fn with_memory(mut self, budget: usize) -> Self {
        self.sizer = Sizer::new(budget);
        self
    }

    /// Stores `checkpoint` (its key and value) in the transaction of the turns, when they are
    /// one batch ([`Self::wrote_checkpoint`] says whether they were).
    pub(super) fn with_checkpoint(self, checkpoint: Option<(Vec<u8>, super::resume::Checkpoint)>) -> Self {
        *self.checkpoint.borrow_mut() = checkpoint;
        self
    }

    /// Whether the checkpoint went with the turns (else the caller stores it on its own).
    pub(super) fn wrote_checkpoint(&self) -> bool {
        self.wrote_checkpoint.get()
    }

    /// Writes `turns` (each with the index of its session) in batches sized by the memory
    /// budget, preparing the next batch while the current one is written.
    ///
    /// A file of one batch folds it into the posting lists. A longer one writes each batch's
    /// postings as a run and merges the runs once at the end (`store::runs`), also when a
    /// batch fails: what was committed stays, complete.
    pub fn write_all<I>(&self, turns: I) -> Result<(), crate::Error>
    where
        I: Iterator<Item = Result<(usize, ParsedTurn), crate::Error>> + Send,
    {
        let mut turns = turns.peekable();
        if self.until.is_some() {
            self.sizer.cap(FIRST_TIMED_BATCH);
        }
        let Some((mut first, mut read)) = self.sizer.next_batch(&mut turns).transpose()? else {
            return Ok(());
        };
        if turns.peek().is_some() {
            // Sized by a first guess: measured, then filled to what the budget allows.
            self.sizer.probe(&first);
            self.sizer.fill(&mut first, &mut read, &mut turns)?;
        }
        // Before anything of a batch is kept, its text dictionary included.
        let redact = self.index.options().redact;
        redact_batch(&mut first, redact);
        let dictionary = match self.index.store().read()?.text_dictionary()? {
            Some((_, dictionary)) => Some(dictionary),
            None => train_dictionary(&first),
        };
        let first = self.sizer.prepare(first, read, dictionary.as_ref());
        *self.dictionary.borrow_mut() = dictionary;
        let into_runs = turns.peek().is_some();
        let sizer = &self.sizer;
        let batches = std::iter::from_fn(move || sizer.next_batch(&mut turns)).map(move |batch| {
            batch.map(|(mut batch, read)| {
                redact_batch(&mut batch, redact);
                (batch, read)
            })
        });
        if !into_runs {
            return self.write_batches(first, batches, false);
        }
        let store = self.index.store();
        // Held while this import's runs may wait: a process that finds them then knows they
        // are not an interrupted import's (`store::IndexLock`).
        let lock = crate::store::IndexLock::shared(store.path(), self.index.options().busy_timeout)?;
        let written = self.write_batches(first, batches, true);
        let started = Instant::now();
        let merged = store.merge_runs();
        match (&written, &merged) {
            (Err(_), Err(e)) => log::warn!("the runs of a failed import are not merged yet: {e}"),
            (_, Ok(m)) => log::debug!(
                "merged {} runs into {} posting lists ({} chunks) in {:.0} ms",
                m.runs,
                m.lists,
                m.chunks,
                started.elapsed().as_secs_f64() * 1e3
            ),
            (Ok(()), Err(_)) => {}
        }
        drop(lock);
        written?;
        merged?;
        Ok(store.remove_unused_run_file()?)
    }

    fn write_batches<I>(
        &self,
        first: PreparedBatch,
        mut batches: I,
        into_runs: bool,
    ) -> Result<(), crate::Error>
    where
        I: Iterator<Item = Result<(Batch, usize), crate::Error>> + Send,
    {
        let mut current = first;
        let dictionary = self.dictionary.borrow().clone();
        let dictionary = dictionary.as_ref();
        let sizer = &self.sizer;
        let mut one_written = false;
        loop {
            // The first batch goes whatever the time (a small one, `FIRST_TIMED_BATCH`): an
            // import whose reading took the time would otherwise never write anything.
            if one_written && self.until.is_some_and(|until| Instant::now() >= until) {
                self.cut_short.set(true);
                return Ok(());
            }
            one_written = true;
            let (batch_turns, batch_started) = (current.turns.len(), Instant::now());
            let (next, written) = std::thread::scope(|scope| {
                let next = scope
                    .spawn(|| batches.next().map(|b| b.map(|(b, read)| sizer.prepare(b, read, dictionary))));
                let written = self.write_batch(std::mem::take(&mut current), into_runs);
                // A panic while preparing goes on where rayon::join would take it.
                (next.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)), written)
            });
            let spent = written?;
            drop(spent); // both threads are done: no allocation contends with these frees
            if let Some(until) = self.until {
                // Batches sized by the speed measured, to end about when the time is up.
                let per_turn = batch_started.elapsed().as_secs_f64() / batch_turns.max(1) as f64;
                let left = until.saturating_duration_since(Instant::now()).as_secs_f64();
                sizer.cap((left * TIMED_BATCH_SHARE / per_turn.max(1e-9)) as usize);
            }
            match next {
                Some(batch) => current = batch?,
                None => return Ok(()),
            }
        }
    }

    /// Writes one batch in one transaction, its postings into the lists or as a run. Returns
    /// what its turns no longer need, for the caller to free while no other thread allocates
    /// (freed here, beside the next batch's extraction, glibc's per-arena locks made those
    /// frees a fifth of the import's time).
    fn write_batch(&self, batch: PreparedBatch, into_run: bool) -> Result<Vec<turn::Spent>, crate::Error> {
        let started = Instant::now();
        let PreparedBatch { turns: batch, mut layout } = batch;
        let turns = batch.len();
        // Where the writer's time goes: adding the turns (gate, rows), the fold, the commit.
        let (mut append_time, mut fold_time) = (Duration::ZERO, Duration::ZERO);
        let mut spent = Vec::new();
        let mut run_turns = 0;
        self.index.store().write(|view| -> Result<(), crate::Error> {
            view.note_text_written(self.index.options().redact)?;
            let runs_wait = view.runs_wait()?;
            // A few turns while another import's runs wait (a hook's, say) are stored as
            // turns added one at a time are: pending, without merging the runs first.
            let pending = !into_run && runs_wait && turns <= FOLD_BATCH;
            // Turns added one at a time and not folded yet go first, into the lists; beside a
            // run or pending turns, only while no runs wait: then they stay pending (a fold
            // into the lists would merge the runs first).
            if !runs_wait || (!into_run && !pending) {
                view.fold()?;
            }
            if let Some(dictionary) = self.dictionary.borrow().as_ref() {
                view.add_text_dictionary(dictionary)?;
            }
            let ids = self.fill_keys(view, &batch, &mut layout)?;
            // Taken before any merge: after the recorded runs in the file, whose bytes the
            // committed index still refers to until this transaction commits.
            let next_run = if into_run { Some(view.next_run()?) } else { None };
            // Pending turns of a session this batch continues would go into its lists after
            // the run's later turns: folded first (merging the runs first).
            let continued =
                (view.pending().iter()).any(|(session, _, _)| ids.binary_search(&session).is_ok());
            if into_run && runs_wait && continued {
                view.fold()?;
            } else if into_run && runs_wait && self.run_turns.get() >= MERGE_TURNS {
                view.merge_runs()?;
            }
            // None wait once merged, here or by another process.
            let waiting = if view.runs_wait()? { self.run_turns.get() } else { 0 };
            run_turns = waiting + if into_run { turns } else { 0 };
            let layout = &layout;
            let (grouped, blocks) = (&layout.grouped, &layout.blocks[..]);
            let run = std::thread::scope(|scope| -> Result<_, crate::Error> {
                // The run needs only the grouped postings and the keys: it is encoded and
                // written (and synced) on a thread of its own while the turns are added.
                let writing = next_run.map(|next| scope.spawn(move || next.write(grouped, blocks)));
                let added = self.add_turns(view, batch, layout, pending);
                let run = writing.map(|w| w.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
                spent = added?;
                Ok(run.transpose()?)
            })?;
            append_time = started.elapsed();
            if !into_run && let Some((key, checkpoint)) = self.checkpoint.borrow_mut().take() {
                super::resume::store(view, &key, checkpoint)?;
                self.wrote_checkpoint.set(true);
            }
            if pending {
                return Ok(());
            }
            let fold_started = Instant::now();
            let target = match run {
                Some(run) => FoldTarget::Run(run),
                None => FoldTarget::Postings,
            };
            view.fold_grouped(grouped, blocks, target)?;
            fold_time = fold_started.elapsed();
            Ok(())
        })?;
        self.run_turns.set(run_turns);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let total = started.elapsed();
        log::debug!(
            "wrote {turns} turns in {:.0} ms (append {:.0} ms, fold {:.0} ms, commit {:.0} ms)",
            ms(total),
            ms(append_time),
            ms(fold_time),
            ms(total.saturating_sub(append_time + fold_time))
        );
        Ok(spent)
    }
}

impl Writer<'_> {
    /// Fills in the key of each block: its session's id (the session is created if new) and
    /// the turn id its turn will take, the session's next. Returns the batch's session ids,
    /// ascending.
    fn fill_keys(
        &self,
        view: &mut View<WriteSource<'_>>,
        batch: &[(usize, PreparedTurn)],
        layout: &mut Layout,
    ) -> Result<Vec<u32>, crate::Error> {
        let mut next: HashMap<usize, (u32, u32)> = HashMap::new();
        let mut next_turns = self.next_turns.borrow_mut();
        for ((i, _), &rank) in batch.iter().zip(&layout.ranks) {
            let (id, turn) = match next.entry(*i) {
                Entry::Occupied(entry) => entry.into_mut(),
                Entry::Vacant(entry) => {
                    let session = &self.sessions[*i];
                    let (id, record) = turn::session_for_write(view, &session.name)?;
                    // Sessions shrink only by being forgotten: the forget wins over this
                    // import, which would otherwise plan again and store it anew.
                    if record.turn_count < next_turns[*i] {
                        return Err(crate::Error::Forgotten {
                            path: self.path.clone(),
                            session: session.name.clone(),
                        });
                    }
                    if record.turn_count != next_turns[*i] {
                        return Err(crate::Error::Raced {
                            path: self.path.clone(),
                            session: session.name.clone(),
                            expected: next_turns[*i],
                            found: record.turn_count,
                        });
                    }
                    entry.insert((id, record.turn_count))
                }
            };
            if let Some(block) = layout.blocks.get_mut(rank as usize) {
                block.key = block_key(*id, *turn);
            }
            // Past the last turn id, adding the turn fails.
            *turn = turn.saturating_add(1);
        }
        // A batch that fails fails the import: these are the counts once it commits.
        let mut ids = Vec::with_capacity(next.len());
        for (i, (id, turn)) in next {
            next_turns[i] = turn;
            ids.push(id);
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Gates and stores the turns of a batch, each under the key [`fill_keys`](Self::fill_keys)
    /// gave its block, folded with the batch or, if `pending`, with a `pending` row each.
    /// Returns what the turns no longer need.
    fn add_turns(
        &self,
        view: &mut View<WriteSource<'_>>,
        batch: Vec<(usize, PreparedTurn)>,
        layout: &Layout,
        pending: bool,
    ) -> Result<Vec<turn::Spent>, crate::Error> {
        let Layout { ranks, in_block_order, earlier, blocks, grouped } = layout;
        let mut spent = Vec::with_capacity(batch.len());
        let mut current: Option<(usize, u32, SessionRecord)> = None;
        let mut counted = &earlier[..];
        for (position, ((i, turn), &rank)) in (0u32..).zip(batch.into_iter().zip(ranks)) {
            if current.as_ref().is_none_or(|(c, _, _)| *c != i) {
                if let Some((_, id, record)) = current.take() {
                    view.put_session(id, &record)?;
                }
                let destination = &self.sessions[i];
                let (id, mut record) = turn::session_for_write(view, &destination.name)?;
                if record.source.is_none() {
                    record.source = Some(self.source.clone());
                    record.title.clone_from(&destination.title);
                }
                current = Some((i, id, record));
            }
            if let Some((_, id, record)) = current.as_mut() {
                let (gate_anchors, rest) =
                    counted.split_at(turn.gate_anchor_entries().len().min(counted.len()));
                counted = rest;
                // Turns of the batch before this one with an anchor it does not have.
                let other = |hash: u64| {
                    let before =
                        |p: &&NewPosting| in_block_order.get(p.block as usize).is_some_and(|&q| q < position);
                    grouped.group(hash).iter().filter(before).count() as u64
                };
                let earlier = turn::EarlierInBatch { gate_anchors, other: &other };
                let (turn_id, turn_spent) = turn::append_turn(
                    view,
                    *id,
                    record,
                    turn,
                    match pending {
                        true => Postings::Logged,
                        false => Postings::FoldInTransaction(&earlier),
                    },
                )?;
                if blocks.get(rank as usize).is_none_or(|block| block.key != block_key(*id, turn_id)) {
                    return Err(crate::Error::bug(format!(
                        "turn {turn_id} of session {id} took another id than its postings"
                    )));
                }
                spent.push(turn_spent);
            }
        }
        if let Some((_, id, record)) = current.take() {
            view.put_session(id, &record)?;
        }
        Ok(spent)
    }
}

/// A batch ready to write: its turns with their anchors, and their postings grouped by anchor
/// for the fold.
#[derive(Default)]
struct PreparedBatch {
    turns: Vec<(usize, PreparedTurn)>,
    layout: Layout,
}

/// Where a batch's turns and postings go: its block table, its postings grouped by anchor and
/// the gate's counts of the batch.
#[derive(Default)]
struct Layout {
    /// Each turn's index in `blocks`.
    ranks: Vec<u32>,
    /// The inverse of `ranks`: each block's turn.
    in_block_order: Vec<u32>,
    /// For each gate anchor of each turn (`PreparedTurn::gate_anchor_entries`), in order: how
    /// many turns of the batch before it have it (`Grouped::counting`).
    earlier: Vec<u32>,
    /// The fold's block table: the batch in session order (each session's turns consecutive,
    /// in file order). The writer fills in the keys (`Writer::fill_keys`) before it adds the
    /// turns.
    blocks: Vec<NewBlock>,
    grouped: Grouped,
}

/// A text dictionary trained on a batch's turns, if they hold enough text.
fn train_dictionary(batch: &Batch) -> Option<TextDictionary> {
    let started = Instant::now();
    let bodies: Vec<Vec<u8>> = batch
        .par_iter()
        .map(|(_, turn)| turn_text::body(&turn.user, &turn.assistant, &turn.time, &tool_records(&turn.tools)))
        .collect();
    let dictionary = TextDictionary::train_on(&bodies);
    if let Some(d) = &dictionary {
        log::debug!(
            "trained a {} byte text dictionary on {} turns in {:.0} ms",
            d.bytes().len(),
            bodies.len(),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    dictionary
}

fn tool_records(tools: &[crate::import::turns::ToolCall]) -> Vec<ToolRecord> {
    tools
        .iter()
        .map(|t| ToolRecord {
            name: t.name.clone(),
            call_id: t.call_id.clone(),
            arguments: t.arguments.clone(),
            result_bytes: t.result_bytes,
        })
        .collect()
}

impl Sizer {
    /// Prepares `batch` of `read` bytes as read, and learns from it what the next one's turns
    /// will hold once prepared.
    fn prepare(&self, batch: Batch, read: usize, dictionary: Option<&TextDictionary>) -> PreparedBatch {
        let turns = batch.len();
        let prepared = prepare(batch, dictionary);
        let bytes = prepared.heap_bytes();
        self.learn(read, bytes);
        log::debug!(
            "prepared {turns} turns: {:.1} MiB as read, {:.1} MiB prepared",
            read as f64 / (1 << 20) as f64,
            bytes as f64 / (1 << 20) as f64
        );
        prepared
    }
}

impl PreparedBatch {
    /// Bytes it holds on the heap.
    fn heap_bytes(&self) -> usize {
        let Layout { ranks, in_block_order, earlier, blocks, grouped } = &self.layout;
        let turns: usize = self.turns.iter().map(|(_, t)| t.heap_bytes()).sum();
        self.turns.capacity() * size_of::<(usize, PreparedTurn)>()
            + turns
            + (ranks.capacity() + in_block_order.capacity() + earlier.capacity()) * size_of::<u32>()
            + blocks.capacity() * size_of::<NewBlock>()
            + grouped.heap_bytes()
    }
}

/// Redacts the secrets of a batch's turns (`redact` on), in parallel: a file's new turns are
/// redacted here, whatever their format.
fn redact_batch(batch: &mut Batch, redact: bool) {
    if redact {
        batch.par_iter_mut().for_each(|(_, turn)| turn.redact());
    }
}

/// Extracts the anchors of a batch, compresses its text (with `dictionary`) and groups its
/// postings, in parallel.
fn prepare(batch: Batch, dictionary: Option<&TextDictionary>) -> PreparedBatch {
    let turns: Vec<(usize, PreparedTurn)> = batch
        .into_par_iter()
        .map(|(i, turn)| {
            let tools = turn
                .tools
                .into_iter()
                .map(|t| ToolRecord {
                    name: t.name,
                    call_id: t.call_id,
                    arguments: t.arguments,
                    result_bytes: t.result_bytes,
                })
                .collect();
            let mut prepared = PreparedTurn::new(turn.user, turn.assistant, turn.time, tools);
            let body = turn_text::body(&prepared.user, &prepared.assistant, &prepared.time, &prepared.tools);
            prepared.text = Some(turn_text::compress(body, dictionary));
            (i, prepared)
        })
        .collect();
    // Session order; stable, so each session's turns keep their file (= turn id) order.
    let mut order: Vec<u32> = (0..turns.len() as u32).collect();
    order.sort_by_key(|&position| turns[position as usize].0);
    let mut ranks = vec![0u32; turns.len()];
    let mut blocks = Vec::with_capacity(turns.len());
    for (rank, &position) in (0u32..).zip(&order) {
        ranks[position as usize] = rank;
        let anchors = turns[position as usize].1.anchors();
        blocks.push(NewBlock { key: 0, len_user: anchors.len_user, len_assistant: anchors.len_assistant });
    }
    let entries: Vec<&[(u64, u32, u32)]> =
        turns.iter().map(|(_, turn)| &turn.anchors().entries[..]).collect();
    let (grouped, counts) = Grouped::counting(&entries, &order);
    // The gate's anchors' counts, picked out of all the anchors' while this side's caches hold
    // them.
    let starts: Vec<usize> =
        entries.iter().scan(0, |start, e| Some(std::mem::replace(start, *start + e.len()))).collect();
    let earlier: Vec<u32> = (turns.par_iter().zip(starts))
        .flat_map_iter(|((_, turn), start)| {
            let counts = &counts;
            turn.gate_anchor_entries().map(move |i| i.map_or(u32::MAX, |i| counts[start + i]))
        })
        .collect();
    PreparedBatch { turns, layout: Layout { ranks, in_block_order: order, earlier, blocks, grouped } }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::PendingRow;
    use crate::store::records::{ForwardRecord, GateRecord, TurnRecord};
    use crate::{Gatekeeper, ImportOptions, Options};

    type Turns = std::iter::Peekable<std::vec::IntoIter<Result<(usize, ParsedTurn), crate::Error>>>;

    fn turns(sizes: &[usize]) -> Turns {
        let turns: Vec<_> = (sizes.iter())
            .map(|&n| {
                Ok((0, ParsedTurn { user: "u".repeat(n), assistant: String::new(), ..Default::default() }))
            })
            .collect();
        turns.into_iter().peekable()
    }

    fn sizes(batch: &Batch) -> Vec<usize> {
        batch.iter().map(|(_, t)| t.user.len()).collect()
    }

    #[test]
    fn batches_end_where_their_turns_would_pass_half_the_budget_once_prepared() {
        let slot = size_of::<(usize, ParsedTurn)>();
        let sizer = Sizer::new(2 * 10_000);
        sizer.learn(1000, 2000); // a batch measured: 2 bytes prepared per byte read
        let mut all = turns(&[3000 - slot, 2000 - slot, 1000 - slot, 4000 - slot, 9000]);
        let (first, read) = sizer.next_batch(&mut all).unwrap().unwrap();
        // 5,000 bytes read is 10,000 prepared: a third turn would pass it.
        assert_eq!((sizes(&first), read), (vec![3000 - slot, 2000 - slot], 5000));
        let (second, _) = sizer.next_batch(&mut all).unwrap().unwrap();
        assert_eq!(sizes(&second), vec![1000 - slot, 4000 - slot]);
        // A turn larger than a batch goes alone.
        let (third, _) = sizer.next_batch(&mut all).unwrap().unwrap();
        assert_eq!(sizes(&third), vec![9000]);
        assert!(sizer.next_batch(&mut all).is_none());
    }

    #[test]
    fn batches_are_sized_by_the_largest_growth_measured_and_never_pass_batch_turns() {
        let sizer = Sizer::new(usize::MAX / 4);
        let mut all = turns(&vec![10; BATCH_TURNS + 5]);
        let (first, _) = sizer.next_batch(&mut all).unwrap().unwrap();
        assert_eq!(first.len(), BATCH_TURNS);
        assert_eq!(sizer.next_batch(&mut all).unwrap().unwrap().0.len(), 5);

        let budget = 2 * 1000 * size_of::<(usize, ParsedTurn)>();
        let sizer = Sizer::new(budget);
        sizer.learn(100, 400);
        sizer.learn(100, 200); // a lighter batch does not make the next one larger
        let mut all = turns(&vec![0; 1000]);
        let (batch, _) = sizer.next_batch(&mut all).unwrap().unwrap();
        assert_eq!(batch.len(), 1000 / 4);
    }

    #[test]
    fn a_first_batch_sized_by_the_guess_is_measured_then_filled_within_the_budget() {
        let budget = 8 << 20;
        let sizer = Sizer::new(budget);
        let mut all = turns(&vec![1000; 20_000]);
        let (mut first, mut read) = sizer.next_batch(&mut all).unwrap().unwrap();
        let guessed = first.len();
        assert!(read * (FIRST_GROWTH >> 10) <= budget / 2);
        sizer.probe(&first);
        sizer.fill(&mut first, &mut read, &mut all).unwrap();
        assert!(first.len() > 4 * guessed, "{} turns after the probe, {guessed} before", first.len());
        assert!(prepare(first, None).heap_bytes() <= budget / 2);
    }

    #[test]
    fn a_prepared_batch_counts_its_anchors_and_postings_beside_its_text() {
        let text =
            "the quick brown fox jumps over the lazy dog near parse_config and src/main.rs ".repeat(20);
        let batch: Batch = (0..50)
            .map(|i| {
                (0, ParsedTurn { user: format!("{text} {i}"), assistant: text.clone(), ..Default::default() })
            })
            .collect();
        let read: usize = batch.iter().map(|(_, t)| read_bytes(t)).sum();
        let sizer = Sizer::new(1 << 30);
        let prepared = sizer.prepare(batch, read, None);
        let text_bytes: usize =
            prepared.turns.iter().map(|(_, t)| t.user.capacity() + t.assistant.capacity()).sum();
        assert!(prepared.heap_bytes() > text_bytes + prepared.layout.grouped.heap_bytes());
        // Learnt: the next batch is sized by what this one measured, not by the first guess.
        let growth = sizer.growth.load(Ordering::Relaxed);
        assert_eq!(growth, (prepared.heap_bytes() as u128 * 1024).div_ceil(read as u128) as usize);
    }

    #[test]
    fn a_few_turns_beside_waiting_runs_stay_pending_and_answer_at_once()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        // Another import is running: its run of two turns of session "other" waits.
        gk.store().write(|view| -> Result<(), crate::Error> {
            let (id, mut session) = turn::session_for_write(view, "other")?;
            let gate = GateRecord { switch: false, overlap: 0.0, new_ratio: 0.0, deictic: None };
            let text = "kafka";
            let record = TurnRecord {
                user: text.into(),
                assistant: String::new(),
                gate,
                segment_start: 0,
                time: None,
                tools: vec![],
            };
            let hash = crate::store::anchor_hash("kafka");
            for turn in 0..2 {
                let forward = ForwardRecord { len_user: 1, len_assistant: 0, entries: vec![(hash, 1, 0)] };
                view.put_turn(id, turn, &record, None, forward, PendingRow::FoldInTransaction)?;
            }
            session.turn_count = 2;
            view.put_session(id, &session)?;
            let blocks: Vec<NewBlock> =
                (0..2).map(|t| NewBlock { key: block_key(id, t), len_user: 1, len_assistant: 0 }).collect();
            let entries = [&[(hash, 1u32, 0u32)][..], &[(hash, 1, 0)][..]];
            let grouped = Grouped::by_anchor(&entries);
            let run = view.next_run()?.write(&grouped, &blocks)?;
            Ok(view.fold_grouped(&grouped, &blocks, FoldTarget::Run(run))?)
        })?;
        // A hook imports the two turns its transcript gained.
        let log = dir.path().join("hook.jsonl");
        std::fs::write(
            &log,
            "{\"session\": \"hook\", \"user\": \"How long does the Redis lock live?\", \"assistant\": \"PX 45000, renewed every 15 s.\"}\n\
             {\"session\": \"hook\", \"user\": \"Who renews the Redis lock?\", \"assistant\": \"A heartbeat task.\"}\n",
        )?;
        assert_eq!(gk.import(&[log], &ImportOptions::default())?.new_turns, 2);
        let view = gk.store().read()?;
        assert!(view.import_running(), "the other import's run was not merged by the small import");
        assert_eq!(view.pending().len(), 2, "the two turns wait as pending rows");
        drop(view);
        let selection = gk.session("hook")?.select("redis lock heartbeat renews")?;
        assert!(selection.blocks.iter().any(|b| b.turn_id == 1), "recalled from pending rows at once");
        // Once the runs are merged, a fold takes the pending turns into the lists.
        gk.store().merge_runs()?;
        gk.fold_pending()?;
        assert!(gk.store().read()?.pending().is_empty());
        let report = gk.verify()?;
        assert!(report.is_ok(), "{:?}", report.problems);
        Ok(())
    }

    #[test]
    fn a_session_forgotten_after_the_import_planned_it_stays_forgotten()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        let log = dir.path().join("s.jsonl");
        let line = |i: usize| {
            format!("{{\"session\": \"s\", \"user\": \"question {i}\", \"assistant\": \"answer {i}\"}}\n")
        };
        std::fs::write(&log, (0..3).map(line).collect::<String>())?;
        gk.import(std::slice::from_ref(&log), &ImportOptions::default())?;
        // The import planned the session's fourth turn; then the session is forgotten.
        let writer =
            Writer::new(gk.index(), &log, vec![Destination { name: "s".into(), title: None, first_turn: 3 }]);
        gk.forget_session("s")?;
        let turn =
            ParsedTurn { user: "question 3".into(), assistant: "answer 3".into(), ..Default::default() };
        let written = writer.write_all(std::iter::once(Ok((0, turn))));
        assert!(
            matches!(written, Err(crate::Error::Forgotten { ref session, .. }) if session == "s"),
            "{written:?}"
        );
        assert!(gk.sessions()?.is_empty(), "the forget stands");
        // Importing the file again, as the error says, stores the session anew.
        assert_eq!(gk.import(&[log], &ImportOptions::default())?.new_turns, 3);
        Ok(())
    }
}
