//! Sparse recall (DESIGN §3.4): score the blocks that share anchors with the query.
//!
//! ```text
//! score(b, q) = 1.5·lex(u_b, q) + 0.7·lex(a_b, q) + 1.0·exact(b, q) + 0.2·recency(b)
//! ```
//! `lex` is BM25 (k1 = 1.2, b = 0.75) of one side, divided by its upper bound
//! `Σ idf(t)·(k1 + 1)` over the query's anchors so it lies in [0, 1]. Only blocks in some
//! query anchor's postings are scored: the input is the postings of the query's anchors, never
//! the history. Blocks of turns are scored on the rayon pool; within a turn the anchors'
//! shares are added in anchor order, so the result does not depend on the number of threads.

use crate::error::Result;
use crate::query::anchors::QueryAnchors;
use crate::postings::codec::decode_norm;
use crate::store::{BlockNorms, NormRows, SessionLengths};
use crate::types::Posting;

use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// DESIGN §3.4: blocks kept after scoring.
pub const RECALL_LIMIT: usize = 20;
/// DESIGN §3.4: BM25 term-frequency saturation.
pub const BM25_K1: f64 = 1.2;
/// DESIGN §3.4: BM25 length normalization.
pub const BM25_B: f64 = 0.75;
/// DESIGN §3.7: weight of the user side.
pub const WEIGHT_USER: f64 = 1.5;
/// DESIGN §3.7: weight of the assistant side.
pub const WEIGHT_ASSISTANT: f64 = 0.7;
/// DESIGN §3.7: weight of an exact match (the block has every query anchor).
pub const WEIGHT_EXACT: f64 = 1.0;
/// DESIGN §3.7: weight of recency.
pub const WEIGHT_RECENCY: f64 = 0.2;
/// DESIGN §3.4: the recency window, in turns. A turn this many turns old or older gets no
/// recency bonus; the latest turn gets all of it. 50 turns is about one working session.
pub const RECENCY_WINDOW_TURNS: u32 = 50;

/// Corpus figures recall needs.
#[derive(Debug, Clone, Copy)]
pub struct RecallContext {
    /// Average user-side length in anchors.
    pub avg_len_user: f64,
    /// Average assistant-side length in anchors.
    pub avg_len_assistant: f64,
    /// The turn being asked about: the session's turn count (or `--as-of`).
    pub current_turn: u32,
}

/// A scored block.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Turn id within the session.
    pub turn: u32,
    /// The §3.4 score.
    pub score: f64,
    /// Query anchors the block contains (bit `i` = anchor `i`).
    pub matched: u64,
}

/// Turns scored together in one dense block of sums: bounds memory by the block, not by the
/// history, and gives rayon independent pieces of work. A block's side lengths are one norm
/// row ([`TurnNorms`]).
const SCORE_BLOCK_TURNS: u32 = 4096;
const _: () = assert!(SCORE_BLOCK_TURNS == crate::store::ROW_TURNS);

/// The postings of a query from which its lists are cut into blocks on the pool: fewer are cut
/// sooner on one thread than handed out.
const MIN_PARALLEL_CUTS: usize = 65_536;

/// The side lengths (BM25's document lengths) of the turns recall scores, a block of
/// [`SCORE_BLOCK_TURNS`] turns at a time. Postings come without them: a long history's lists
/// are 100k postings, most of which are never scored, and filling each as it was decoded
/// cost as much as decoding it.
pub trait TurnNorms: Sync {
    /// The lengths of the block of turns that starts at `low`.
    fn block(&self, low: u32) -> Result<BlockNorms<'_>>;
}

impl<T: NormRows + Sync + ?Sized> TurnNorms for SessionLengths<'_, T> {
    fn block(&self, low: u32) -> Result<BlockNorms<'_>> {
        Ok(SessionLengths::block(self, low)?)
    }
}

