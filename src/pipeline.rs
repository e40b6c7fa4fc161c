//! One query through the index: gate, recall, content-word filter, pruning, selection
//! (DESIGN §3.2–§3.6), all inside one consistent view of the store.

use crate::anchor::{self, AnchorCounts};
use crate::error::Result;
use crate::gate::{self, ContentWords, GateDecision, Topic};
use crate::prune;
use crate::query::QueryAnchors;
use crate::recall::{self, Candidate, RECALL_LIMIT, RecallContext};
use crate::select::{self, Offer, Policy};
use crate::store::postings::Posting;
use crate::store::records::{ForwardRecord, SessionRecord};
use crate::store::{Source, View, anchor_hash};
use crate::tokens::TokenEstimator;
use std::collections::HashSet;

/// DESIGN §3.2: the topic `A(T)` is the anchors of the current segment's latest turns, at most
/// this many. A long segment drifts; its latest turns are what a follow-up refers to.
pub const GATE_WINDOW_TURNS: u32 = 8;

/// A session as the pipeline sees it: its id and stored record.
pub struct SessionRef<'a> {
    /// Session id.
    pub id: u32,
    /// Stored record.
    pub record: &'a SessionRecord,
}

/// The gate's decision for `text` as the next user message after turns `0..as_of`.
pub fn gate<S: Source>(
    view: &View<S>,
    session: Option<&SessionRef<'_>>,
    as_of: u32,
    text: &str,
) -> Result<(QueryAnchors, GateDecision)> {
    gate_with_anchors(view, session, as_of, text, &anchor::extract(text))
}

/// [`gate`] for a text whose anchors are already extracted.
pub fn gate_with_anchors<S: Source>(
    view: &View<S>,
    session: Option<&SessionRef<'_>>,
    as_of: u32,
    text: &str,
    counts: &AnchorCounts,
) -> Result<(QueryAnchors, GateDecision)> {
    let blocks = view.corpus_stats().blocks;
    let query = QueryAnchors::build(text, counts, blocks, |h| view.df(h))?;
    let topic = match session {
        Some(s) if as_of > 0 => topic_anchors(view, s, as_of)?,
        _ => HashSet::new(),
    };
    let decision = gate::decide(text, query.anchors(), |a| topic.contains(&a.hash));
    Ok((query, decision))
}

/// `A(T)` as of `as_of`: anchor hashes of the segment's latest [`GATE_WINDOW_TURNS`] turns.
fn topic_anchors<S: Source>(view: &View<S>, session: &SessionRef<'_>, as_of: u32) -> Result<HashSet<u64>> {
    let last = as_of - 1;
    let segment_start = if as_of == session.record.turn_count {
        session.record.segment_start
    } else {
        view.turn_record(session.id, last)?.map_or(0, |t| t.segment_start)
    };
    let start = segment_start.max(as_of.saturating_sub(GATE_WINDOW_TURNS));
    let mut anchors = HashSet::new();
    for turn in start..as_of {
        if let Some(forward) = forward_of(view, session.id, turn)? {
            anchors.extend(forward.entries.iter().map(|e| e.0));
        }
    }
    Ok(anchors)
}

fn forward_of<S: Source>(view: &View<S>, session: u32, turn: u32) -> Result<Option<ForwardRecord>> {
    Ok(view.forward_record(session, turn)?)
}

/// What [`select`] returns before it is shaped for callers.
pub struct Outcome {
    /// The query's anchors.
    pub query: QueryAnchors,
    /// The gate's decision.
    pub decision: GateDecision,
    /// Chosen blocks in chronological order.
    pub blocks: Vec<ChosenBlock>,
    /// Tokens the chosen blocks cost (without per-block overhead).
    pub used_tokens: u32,
    /// Query anchors covered by the chosen blocks.
    pub covered: u64,
}

/// One chosen block.
pub struct ChosenBlock {
    /// Turn id.
    pub turn: u32,
    /// Pruned user text.
    pub user: String,
    /// Pruned assistant text.
    pub assistant: String,
    /// Recall score.
    pub score: f64,
    /// Query anchors this block covered first.
    pub newly_covered: u64,
    /// Token estimate of the pruned text.
    pub tokens: u32,
}

/// Parameters of one selection.
pub struct SelectParams<'a> {
    /// Turns `0..as_of` of the session are the history.
    pub as_of: u32,
    /// Token budget for the blocks.
    pub budget: u32,
    /// Tokens each chosen block costs beyond its text (prompt framing).
    pub block_overhead: u32,
    /// Selection policy.
    pub policy: Policy,
    /// The token estimator.
    pub estimator: &'a dyn TokenEstimator,
}

