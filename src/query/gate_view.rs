//! The topic gate run against a session's history in a view (DESIGN §3.2): the window `A(T)`
//! of the current segment's latest turns, read from pending rows or stored text. One
//! implementation for the query pipeline (`gate`, the gate decision of a query) and for the
//! write path (`gate_hashed`, the decision stored with each turn as it is added).

use crate::anchor::{self, HashedAnchor};
use crate::error::Result;
use crate::gate::{self, GateDecision};
use crate::query::anchors::{QueryAnchors, weigh};
use crate::store::records::{ForwardRecord, SessionRecord, TurnRecord};
use crate::store::{Source, View};
use crate::types::anchor_hash;

/// DESIGN §3.2: the topic `A(T)` is the anchors of the current segment's latest turns, at most
/// this many: the latest exchange and the one before. A follow-up refers to what was just said;
/// older turns of a long segment (or of two topics a missed switch joined) share the everyday
/// vocabulary of a conversation and hide a switch. Measured against 1, 3, 4 and 8 turns
/// in `docs/relevance.md`.
pub const GATE_WINDOW_TURNS: u32 = 2;

/// A session as the pipeline sees it: its id and stored record.
pub struct SessionRef<'a> {
    /// Session id.
    pub id: u32,
    /// Stored record.
    pub record: &'a SessionRecord,
}

/// A query judged by the gate.
pub struct Gated {
    /// The query's anchors.
    pub query: QueryAnchors,
    /// The decision.
    pub decision: GateDecision,
    /// The query's framing words and CJK trigrams, which the pipeline reads no lists for:
    /// worked out once, for the gate and the pipeline.
    pub filter: GateFilter,
}

/// The gate's decision for `text` as the next user message after turns `0..as_of`.
pub fn gate<S: Source>(
    view: &View<S>,
    session: Option<&SessionRef<'_>>,
    as_of: u32,
    text: &str,
) -> Result<Gated> {
    let blocks = view.corpus_stats().blocks;
    let query = QueryAnchors::build(text, &anchor::extract(text), blocks, |h| view.df(h))?;
    let filter = GateFilter::of(text);
    let decision = decide(view, session, as_of, text, query.gate_weights(), &filter)?;
    Ok(Gated { query, decision, filter })
}

/// [`gate`] for the user text of a turn being added, from its hashed anchors and its
/// [`GateFilter`], with the document frequencies `df` gives ([`View::df`], or a bulk writer's,
/// which counts its batch's turns itself): the same weights (`anchors::weigh`), so the stored
/// decision equals what [`gate`] says for that text against the same index (tested to the bit).
pub fn gate_hashed<S: Source>(
    view: &View<S>,
    session: &SessionRef<'_>,
    as_of: u32,
    text: &str,
    anchors: &[HashedAnchor],
    filter: &GateFilter,
    df: impl FnMut(u64) -> Result<u64>,
) -> Result<GateDecision> {
    let blocks = view.corpus_stats().blocks;
    let (weights, _) = weigh(anchors.iter().map(|a| (a.hash, a.cjk_ngram)), text, blocks, df)?;
    decide(view, Some(session), as_of, text, &weights, filter)
}

/// The anchors of a text the gate leaves out. Framing words say how a question is asked; they
/// are evidence of neither topic. CJK text takes part through its 2-grams only (see
/// `anchor::cjk_trigram_hashes`). Derived from the text alone, so a bulk writer computes it in
/// parallel, before its transaction.
#[derive(Debug, Clone, Default)]
pub struct GateFilter {
    framing: Vec<u64>,
    trigrams: Vec<u64>,
}

impl GateFilter {
    /// The filter of `text`.
    pub fn of(text: &str) -> Self {
        GateFilter {
            framing: anchor::framing_hashes(text, anchor_hash),
            trigrams: anchor::cjk_trigram_hashes(text, anchor_hash),
        }
    }

    /// The filter from a user message's [`anchor::extract_user`] parts, each sorted and
    /// without repeats (lookups are binary searches).
    pub fn from_parts(framing: Vec<u64>, trigrams: Vec<u64>) -> Self {
        GateFilter { framing, trigrams }
    }

    /// Bytes it holds on the heap.
    pub fn heap_bytes(&self) -> usize {
        (self.framing.capacity() + self.trigrams.capacity()) * size_of::<u64>()
    }

    /// The hashes of the text's framing words, sorted.
    pub fn framing(&self) -> &[u64] {
        &self.framing
    }

    fn keeps(&self, hash: u64) -> bool {
        self.framing.binary_search(&hash).is_err() && self.trigrams.binary_search(&hash).is_err()
    }
}