/// Scores every block that appears in `postings` (one list per query anchor, in anchor order,
/// each sorted by turn; their turns' side lengths from `norms`). Each block of turns keeps at
/// most its own `keep` best candidates; together they hold the best `keep` of all, so the
/// first `keep` that [`Ranking`] orders them into are those (past them the ranking is
/// incomplete). Returned by block of turns, not by rank or turn. A long history touches ~100k
/// turns, of which a selection looks at 200, or 2,000 for `fill`.
///
/// Blocks of [`SCORE_BLOCK_TURNS`] turns are scored in parallel; within a turn the anchors'
/// contributions are added in anchor order, so the sums do not depend on the thread count.
/// Once the blocks scored have `keep` positive-scoring candidates between them, the lowest of
/// their best `keep` bounds what the best `keep` of all score at least ([`Floor`]), and the
/// blocks scored after it drop what scores less and pass over the turns that only the
/// commonest anchors' lists hold when those lists together cannot reach that score
/// ([`Bounds`], MaxScore as search engines prune with it): a long history's commonest words
/// hold most of its postings and add the least.
///
/// Only the anchors in `scored` count (framing words are left out): the upper bound that
/// normalizes `lex` sums their IDF, and `exact` means the block has all of them. A turn with
/// no lengths in `norms` is an error (a damaged index).
pub fn score(
    query: &QueryAnchors,
    postings: &[Vec<Posting>],
    norms: &dyn TurnNorms,
    scored: u64,
    context: &RecallContext,
    keep: usize,
) -> Result<Vec<Candidate>> {
    let upper_bound: f64 = query.idf_of(scored) * (BM25_K1 + 1.0);
    let Some(last_turn) = postings.iter().filter_map(|list| list.last()).map(|p| p.turn).max() else {
        return Ok(Vec::new());
    };
    if upper_bound <= 0.0 || keep == 0 {
        return Ok(Vec::new());
    }
    let full = scored;
    let inverse_bound = 1.0 / upper_bound;
    let bounds = Bounds::new(query, postings, upper_bound, full);
    let terms = LengthTerms::new(context);
    let floor = Floor::new(keep, last_turn);
    let block_count = last_turn / SCORE_BLOCK_TURNS + 1;
    // Many long lists are cut on the pool, a few short ones quicker than handing them out.
    let cuts: Vec<Vec<usize>> = if postings.iter().map(Vec::len).sum::<usize>() >= MIN_PARALLEL_CUTS {
        postings.par_iter().map(|list| block_cuts(list, block_count)).collect()
    } else {
        postings.iter().map(|list| block_cuts(list, block_count)).collect()
    };
    let blocks: Vec<u32> = (0..block_count).collect();
    let per_block: Vec<Vec<Candidate>> = blocks
        .par_iter()
        .map_init(SpareSums::take, |sums, &block| {
            let low = block * SCORE_BLOCK_TURNS;
            let b = block as usize;
            let in_block: Vec<&[Posting]> = postings
                .iter()
                .zip(&cuts)
                .map(|(list, list_cuts)| &list[list_cuts[b]..list_cuts[b + 1]])
                .collect();
            if in_block.iter().all(|list| list.is_empty()) {
                return Ok(Vec::new());
            }
            let norms = norms.block(low)?;
            // Every posting's turn must have lengths, scored or passed over: a damaged index is
            // an error however many threads score it.
            for list in &in_block {
                let (Some(first), Some(last)) = (list.first(), list.last()) else { continue };
                let span = (first.turn - low) as usize..=(last.turn - low) as usize;
                // A sound block's gaps are empty or past its end: seen without searching.
                for gap in norms
                    .gaps()
                    .into_iter()
                    .filter(|gap| !gap.is_empty() && gap.start <= *span.end() && *span.start() < gap.end)
                {
                    let at = list.partition_point(|p| ((p.turn - low) as usize) < gap.start);
                    if let Some(p) = list.get(at).filter(|p| gap.contains(&((p.turn - low) as usize))) {
                        return Err(norms.missing((p.turn - low) as usize).into());
                    }
                }
            }
            let skipped = bounds.below(floor.get());
            // The turns some list that is not skipped holds: those are scored, with every
            // list's share, and the others only if recency may lift them. (With none skipped,
            // every turn is scored, and adding marks it.)
            if skipped != 0 {
                for (index, list) in in_block.iter().enumerate() {
                    if skipped & (1u64 << index) == 0 {
                        for p in *list {
                            sums.mark((p.turn - low) as usize, 1u64 << index);
                        }
                    }
                }
            }
            for (index, (list, anchor)) in in_block.iter().zip(query.anchors()).enumerate() {
                let skip = skipped & (1u64 << index) != 0;
                for p in *list {
                    let k = (p.turn - low) as usize;
                    if skip && !sums.is_marked(k) && recency(p.turn, context.current_turn) == 0.0 {
                        continue;
                    }
                    // Checked above: every posting of the block has its turn's lengths (and the
                    // worker's sums are cleared when it is done, however it ends).
                    let Some((norm_user, norm_assistant)) = norms.get(k) else {
                        return Err(norms.missing(k).into());
                    };
                    let user = saturate(anchor.idf, p.tf_user, terms.user[usize::from(norm_user)]);
                    let assistant =
                        saturate(anchor.idf, p.tf_assistant, terms.assistant[usize::from(norm_assistant)]);
                    sums.add(k, user, assistant, 1u64 << index);
                }
            }
            // Below the bar no candidate is among the best `keep` of all (`keep` others clear it).
            // Most turns of a long history are well below it: that is seen without dividing.
            let bar = floor.get();
            let clearly_below = bar - 1e-9;
            let mut candidates: Vec<Candidate> = sums
                .drain()
                .filter_map(|(k, user, assistant, matched)| {
                    let turn = low + k as u32;
                    let exact = if matched == full { 1.0 } else { 0.0 };
                    let recent = recency(turn, context.current_turn);
                    let rest = WEIGHT_EXACT * exact + WEIGHT_RECENCY * recent;
                    if (WEIGHT_USER * user + WEIGHT_ASSISTANT * assistant) * inverse_bound + rest
                        < clearly_below
                    {
                        return None;
                    }
                    let score = WEIGHT_USER * user / upper_bound
                        + WEIGHT_ASSISTANT * assistant / upper_bound
                        + WEIGHT_EXACT * exact
                        + WEIGHT_RECENCY * recent;
                    (score >= bar).then_some(Candidate { turn, score, matched })
                })
                .collect();
            // Ranks are a total order (turns are distinct): no candidate past a block's
            // `keep` best is among the `keep` best of all.
            if candidates.len() > keep {
                candidates.select_nth_unstable_by(keep - 1, by_rank);
                candidates.truncate(keep);
            }
            floor.offer(&candidates);
            Ok(candidates)
        })
        .collect::<Result<_>>()?;
    // `flatten().collect()` cannot size its output and grows it step by step: copy once.
    let mut candidates = Vec::with_capacity(per_block.iter().map(Vec::len).sum());
    for block in per_block {
        candidates.extend(block);
    }
    Ok(candidates)
}