/// Runs the whole pipeline for `text` against the history of `session`.
pub fn select<S: Source>(
    view: &View<S>,
    session: &SessionRef<'_>,
    text: &str,
    params: &SelectParams<'_>,
) -> Result<Outcome> {
    let (query, decision) = gate(view, Some(session), params.as_of, text)?;
    let candidates = recall_candidates(view, session.id, &query, params.as_of)?;
    let content_words = (decision.topic == Topic::Switch).then(|| ContentWords::of(text));

    // The top RECALL_LIMIT candidates that pass the content-word filter, pruned.
    let mut offers = Vec::new();
    let mut pruned = Vec::new();
    let mut recalled = 0;
    for candidate in &candidates {
        if recalled == RECALL_LIMIT {
            break;
        }
        let Some(turn) = view.turn_record(session.id, candidate.turn)? else { continue };
        if let Some(words) = &content_words {
            let admitted = words.admits(&turn.user) || words.admits(&turn.assistant);
            if !admitted {
                continue; // score 0: filtered (DESIGN §3.3)
            }
        }
        recalled += 1;
        let Some(block) = prune::prune(&turn.user, &turn.assistant, &query) else { continue };
        let tokens = params.estimator.estimate(&block.user) + params.estimator.estimate(&block.assistant);
        offers.push(Offer {
            turn: candidate.turn,
            tokens: tokens + params.block_overhead,
            matched: block.matched,
        });
        pruned.push((candidate, block, tokens));
    }

    let picks = select::choose(&query, &offers, params.budget, params.policy);
    let mut covered = 0;
    let mut used_tokens = 0;
    let mut blocks: Vec<ChosenBlock> = picks
        .iter()
        .map(|pick| {
            let (candidate, block, tokens) = &pruned[pick.offer];
            covered |= block.matched;
            used_tokens += tokens;
            ChosenBlock {
                turn: candidate.turn,
                user: block.user.clone(),
                assistant: block.assistant.clone(),
                score: candidate.score,
                newly_covered: pick.newly_covered,
                tokens: *tokens,
            }
        })
        .collect();
    blocks.sort_by_key(|b| b.turn);
    Ok(Outcome { query, decision, blocks, used_tokens, covered })
}

/// Scores the session's turns `0..as_of` that share an anchor with the query, ranked.
fn recall_candidates<S: Source>(
    view: &View<S>,
    session: u32,
    query: &QueryAnchors,
    as_of: u32,
) -> Result<Vec<Candidate>> {
    let stats = view.corpus_stats();
    let mut postings: Vec<Vec<Posting>> = Vec::with_capacity(query.len());
    for anchor in query.anchors() {
        let mut list = Vec::new();
        view.session_postings(anchor.hash, session, |p| {
            if p.turn < as_of {
                list.push(p);
            }
        })?;
        for (turn, forward) in view.pending().of_session(session) {
            if turn >= as_of {
                break;
            }
            if let Some((tf_user, tf_assistant)) = forward.get(anchor.hash) {
                list.push(Posting {
                    turn,
                    tf_user,
                    tf_assistant,
                    len_user: forward.len_user,
                    len_assistant: forward.len_assistant,
                });
            }
        }
        postings.push(list);
    }
    let context = RecallContext {
        avg_len_user: stats.avg_len_user,
        avg_len_assistant: stats.avg_len_assistant,
        current_turn: as_of,
    };
    Ok(recall::score(query, &postings, &context))
}

/// Anchors of a new turn as a forward record: per-side tf merged by anchor hash.
pub fn forward_record(user: &AnchorCounts, assistant: &AnchorCounts) -> ForwardRecord {
    let mut entries: Vec<(u64, u32, u32)> = user
        .entries()
        .iter()
        .map(|(a, tf)| (anchor_hash(a), *tf, 0))
        .chain(assistant.entries().iter().map(|(a, tf)| (anchor_hash(a), 0, *tf)))
        .collect();
    entries.sort_unstable_by_key(|e| e.0);
    let mut merged: Vec<(u64, u32, u32)> = Vec::with_capacity(entries.len());
    for (hash, tf_user, tf_assistant) in entries {
        match merged.last_mut() {
            Some(last) if last.0 == hash => {
                last.1 += tf_user;
                last.2 += tf_assistant;
            }
            _ => merged.push((hash, tf_user, tf_assistant)),
        }
    }
    ForwardRecord { len_user: user.total(), len_assistant: assistant.total(), entries: merged }
}