fn decide<S: Source>(
    view: &View<S>,
    session: Option<&SessionRef<'_>>,
    as_of: u32,
    text: &str,
    weights: &[(u64, f64)],
    filter: &GateFilter,
) -> Result<GateDecision> {
    let window = match session {
        Some(s) if as_of > 0 => topic_window(view, s, as_of)?,
        _ => Vec::new(),
    };
    // Sized for all of them: collected from a filter, the list grew by reallocations, three or
    // four for each turn a bulk import gates.
    let mut kept: Vec<(u64, f64)> = Vec::with_capacity(weights.len());
    kept.extend(weights.iter().copied().filter(|(hash, _)| filter.keeps(*hash)));
    let weights = kept;
    // Which weights the window has, by walking both in hash order: a search of a window turn
    // for each weight missed the cache at most of its probes (a bulk writer's turns come from
    // another thread).
    let mut in_window = vec![false; weights.len()];
    for turn in &window {
        turn.mark(&weights, &mut in_window);
    }
    gate::decide(
        text,
        &weights,
        |hash| weights.binary_search_by_key(&hash, |w| w.0).is_ok_and(|i| in_window[i]),
        || previous_asks(view, session, as_of),
    )
}

/// Whether the answer of turn `as_of - 1` ended by asking the user a question.
fn previous_asks<S: Source>(view: &View<S>, session: Option<&SessionRef<'_>>, as_of: u32) -> Result<bool> {
    let (Some(session), Some(previous)) = (session, as_of.checked_sub(1)) else { return Ok(false) };
    Ok(view.turn_record(session.id, previous)?.is_some_and(|turn| gate::asks_question(&turn.assistant)))
}

/// One turn of the topic window `A(T)`: its anchor hashes, sorted.
enum WindowTurn<'v> {
    /// A pending turn: its anchors are in memory.
    Pending(&'v ForwardRecord),
    /// A folded turn: anchors extracted again from its text (the same rules give the same ones).
    Folded(Vec<u64>),
}

impl WindowTurn<'_> {
    /// Sets `marks[i]` when the turn has the anchor of `weights[i]`; `weights` ascend by hash.
    fn mark(&self, weights: &[(u64, f64)], marks: &mut [bool]) {
        match self {
            WindowTurn::Pending(forward) => mark_sorted(forward.entries.iter().map(|e| e.0), weights, marks),
            WindowTurn::Folded(hashes) => mark_sorted(hashes.iter().copied(), weights, marks),
        }
    }
}

/// [`WindowTurn::mark`] for a turn's hashes in ascending order (repeats allowed): one merge.
fn mark_sorted(hashes: impl Iterator<Item = u64>, weights: &[(u64, f64)], marks: &mut [bool]) {
    debug_assert!(weights.windows(2).all(|w| w[0].0 <= w[1].0), "weights ascend by hash");
    let mut hashes = hashes.peekable();
    for (&(hash, _), mark) in weights.iter().zip(marks) {
        while hashes.next_if(|&h| h < hash).is_some() {}
        if hashes.peek() == Some(&hash) {
            *mark = true;
        }
    }
}

/// The first turn of the topic segment that turn `as_of - 1` belongs to (0 for `as_of` 0).
pub(crate) fn segment_start<S: Source>(view: &View<S>, session: &SessionRef<'_>, as_of: u32) -> Result<u32> {
    Ok(match as_of.checked_sub(1) {
        None => 0,
        Some(_) if as_of == session.record.turn_count => session.record.segment_start,
        Some(last) => view.turn_record(session.id, last)?.map_or(0, |t| t.segment_start),
    })
}

/// `A(T)` as of `as_of`: the segment's latest [`GATE_WINDOW_TURNS`] turns.
fn topic_window<'v, S: Source>(
    view: &'v View<S>,
    session: &SessionRef<'_>,
    as_of: u32,
) -> Result<Vec<WindowTurn<'v>>> {
    let start = segment_start(view, session, as_of)?.max(as_of.saturating_sub(GATE_WINDOW_TURNS));
    let mut window = Vec::new();
    for turn in start..as_of {
        if let Some(forward) = view.pending().get(session.id, turn) {
            window.push(WindowTurn::Pending(forward));
        } else if let Some(record) = view.turn_record(session.id, turn)? {
            window.push(WindowTurn::Folded(turn_hashes(&record)));
        }
    }
    Ok(window)
}

/// A stored turn's anchor hashes, both sides, sorted (repeats kept): the same rules give the
/// anchors its postings hold.
pub(crate) fn turn_hashes(turn: &TurnRecord) -> Vec<u64> {
    let mut hashes: Vec<u64> = [&turn.user, &turn.assistant]
        .iter()
        .flat_map(|text| anchor::extract_hashed(text, anchor_hash))
        .map(|a| a.hash)
        .collect();
    hashes.sort_unstable();
    hashes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_turn_marks_the_weights_it_has() {
        let weights = [(2, 1.0), (5, 1.0), (9, 1.0), (u64::MAX, 1.0)];
        let mut marks = [false; 4];
        // Repeats (a folded turn's hashes of both sides), and hashes between and past the weights.
        mark_sorted([1, 2, 2, 6, 9, 9, 10].into_iter(), &weights, &mut marks);
        assert_eq!(marks, [true, false, true, false]);
        mark_sorted([5, u64::MAX].into_iter(), &weights, &mut marks);
        assert_eq!(marks, [true, true, true, true], "marks add up over the window's turns");
        let mut none = [false; 4];
        mark_sorted(std::iter::empty(), &weights, &mut none);
        assert_eq!(none, [false; 4]);
    }
}