/// Where each block's postings begin in `list` (sorted by turn, every turn in the first
/// `blocks` blocks): block `b`'s are `cuts[b]..cuts[b + 1]`. Each cut is found from the one
/// before in widening steps, reading the list near where it last did, where a binary search
/// of a long history's 100k-posting list for each block jumps across all of it.
fn block_cuts(list: &[Posting], blocks: u32) -> Vec<usize> {
    debug_assert!(blocks > 0);
    debug_assert!(
        list.last().is_none_or(|p| u64::from(p.turn) < u64::from(blocks) * u64::from(SCORE_BLOCK_TURNS))
    );
    let mut cuts = Vec::with_capacity(blocks as usize + 1);
    cuts.push(0);
    let mut at = 0;
    for block in 1..blocks {
        let high = block * SCORE_BLOCK_TURNS;
        let rest = &list[at..];
        let mut reach = 1;
        while reach <= rest.len() && rest[reach - 1].turn < high {
            reach *= 2;
        }
        at += rest[..reach.min(rest.len())].partition_point(|p| p.turn < high);
        cuts.push(at);
    }
    cuts.push(list.len());
    cuts
}

/// The least score among the best `keep` candidates of the blocks scored so far: the best
/// `keep` of all score this much or more, and later blocks drop what scores less. Taken over
/// every block scored, not one: a long history's best `keep` are a few a block, and one
/// block's `keep`-th best lies far below them, too low for [`Bounds`] to pass over any list.
struct Floor {
    keep: usize,
    /// The best positive scores offered, at most `keep` of them between offers, as their bits
    /// (which order as the floats do).
    best: Mutex<Vec<u64>>,
    /// The least of `best` once it holds `keep`, else 0.
    bits: AtomicU64,
}

impl Floor {
    /// A floor for the best `keep` of turns up to `last_turn`; one that cannot fill stays 0.
    fn new(keep: usize, last_turn: u32) -> Self {
        let keep = if keep > last_turn as usize { 0 } else { keep };
        Floor { keep, best: Mutex::new(Vec::with_capacity(2 * keep)), bits: AtomicU64::new(0) }
    }

    fn get(&self) -> f64 {
        f64::from_bits(self.bits.load(Ordering::Relaxed))
    }

    /// Takes a block's candidates (at most `keep`) into the best `keep`: a partial selection
    /// of at most twice `keep` scores, linear (a heap's sifting cost more at 100k turns, where
    /// a selection scores a dozen blocks).
    fn offer(&self, candidates: &[Candidate]) {
        if self.keep == 0 || candidates.is_empty() {
            return;
        }
        let floor = self.bits.load(Ordering::Relaxed);
        // However a holder of the lock ended, `best` holds real scores of distinct turns: its
        // least of `keep` is still a floor.
        let mut best = self.best.lock().unwrap_or_else(PoisonError::into_inner);
        // Only positive scores: the bits of non-negative floats order as the floats do, and a
        // floor of 0 passes over nothing (a turn whose anchors count 0 on both sides scores 0).
        let scores = candidates.iter().filter(|c| c.score > 0.0).map(|c| c.score.to_bits());
        best.extend(scores.filter(|&bits| bits >= floor));
        if best.len() >= self.keep {
            let keep = self.keep;
            best.select_nth_unstable_by(keep - 1, |a, b| b.cmp(a));
            best.truncate(keep);
            self.bits.fetch_max(best[keep - 1], Ordering::Relaxed);
        }
    }
}

/// What a turn can score from each list alone, for skipping the turns that only lists too weak
/// to matter hold (MaxScore). An anchor adds at most `idf·(k1 + 1)` to each side's BM25
/// (as its count grows without end), so at most `(1.5 + 0.7)·idf·(k1 + 1) / upper_bound` to
/// the score; `exact` needs every scored anchor, and recency is never skipped.
struct Bounds {
    /// Non-empty lists by what they can add, least first: (anchor bit, most it adds).
    lists: Vec<(u64, f64)>,
    full: u64,
}

impl Bounds {
    fn new(query: &QueryAnchors, postings: &[Vec<Posting>], upper_bound: f64, full: u64) -> Self {
        let mut lists: Vec<(u64, f64)> = (postings.iter().zip(query.anchors()).enumerate())
            .filter(|(_, (list, _))| !list.is_empty())
            .map(|(index, (_, anchor))| {
                let most =
                    (WEIGHT_USER + WEIGHT_ASSISTANT) * anchor.idf.max(0.0) * (BM25_K1 + 1.0) / upper_bound;
                (1u64 << index, most)
            })
            .collect();
        lists.sort_by(|a, b| a.1.total_cmp(&b.1));
        Bounds { lists, full }
    }

    /// The lists whose turns, held by no other list, score below `threshold` whatever they
    /// hold (outside the recency window): the longest run of the weakest lists whose bound is.
    fn below(&self, threshold: f64) -> u64 {
        let (mut mask, mut sum) = (0u64, 0.0f64);
        for &(bit, most) in &self.lists {
            let (next_mask, next_sum) = (mask | bit, sum + most);
            let exact = if self.full & !next_mask == 0 { WEIGHT_EXACT } else { 0.0 };
            // A margin for the rounding of the sums the scores add up in another order.
            if (next_sum + exact) * (1.0 + 1e-9) + 1e-12 >= threshold {
                break;
            }
            (mask, sum) = (next_mask, next_sum);
        }
        mask
    }
}

thread_local! {
    /// A worker's [`BlockSums`] between queries: 100 KiB, which rayon would otherwise
    /// allocate and zero for each of the dozens of pieces it splits a query's blocks into.
    static SPARE_SUMS: std::cell::Cell<Option<Box<BlockSums>>> = const { std::cell::Cell::new(None) };
}

/// A worker's [`BlockSums`], taken from the thread's spare (or new) and given back, cleared,
/// when done with, however the work ended.
struct SpareSums(Option<Box<BlockSums>>);

impl SpareSums {
    fn take() -> Self {
        SpareSums(Some(SPARE_SUMS.take().unwrap_or_else(|| Box::new(BlockSums::new()))))
    }
}

impl std::ops::Deref for SpareSums {
    type Target = BlockSums;

    fn deref(&self) -> &BlockSums {
        self.0.as_deref().expect("taken until dropped")
    }
}

impl std::ops::DerefMut for SpareSums {
    fn deref_mut(&mut self) -> &mut BlockSums {
        self.0.as_deref_mut().expect("taken until dropped")
    }
}

impl Drop for SpareSums {
    fn drop(&mut self) {
        // Sums a panic left half drained are not given back: they might not clear.
        if let Some(mut sums) = self.0.take().filter(|_| !std::thread::panicking()) {
            sums.clear();
            SPARE_SUMS.set(Some(sums));
        }
    }
}

/// The sums of one block of [`SCORE_BLOCK_TURNS`] turns, kept by a worker from block to block:
/// dense by turn for adding, with the turns touched listed, so that reading and clearing them
/// costs the block's postings, not its turns (a history of 500k turns has 120 blocks, most of
/// whose turns hold none of the query's anchors).
struct BlockSums {
    /// Per turn: the BM25 sums of its user and assistant sides, and the anchors it holds.
    sums: Vec<(f64, f64, u64)>,
    /// The turns touched, the first `touched_len` of them: room for every turn of the block,
    /// so that a turn is listed without a branch on whether another anchor listed it first,
    /// and one slot more, which takes that write once every turn is listed.
    touched: Vec<u32>,
    touched_len: usize,
}

impl BlockSums {
    fn new() -> Self {
        let turns = SCORE_BLOCK_TURNS as usize;
        BlockSums { sums: vec![(0.0, 0.0, 0); turns], touched: vec![0; turns + 1], touched_len: 0 }
    }

    /// Lists turn `k` as holding `anchor`, adding nothing to its sums yet.
    #[inline]
    fn mark(&mut self, k: usize, anchor: u64) {
        let sums = &mut self.sums[k];
        self.touched[self.touched_len] = k as u32;
        self.touched_len += usize::from(sums.2 == 0);
        sums.2 |= anchor;
    }

    /// Clears every turn touched (a block given up half way).
    fn clear(&mut self) {
        self.drain().for_each(drop);
    }

    /// Whether turn `k` is listed.
    #[inline]
    fn is_marked(&self, k: usize) -> bool {
        self.sums[k].2 != 0
    }

    #[inline]
    fn add(&mut self, k: usize, user: f64, assistant: f64, anchor: u64) {
        let sums = &mut self.sums[k];
        self.touched[self.touched_len] = k as u32;
        self.touched_len += usize::from(sums.2 == 0);
        sums.0 += user;
        sums.1 += assistant;
        sums.2 |= anchor;
    }

    /// The touched turns' `(offset, user, assistant, matched)`, in the order first touched,
    /// each cleared.
    fn drain(&mut self) -> impl Iterator<Item = (usize, f64, f64, u64)> + '_ {
        let touched = std::mem::take(&mut self.touched_len);
        self.touched[..touched].iter().map(|&k| {
            let k = k as usize;
            let (user, assistant, matched) = std::mem::replace(&mut self.sums[k], (0.0, 0.0, 0));
            (k, user, assistant, matched)
        })
    }
}

/// Candidates in rank order (score descending, then turn ascending), sorted lazily: the first
/// few hundred are found with a partial selection, the rest only if asked for.
pub struct Ranking {
    candidates: Vec<Candidate>,
    sorted: usize,
    next: usize,
}

impl Ranking {
    /// Ranks `candidates`.
    pub fn new(candidates: Vec<Candidate>) -> Self {
        Ranking { candidates, sorted: 0, next: 0 }
    }
}

fn by_rank(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.score.total_cmp(&a.score).then(a.turn.cmp(&b.turn))
}

impl Iterator for Ranking {
    type Item = Candidate;

    fn next(&mut self) -> Option<Candidate> {
        if self.next == self.sorted {
            let rest = &mut self.candidates[self.sorted..];
            if rest.is_empty() {
                return None;
            }
            let take = (self.sorted * 3).max(256).min(rest.len());
            if take < rest.len() {
                rest.select_nth_unstable_by(take - 1, by_rank);
            }
            rest[..take].sort_unstable_by(by_rank);
            self.sorted += take;
        }
        let candidate = self.candidates.get(self.next).cloned();
        self.next += 1;
        candidate
    }
}

/// One anchor's BM25 contribution to one side.
pub fn bm25(idf: f64, tf: u32, len: u32, avg_len: f64) -> f64 {
    saturate(idf, tf, length_term(len, avg_len))
}

/// The part of BM25's denominator that a side's length makes: `k1·(1 − b + b·len/avg_len)`.
fn length_term(len: u32, avg_len: f64) -> f64 {
    let norm = if avg_len > 0.0 { f64::from(len) / avg_len } else { 1.0 };
    BM25_K1 * (1.0 - BM25_B + BM25_B * norm)
}

/// BM25 of `tf` occurrences given the side's [`length_term`].
#[inline]
fn saturate(idf: f64, tf: u32, length_term: f64) -> f64 {
    if tf == 0 {
        return 0.0;
    }
    let tf = f64::from(tf);
    idf * tf * (BM25_K1 + 1.0) / (tf + length_term)
}

/// [`length_term`] of each side for every norm byte: a length is one of 256, so recall looks
/// its term up rather than dividing by the average length a posting.
struct LengthTerms {
    user: [f64; 256],
    assistant: [f64; 256],
}

impl LengthTerms {
    fn new(context: &RecallContext) -> Self {
        let side = |avg_len: f64| std::array::from_fn(|norm| length_term(decode_norm(norm as u8), avg_len));
        LengthTerms { user: side(context.avg_len_user), assistant: side(context.avg_len_assistant) }
    }
}

/// `max(0, 1 − (current_turn − turn) / window)`.
pub fn recency(turn: u32, current_turn: u32) -> f64 {
    // Most candidates of a long history are older than the window: no division for them.
    let age = current_turn.saturating_sub(turn);
    if age >= RECENCY_WINDOW_TURNS {
        return 0.0;
    }
    1.0 - f64::from(age) / f64::from(RECENCY_WINDOW_TURNS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anchor;
    use crate::postings::codec::encode_norm;

    fn posting(turn: u32, tf_user: u32, tf_assistant: u32) -> Posting {
        Posting { turn, tf_user, tf_assistant, len_user: 0, len_assistant: 0 }
    }

    /// Every turn's side lengths, from turn 0, as norm bytes.
    struct Lengths(Vec<u8>);

    impl Lengths {
        /// 4 anchors on the user side of each turn and 8 on the assistant's (exact as norms).
        fn uniform() -> Self {
            Lengths([encode_norm(4), encode_norm(8)].repeat(100_000))
        }
    }

    impl TurnNorms for Lengths {
        fn block(&self, low: u32) -> Result<BlockNorms<'_>> {
            let from = (2 * low as usize).min(self.0.len());
            Ok(BlockNorms::new(0, low, &self.0[from..], SCORE_BLOCK_TURNS as usize, &[]))
        }
    }

    /// [`Lengths`] but for one turn, as a damaged index may lack it: the block's turns before
    /// it folded, those after it pending.
    struct Holed(Lengths, u32);

    impl TurnNorms for Holed {
        fn block(&self, low: u32) -> Result<BlockNorms<'_>> {
            let Holed(Lengths(all), hole) = self;
            if !(low..low + SCORE_BLOCK_TURNS).contains(hole) {
                return self.0.block(low);
            }
            let (from, to) = (2 * low as usize, 2 * *hole as usize);
            Ok(BlockNorms::new(0, low, &all[from..to], (hole + 1 - low) as usize, &all[to + 2..]))
        }
    }

    fn scores(
        query: &QueryAnchors,
        postings: &[Vec<Posting>],
        norms: &Lengths,
        scored: u64,
        context: &RecallContext,
        keep: usize,
    ) -> Vec<Candidate> {
        score(query, postings, norms, scored, context, keep).unwrap()
    }

    fn query(dfs: &[(&str, u64)], blocks: u64) -> QueryAnchors {
        let text: Vec<&str> = dfs.iter().map(|(t, _)| *t).collect();
        let text = text.join(" ");
        let table: std::collections::HashMap<u64, u64> =
            dfs.iter().map(|(t, df)| (crate::types::anchor_hash(t), *df)).collect();
        QueryAnchors::build(&text, &anchor::extract(&text), blocks, |h| Ok::<_, ()>(table[&h])).unwrap()
    }

    #[test]
    fn scores_match_the_formula_by_hand() {
        let norms = Lengths::uniform();
        // Anchors sorted by idf: "redis" (df 1) then "lock" (df 3), N = 10.
        let q = query(&[("redis", 1), ("lock", 3)], 10);
        let (idf_redis, idf_lock) = (q.anchors()[0].idf, q.anchors()[1].idf);
        let context = RecallContext { avg_len_user: 4.0, avg_len_assistant: 8.0, current_turn: 10 };
        // Turn 9 has both anchors (user side); turn 2 has "lock" on the assistant side only.
        let postings = vec![vec![posting(9, 1, 0)], vec![posting(2, 0, 2), posting(9, 1, 0)]];
        let got: Vec<Candidate> =
            Ranking::new(scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX)).collect();

        let bound = (idf_redis + idf_lock) * 2.2;
        // len == avg, so the length factor is 1: tf·2.2 / (tf + 1.2).
        let side = |idf: f64, tf: f64| idf * tf * 2.2 / (tf + 1.2);
        let turn9 =
            1.5 * (side(idf_redis, 1.0) + side(idf_lock, 1.0)) / bound + 1.0 + 0.2 * (1.0 - 1.0 / 50.0);
        let turn2 = 0.7 * side(idf_lock, 2.0) / bound + 0.2 * (1.0 - 8.0 / 50.0);
        assert_eq!(got.len(), 2);
        assert_eq!((got[0].turn, got[0].matched), (9, 0b11));
        assert_eq!((got[1].turn, got[1].matched), (2, 0b10));
        assert!((got[0].score - turn9).abs() < 1e-12, "{} vs {turn9}", got[0].score);
        assert!((got[1].score - turn2).abs() < 1e-12, "{} vs {turn2}", got[1].score);
    }

    #[test]
    fn ties_break_by_turn_and_threads_agree() {
        let norms = Lengths::uniform();
        let q = query(&[("alpha", 2)], 100);
        let context = RecallContext { avg_len_user: 4.0, avg_len_assistant: 8.0, current_turn: 500 };
        // Several score blocks, equal scores everywhere past the recency window.
        let postings = vec![(0..3000).map(|t| posting(t * 7, 1 + t % 3, 1)).collect::<Vec<_>>()];
        let ranked = || {
            Ranking::new(scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX))
                .collect::<Vec<_>>()
        };
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(ranked);
        let many = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap().install(ranked);
        assert_eq!(one, many);
        assert!(one.windows(2).all(|w| w[0].score > w[1].score || w[0].turn < w[1].turn));
    }

    #[test]
    fn kept_candidates_are_the_best_of_all() {
        let norms = Lengths::uniform();
        let q = query(&[("alpha", 2), ("beta", 5)], 100);
        let context = RecallContext { avg_len_user: 4.0, avg_len_assistant: 8.0, current_turn: 40_000 };
        // Many blocks of turns, scores spread unevenly between them, ties among them.
        let alpha = (0..9000).map(|t| posting(t * 3 + t % 2, 1 + t % 5, t % 3)).collect::<Vec<_>>();
        let beta = (0..4000).map(|t| posting(t * 7, t % 2, 1 + t % 4)).collect::<Vec<_>>();
        let postings = vec![alpha, beta];
        let all: Vec<Candidate> =
            Ranking::new(scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX)).collect();
        assert!(all.len() > 10_000);
        for keep in [1, 7, 200, 1000] {
            let kept = scores(&q, &postings, &norms, q.full_mask(), &context, keep);
            assert!(kept.len() >= keep && kept.len() < all.len(), "{keep}: {}", kept.len());
            let best: Vec<Candidate> = Ranking::new(kept).take(keep).collect();
            assert_eq!(best, all[..keep], "keep {keep}");
        }
        assert!(scores(&q, &postings, &norms, q.full_mask(), &context, 0).is_empty());
    }

    #[test]
    fn a_worker_starts_each_block_from_nothing() {
        let norms = Lengths::uniform();
        // One worker scores every block with the same sums: turns at the same offset in
        // consecutive blocks must not add up, and a turn touched in one block is not a
        // candidate of the next.
        let q = query(&[("alpha", 2)], 100);
        let context = RecallContext { avg_len_user: 4.0, avg_len_assistant: 8.0, current_turn: 20_000 };
        let block = SCORE_BLOCK_TURNS;
        let postings = vec![vec![posting(5, 3, 0), posting(block + 5, 1, 0), posting(2 * block + 9, 1, 0)]];
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let mut got = one.install(|| scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX));
        got.sort_by_key(|c| c.turn);
        let alone = |p: Posting| scores(&q, &[vec![p]], &norms, q.full_mask(), &context, usize::MAX);
        let expected: Vec<Candidate> = postings[0].iter().flat_map(|&p| alone(p)).collect();
        assert_eq!(got, expected);
        assert_eq!(got.iter().map(|c| c.turn).collect::<Vec<_>>(), vec![5, block + 5, 2 * block + 9]);
        assert!(got[0].score > got[1].score, "tf 3 outscores tf 1: {got:?}");
        assert_eq!(got[1].score, got[2].score);
    }

    /// Postings of a long history: a common anchor in almost every turn, a rarer one in some
    /// and the rarest in a few, lengths and counts varied by a small generator; `dense` turns of
    /// block 0 hold the rarer anchor too, so that block's best scores are high.
    fn long_history(turns: u32, dense: u32) -> (Vec<Vec<Posting>>, Lengths) {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u32| {
            state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            ((state >> 33) % u64::from(n)) as u32
        };
        let (mut common, mut rarer, mut rarest) = (Vec::new(), Vec::new(), Vec::new());
        let mut lengths = Vec::new();
        for turn in 0..turns {
            lengths.extend([encode_norm(next(40)), encode_norm(next(200))]);
            if next(10) != 0 {
                common.push(posting(turn, next(4), next(6)));
            }
            if turn < dense || next(200) == 0 {
                rarer.push(posting(turn, 1 + next(3), next(3)));
            }
            if next(900) == 0 {
                rarest.push(posting(turn, next(2), 1 + next(2)));
            }
        }
        (vec![rarest, rarer, common], Lengths(lengths))
    }

    #[test]
    fn pruning_keeps_the_best_of_all_exactly() {
        let q = query(&[("zircon", 60), ("lattice", 2_000), ("granite", 50_000)], 60_000);
        let (postings, norms) = long_history(60_000, 900);
        // The latest turns are in the recency window: those the common anchor alone holds
        // may still rank.
        let context = RecallContext { avg_len_user: 20.0, avg_len_assistant: 100.0, current_turn: 60_000 };
        for scored in [q.full_mask(), 0b110] {
            let all: Vec<Candidate> =
                Ranking::new(scores(&q, &postings, &norms, scored, &context, usize::MAX)).collect();
            for threads in [1, 4] {
                let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
                for keep in [1, 20, 200, 2_000, 5_000] {
                    let kept = pool.install(|| scores(&q, &postings, &norms, scored, &context, keep));
                    let best: Vec<Candidate> = Ranking::new(kept).take(keep).collect();
                    assert_eq!(best, all[..keep], "scored {scored:b}, {threads} threads, keep {keep}");
                }
            }
        }
    }

    #[test]
    fn pruning_passes_over_turns_only_common_anchors_hold() {
        let q = query(&[("zircon", 60), ("lattice", 2_000), ("granite", 50_000)], 60_000);
        let (postings, norms) = long_history(60_000, 900);
        let context = RecallContext { avg_len_user: 20.0, avg_len_assistant: 100.0, current_turn: 60_000 };
        let keep = 200;
        let blocks = 60_000usize.div_ceil(SCORE_BLOCK_TURNS as usize);
        // Without pruning every block has `keep` candidates (the common anchor is in ~90% of
        // its turns); once block 0's best set the bar, the later blocks keep only the turns a
        // rarer anchor holds (~20 a block) and the latest, which recency may lift.
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let kept = one.install(|| scores(&q, &postings, &norms, q.full_mask(), &context, keep));
        assert!(kept.len() < keep + blocks * 50, "{} candidates from {blocks} blocks", kept.len());
        assert!(kept.iter().all(|c| c.matched & 0b011 != 0 || c.turn + RECENCY_WINDOW_TURNS > 60_000));
        let turns =
            postings.iter().flatten().map(|p| p.turn).collect::<std::collections::BTreeSet<_>>().len();
        // Every block is short of 5,000 candidates (~3,700 each): the bar is the 5,000th best of
        // the blocks scored so far together, and the later blocks keep fewer and fewer.
        let wide = one.install(|| scores(&q, &postings, &norms, q.full_mask(), &context, 5_000));
        assert!(wide.len() < turns / 2, "{} candidates of {turns}", wide.len());
        let all: Vec<Candidate> =
            Ranking::new(scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX)).collect();
        assert_eq!(Ranking::new(wide).take(5_000).collect::<Vec<_>>(), all[..5_000]);
        // With more to keep than all the blocks together hold there is no bar to clear:
        // nothing is passed over.
        let few = one.install(|| scores(&q, &postings, &norms, q.full_mask(), &context, 58_000));
        assert_eq!(few.len(), turns);
    }

    #[test]
    fn the_floor_is_the_best_of_every_block_together() {
        // No block of this history has a dense start: each alone holds ~20 turns of the rarer
        // anchors, far short of `keep`, and only their best together make a bar.
        let q = query(&[("zircon", 60), ("lattice", 2_000), ("granite", 50_000)], 60_000);
        let (postings, norms) = long_history(60_000, 0);
        let context = RecallContext { avg_len_user: 20.0, avg_len_assistant: 100.0, current_turn: 60_000 };
        let (keep, blocks) = (200, 60_000usize.div_ceil(SCORE_BLOCK_TURNS as usize));
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let kept = one.install(|| scores(&q, &postings, &norms, q.full_mask(), &context, keep));
        assert!(kept.len() < keep + blocks * 50, "{} candidates from {blocks} blocks", kept.len());
        let all: Vec<Candidate> =
            Ranking::new(scores(&q, &postings, &norms, q.full_mask(), &context, usize::MAX)).collect();
        assert_eq!(Ranking::new(kept).take(keep).collect::<Vec<_>>(), all[..keep]);
    }

    #[test]
    fn a_floor_is_the_least_of_the_best_positive_scores_offered() {
        let offered = |scores: &[f64]| -> Vec<Candidate> {
            scores.iter().zip(0..).map(|(&score, turn)| Candidate { turn, score, matched: 1 }).collect()
        };
        let floor = Floor::new(3, 100);
        floor.offer(&offered(&[1.0, 2.0]));
        assert_eq!(floor.get(), 0.0, "two scores do not make the best three");
        floor.offer(&offered(&[0.5, 3.0]));
        assert_eq!(floor.get(), 1.0);
        // A tie with the floor, and scores that cannot count, leave it where it is.
        floor.offer(&offered(&[1.0, 0.0, -4.0, f64::NAN, 0.25]));
        assert_eq!(floor.get(), 1.0);
        floor.offer(&offered(&[2.5, 4.0]));
        assert_eq!(floor.get(), 2.5);
        // Non-positive scores never fill a floor, and one that cannot fill stays 0.
        let zeros = Floor::new(2, 100);
        zeros.offer(&offered(&[0.0, -1.0, 0.0]));
        assert_eq!(zeros.get(), 0.0);
        let wide = Floor::new(101, 100);
        wide.offer(&offered(&[5.0; 101]));
        assert_eq!(wide.get(), 0.0);
    }

    #[test]
    fn block_cuts_are_where_each_block_begins() {
        let block = SCORE_BLOCK_TURNS;
        // Empty blocks, a block's first and last turn, runs longer than a widening step, and
        // the history's last turn at the end of the range.
        let turns: Vec<u32> = [0, 1, block - 1, 3 * block, 3 * block + 1]
            .into_iter()
            .chain((4 * block..4 * block + 700).step_by(3))
            .chain([6 * block - 1, 6 * block, u32::MAX - 1])
            .collect();
        let list: Vec<Posting> = turns.iter().map(|&t| posting(t, 1, 0)).collect();
        for length in [0, 1, 2, 5, list.len()] {
            let list = &list[..length];
            let Some(last) = list.last() else {
                assert_eq!(block_cuts(list, 3), [0, 0, 0, 0]);
                continue;
            };
            let blocks = last.turn / block + 1;
            let cuts = block_cuts(list, blocks);
            assert_eq!(cuts.len(), blocks as usize + 1);
            assert!(cuts.windows(2).all(|w| w[0] <= w[1]) && cuts[blocks as usize] == length);
            // Each posting lies between its block's cuts, so each block's are exactly its own.
            for (at, p) in list.iter().enumerate() {
                let b = (p.turn / block) as usize;
                assert!((cuts[b]..cuts[b + 1]).contains(&at), "{length} postings, turn {}", p.turn);
            }
            // A list that ends before the query's last block (another list reaches further).
            if let Some(more) = blocks.checked_add(2).filter(|&b| u64::from(b) * u64::from(block) <= 1 << 32)
            {
                let wider = block_cuts(list, more);
                assert_eq!(wider[..=blocks as usize], cuts[..], "{length} postings, {more} blocks");
                assert!(wider[blocks as usize..].iter().all(|&cut| cut == length));
            }
        }
    }

    #[test]
    fn ranking_is_a_full_sort() {
        let candidates: Vec<Candidate> = (0..2000u32)
            .map(|t| Candidate { turn: t, score: f64::from((t * 7919) % 97) / 10.0, matched: 1 })
            .collect();
        let mut sorted = candidates.clone();
        sorted.sort_by(by_rank);
        assert_eq!(Ranking::new(candidates).collect::<Vec<_>>(), sorted);
        assert_eq!(Ranking::new(Vec::new()).next(), None);
    }

    #[test]
    fn a_scored_turn_without_lengths_is_an_error() {
        let q = query(&[("alpha", 2)], 100);
        let context = RecallContext { avg_len_user: 4.0, avg_len_assistant: 8.0, current_turn: 100 };
        // Lengths of turns 0..10 only: turn 9 scores, turn 50 is a damaged index.
        let norms = Lengths([encode_norm(4), encode_norm(8)].repeat(10));
        // One worker, whose sums outlive each query: a failed one leaves none behind.
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let alone = one.install(|| scores(&q, &[vec![posting(9, 1, 0)]], &norms, 1, &context, 20));
        assert_eq!(alone.len(), 1);
        let both = [vec![posting(9, 1, 0), posting(50, 1, 0)]];
        let err = one.install(|| score(&q, &both, &norms, 1, &context, 20)).unwrap_err();
        assert!(err.to_string().contains("norms of turn 0:50"), "{err}");
        assert_eq!(one.install(|| scores(&q, &[vec![posting(9, 1, 0)]], &norms, 1, &context, 20)), alone);
    }

    #[test]
    fn a_turn_without_lengths_is_an_error_even_where_pruning_passes_over_it() {
        let q = query(&[("zircon", 60), ("lattice", 2_000), ("granite", 50_000)], 60_000);
        let (postings, norms) = long_history(60_000, 900);
        let context = RecallContext { avg_len_user: 20.0, avg_len_assistant: 100.0, current_turn: 60_000 };
        // A turn of a late block that only the common anchor holds: once block 0 set the bar,
        // it is passed over (the pruning test above), but its lengths are still checked.
        let held = |list: &[Posting], turn| list.binary_search_by_key(&turn, |p| p.turn).is_ok();
        let hole = (41_000..45_000)
            .find(|&t| held(&postings[2], t) && !held(&postings[1], t) && !held(&postings[0], t))
            .unwrap();
        let holed = Holed(norms, hole);
        for threads in [1, 4] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let got = pool.install(|| score(&q, &postings, &holed, q.full_mask(), &context, 200));
            let err = got.expect_err("a turn without lengths");
            assert!(err.to_string().contains(&format!("norms of turn 0:{hole}")), "{threads} threads: {err}");
        }
    }

    #[test]
    fn length_terms_by_norm_score_as_bm25_of_the_length() {
        let context = RecallContext { avg_len_user: 13.7, avg_len_assistant: 211.3, current_turn: 0 };
        let terms = LengthTerms::new(&context);
        for norm in 0..=255u8 {
            let len = decode_norm(norm);
            for tf in 0..4 {
                let user = saturate(2.5, tf, terms.user[usize::from(norm)]);
                let assistant = saturate(2.5, tf, terms.assistant[usize::from(norm)]);
                // BM25 as written before the table, inline: the same bits.
                let by_hand = |avg: f64| {
                    let tf = f64::from(tf);
                    let norm = f64::from(len) / avg;
                    2.5 * tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * norm))
                };
                assert_eq!(user.to_bits(), by_hand(13.7).to_bits(), "norm {norm}, tf {tf}");
                assert_eq!(assistant.to_bits(), by_hand(211.3).to_bits(), "norm {norm}, tf {tf}");
                assert_eq!(user.to_bits(), bm25(2.5, tf, len, 13.7).to_bits(), "norm {norm}, tf {tf}");
            }
        }
    }

    #[test]
    fn bm25_and_recency() {
        assert_eq!(bm25(2.0, 0, 5, 5.0), 0.0);
        assert!(bm25(2.0, 3, 5, 5.0) > bm25(2.0, 1, 5, 5.0), "more occurrences score more");
        assert!(bm25(2.0, 1, 2, 5.0) > bm25(2.0, 1, 20, 5.0), "shorter sides score more");
        assert!(bm25(2.0, 1000, 0, 5.0) < 2.0 * 2.2, "bounded by idf·(k1+1)");
        assert_eq!(recency(10, 10), 1.0);
        assert_eq!(recency(0, 50), 0.0);
        assert_eq!(recency(0, 80), 0.0);
        assert!((recency(40, 50) - 0.8).abs() < 1e-12);
    }
}
