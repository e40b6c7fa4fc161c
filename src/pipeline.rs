//! One query through the index: gate, recall, content-word filter, pruning, selection
//! (DESIGN §3.2–§3.6), all inside one consistent view of the store.

use crate::anchor::{self, HashedAnchor};
use crate::error::Result;
use crate::evidence_recall;
use crate::gate::{self, ContentWords, GateDecision, Topic};
use crate::prune;
use crate::query::{self, QueryAnchors};
use crate::recall::{self, RECALL_LIMIT, RecallContext};
use crate::select::{self, Offer, Policy};
use crate::store::postings::Posting;
use crate::store::records::{ForwardRecord, SessionRecord, TurnRecord};
use crate::store::{Source, View, anchor_hash};
use crate::tokens::TokenEstimator;
use std::cmp::Ordering;

/// Candidates looked at, best first, to find the [`RECALL_LIMIT`] that pass the filters.
pub const MAX_SCANNED: usize = 10 * RECALL_LIMIT;

/// Candidates `fill` looks at, at most, to spend its budget past the top [`RECALL_LIMIT`]
/// (it stops earlier once its offers could fill the budget twice over): bounds the turns one
/// query reads.
pub const MAX_FILL_SCANNED: usize = 2000;

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
    let decision = decide(view, session, as_of, text, query.gate_weights(), &GateFilter::of(text))?;
    Ok(Gated { query, decision })
}

/// [`gate`] for the user text of a turn being added, from its hashed anchors and its
/// [`GateFilter`], with the document frequencies `df` gives ([`View::df`], or a bulk writer's,
/// which counts its batch's turns itself): the same weights (`query::weigh`), so the stored
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
    let (weights, _) = query::weigh(anchors.iter().map(|a| (a.hash, a.cjk_ngram)), text, blocks, df)?;
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
fn segment_start<S: Source>(view: &View<S>, session: &SessionRef<'_>, as_of: u32) -> Result<u32> {
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

/// On a continue the query belongs with the current topic segment: a turn from before it
/// covers, in the greedy, only the query anchors no turn of the segment has. Otherwise a cheaper
/// turn of another conversation that repeats a name or a domain word (`hotel`, `导演`) wins over
/// the segment's own turn, which is how selections drew most of their context from other
/// dialogues in long real histories (`docs/relevance.md`). Such turns still answer what the
/// segment lacks, and `fill` may still spend the budget on them.
/// Only segment turns that fit the budget count: one that never could would leave the anchor
/// uncovered.
fn topic_first(offers: &mut [Offer], segment_start: u32, budget: u32) {
    let segment_has = offers
        .iter()
        .filter(|o| o.turn >= segment_start && o.tokens <= budget)
        .fold(0, |mask, o| mask | o.matched);
    for offer in offers.iter_mut().filter(|o| o.turn < segment_start) {
        offer.covers = offer.matched & !segment_has;
    }
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
    /// Chosen evidence projections, in the order they were chosen.
    pub evidence: Vec<ChosenEvidence>,
}

/// One chosen evidence projection.
pub struct ChosenEvidence {
    /// Its ref.
    pub reference: String,
    /// Its kind.
    pub kind: String,
    /// The projection, compact JSON.
    pub projection: String,
    /// Evidence recall score.
    pub score: f64,
    /// Query anchors it covered first.
    pub newly_covered: u64,
    /// Token estimate of the projection.
    pub tokens: u32,
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
    /// Offer evidence projections too.
    pub evidence: bool,
    /// Tokens each chosen projection costs beyond its text (prompt framing).
    pub evidence_overhead: u32,
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
    let Gated { query, decision } = gate(view, Some(session), params.as_of, text)?;
    let switch = decision.topic == Topic::Switch;
    // Framing words identify nothing: their (long) posting lists are not read at all.
    let scored = query.full_mask() & !framing_mask(&query, text);
    let postings = session_postings(view, session.id, &query, scored, params.as_of)?;
    let focus = focus_anchors(&query, &postings);
    log::debug!("{:?}: {:?}, focus {:?}", text, decision.topic, query.texts_of(focus));
    let context = recall_context(view, params.as_of);
    let candidates = recall::Ranking::new(recall::score(&query, &postings, scored, &context));
    let content_words = switch.then(|| ContentWords::of(text));
    let content_terms =
        content_words.as_ref().map_or(0, |w| w.term_mask(query.anchors().iter().map(|a| a.text.as_str())));

    // The top RECALL_LIMIT candidates that pass the content-word filter and hold a focus
    // anchor, pruned: what the greedy chooses from. At most MAX_SCANNED are looked at: past them
    // a turn is too weak to matter, and a query whose candidates all fail the filter stays fast.
    // `fill` reads on, past the top RECALL_LIMIT and including turns that hold only common
    // anchors (its second tier), until its focus offers could fill the budget twice over (some
    // will not fit) or MAX_FILL_SCANNED were looked at.
    let named = query.specific(scored) & !pattern_anchors(&query, decision.deictic) & !query.fallback_mask();
    let pinned = deictic_pin(view, session, &query, named, &decision, params)?;
    let pinned_turn = pinned.as_ref().map(|p| p.turn);
    let fill = params.policy == Policy::Fill;
    let scan_limit = if fill { MAX_FILL_SCANNED } else { MAX_SCANNED };
    let admitted = |c: &recall::Candidate| fill || c.matched & focus != 0;
    let mut offers = Vec::new();
    let mut pruned = Vec::new();
    let (mut recalled, mut focus_tokens) = (0, 0u64);
    for candidate in candidates.take(scan_limit).filter(admitted) {
        if recalled >= RECALL_LIMIT && (!fill || focus_tokens >= 2 * u64::from(params.budget)) {
            break;
        }
        if let Some(words) = &content_words
            && candidate.matched & content_terms == 0
            && !words.needs_text()
        {
            continue; // no content word: score 0 (DESIGN §3.3)
        }
        if Some(candidate.turn) == pinned_turn {
            continue;
        }
        let Some(turn) = view.turn_record(session.id, candidate.turn)? else { continue };
        if let Some(words) = &content_words
            && candidate.matched & content_terms == 0
            && !(words.admits(&turn.user) || words.admits(&turn.assistant))
        {
            continue;
        }
        let holds_focus = candidate.matched & focus != 0;
        let in_greedy = holds_focus && recalled < RECALL_LIMIT;
        if holds_focus {
            recalled += 1;
        }
        let prune_by = if holds_focus { focus } else { query.full_mask() };
        let Some(block) = prune::prune(&turn.user, &turn.assistant, &query, prune_by) else { continue };
        let estimate = |user: &str, assistant: &str| {
            params.estimator.estimate(user) + params.estimator.estimate(assistant) + params.block_overhead
        };
        let tokens = estimate(&block.user, &block.assistant);
        let whole_tokens = if fill { estimate(&turn.user, &turn.assistant).max(tokens) } else { tokens };
        if holds_focus {
            focus_tokens += u64::from(tokens);
        }
        offers.push(Offer {
            turn: candidate.turn,
            tokens,
            matched: block.matched,
            covers: block.matched,
            in_greedy,
            whole_tokens,
        });
        pruned.push((candidate, block));
    }
    if !switch {
        // Turn offers only: the evidence projections are offered below.
        let start = segment_start(view, session, params.as_of)?;
        if pinned.is_some() {
            // What a deictic follow-up adds to "this" is phrasing: older turns that repeat it
            // cover nothing (`fill` may still spend the budget on them).
            offers.iter_mut().filter(|o| o.turn < start).for_each(|o| o.covers = 0);
        } else {
            topic_first(&mut offers, start, params.budget);
        }
    }

    // Evidence projections compete in the same greedy: a projection is a block whose cost is
    // its own size and whose coverage is the query anchors it shows (documents are found by
    // everything in them, see `evidence_recall`). Ties go to turns.
    let turn_offers = offers.len();
    let evidence = if params.evidence {
        evidence_recall::recall(view, session.id, &query, scored)?
    } else {
        evidence_recall::EvidenceRecall::default()
    };
    let mut evidence_tokens = Vec::with_capacity(evidence.candidates.len());
    for candidate in &evidence.candidates {
        let tokens = params.estimator.estimate(&candidate.record.projection);
        evidence_tokens.push(tokens);
        offers.push(Offer {
            turn: u32::MAX,
            tokens: tokens.saturating_add(params.evidence_overhead),
            matched: candidate.matched,
            covers: candidate.matched,
            in_greedy: true,
            whole_tokens: tokens.saturating_add(params.evidence_overhead),
        });
    }

    let pinned_cost = pinned.as_ref().map_or(0, |p| p.tokens + params.block_overhead);
    // What the greedy must cover: for `minimal`, every anchor the history holds (a name, a
    // common word), so a second turn with the focus anchors and the rest is taken; which turns
    // may be taken is still the focus's say (`admitted`). `fill` starts from the focus alone and
    // spends the budget in rank order, which measured better than the greedy's cheaper picks.
    let must_cover = match params.policy {
        Policy::Minimal => held_mask(&postings),
        Policy::Fill => focus,
    };
    let picks = select::choose(
        &query,
        &offers,
        params.budget - pinned_cost,
        params.policy,
        must_cover | evidence.focus,
    );
    let mut covered = pinned.as_ref().map_or(0, |p| p.newly_covered);
    let mut used_tokens = pinned.as_ref().map_or(0, |p| p.tokens);
    let mut chosen_evidence = Vec::new();
    for pick in picks.iter().filter(|p| p.offer >= turn_offers) {
        let candidate = &evidence.candidates[pick.offer - turn_offers];
        let tokens = evidence_tokens[pick.offer - turn_offers];
        covered |= candidate.matched;
        used_tokens += tokens;
        chosen_evidence.push(ChosenEvidence {
            reference: candidate.record.reference.clone(),
            kind: candidate.record.kind.clone(),
            projection: candidate.record.projection.clone(),
            score: candidate.score,
            newly_covered: pick.newly_covered,
            tokens,
        });
    }
    let pinned_covered = covered;
    let mut blocks: Vec<ChosenBlock> = pinned.into_iter().collect();
    for pick in picks.iter().filter(|p| p.offer < turn_offers) {
        let (candidate, block) = &pruned[pick.offer];
        covered |= block.matched;
        let whole = if pick.whole { view.turn_record(session.id, candidate.turn)? } else { None };
        let (user, assistant) = match whole {
            Some(turn) => (turn.user, turn.assistant),
            None => (block.user.clone(), block.assistant.clone()),
        };
        let offer = &offers[pick.offer];
        let tokens = if pick.whole { offer.whole_tokens } else { offer.tokens } - params.block_overhead;
        used_tokens += tokens;
        blocks.push(ChosenBlock {
            turn: candidate.turn,
            user,
            assistant,
            score: candidate.score,
            newly_covered: pick.newly_covered & !pinned_covered,
            tokens,
        });
    }
    blocks.sort_by_key(|b| b.turn);
    Ok(Outcome { query, decision, blocks, used_tokens, covered, evidence: chosen_evidence })
}

/// The query anchors the session's history holds (framing words have no postings here).
fn held_mask(postings: &[Vec<Posting>]) -> u64 {
    (0..postings.len()).filter(|&i| !postings[i].is_empty()).fold(0, |m, i| m | (1u64 << i))
}

/// A stored turn's anchor hashes, both sides, sorted (repeats kept): the same rules give the
/// anchors its postings hold.
fn turn_hashes(turn: &TurnRecord) -> Vec<u64> {
    let mut hashes: Vec<u64> = [&turn.user, &turn.assistant]
        .iter()
        .flat_map(|text| anchor::extract_hashed(text, anchor_hash))
        .map(|a| a.hash)
        .collect();
    hashes.sort_unstable();
    hashes
}

/// The query anchors whose hash is in `sorted`.
fn anchors_among(query: &QueryAnchors, sorted: &[u64]) -> u64 {
    query
        .anchors()
        .iter()
        .enumerate()
        .fold(0, |mask, (i, a)| if sorted.binary_search(&a.hash).is_ok() { mask | (1u64 << i) } else { mask })
}

/// The query anchors that are words of the deictic pattern the gate matched (`then` of
/// `^and then`): they make the query a follow-up and name nothing.
fn pattern_anchors(query: &QueryAnchors, pattern: Option<&str>) -> u64 {
    let Some(pattern) = pattern else { return 0 };
    let words = pattern.replace("\\b", " ").replace(['^', '(', ')', '|', '?', '*'], " ");
    let mut hashes: Vec<u64> =
        anchor::extract_hashed(&words, anchor_hash).into_iter().map(|a| a.hash).collect();
    hashes.sort_unstable();
    anchors_among(query, &hashes)
}

/// A deictic follow-up on the current topic that names nothing the topic's latest turn lacks
/// ("那这个呢？", "go on, what else?", a short reply to the question the last turn asked)
/// refers to what was just said: that turn is its context, whatever words older turns share
/// with it. `named` are the query's specific anchors. It is handed over first, whole
/// if it fits the budget, else pruned to the query; the greedy then spends the rest. Its score
/// is 0: it is not recalled.
fn deictic_pin<S: Source>(
    view: &View<S>,
    session: &SessionRef<'_>,
    query: &QueryAnchors,
    named: u64,
    decision: &GateDecision,
    params: &SelectParams<'_>,
) -> Result<Option<ChosenBlock>> {
    let Some(latest) = params.as_of.checked_sub(1) else { return Ok(None) };
    if decision.topic != Topic::Continue || decision.deictic.is_none() {
        return Ok(None);
    }
    let Some(turn) = view.turn_record(session.id, latest)? else { return Ok(None) };
    let estimate =
        |user: &str, assistant: &str| params.estimator.estimate(user) + params.estimator.estimate(assistant);
    let matched = prune::prune(&turn.user, &turn.assistant, query, query.full_mask());
    let held_mask = anchors_among(query, &turn_hashes(&turn));
    if named & !held_mask != 0 {
        // The query names something the latest turn does not hold ("thanks, that helps; one more
        // problem: the readiness probe"): recall finds its context, and the gate may have
        // taken a new subject for a follow-up. Telling a named subject from shared phrasing
        // (`怎么配置比较好`) needs statistics the index does not keep yet.
        return Ok(None);
    }
    let whole = estimate(&turn.user, &turn.assistant);
    let (user, assistant, tokens) = if whole + params.block_overhead <= params.budget {
        (turn.user, turn.assistant, whole)
    } else if let Some(block) = &matched
        && estimate(&block.user, &block.assistant) + params.block_overhead <= params.budget
    {
        (block.user.clone(), block.assistant.clone(), estimate(&block.user, &block.assistant))
    } else {
        return Ok(None);
    };
    let newly_covered = matched.map_or(0, |b| b.matched);
    Ok(Some(ChosenBlock { turn: latest, user, assistant, score: 0.0, newly_covered, tokens }))
}

/// The postings of each query anchor in `wanted` (others get an empty list) in the session's
/// turns `0..as_of`, folded and pending.
fn session_postings<S: Source>(
    view: &View<S>,
    session: u32,
    query: &QueryAnchors,
    wanted: u64,
    as_of: u32,
) -> Result<Vec<Vec<Posting>>> {
    let mut postings: Vec<Vec<Posting>> = Vec::with_capacity(query.len());
    for (i, anchor) in query.anchors().iter().enumerate() {
        let mut list = Vec::new();
        if wanted & (1u64 << i) == 0 {
            postings.push(list);
            continue;
        }
        view.session_postings(anchor.hash, session, |p| {
            if p.turn < as_of {
                list.push(p);
            }
        })?;
        for (turn, forward) in view.pending().of_session(session) {
            if turn >= as_of {
                break;
            }
            list.extend(forward.posting(turn, anchor.hash));
        }
        postings.push(list);
    }
    Ok(postings)
}

fn recall_context<S: Source>(view: &View<S>, as_of: u32) -> RecallContext {
    let stats = view.corpus_stats();
    RecallContext {
        avg_len_user: stats.avg_len_user,
        avg_len_assistant: stats.avg_len_assistant,
        current_turn: as_of,
    }
}

/// The query anchors that must be covered and that admit a block (DESIGN §3.3: "which
/// anchors must be covered, and which may admit a block").
///
/// Of the anchors the session's history contains that are not framing words
/// (`anchor::framing`), the focus is those at least as specific as their mean: IDF at or above the
/// mean IDF of that set. The rarest shared anchors say what the query is about; much more
/// common ones (a person's name repeated every turn, `production`, `error`) are context, and
/// buying coverage of them is how off-topic fragments get selected. The mean is a statistic of
/// the query itself, not a tuned constant. Empty when nothing qualifies: `minimal` then selects
/// nothing, since what the history shares with the query is phrasing, not evidence.
fn focus_anchors(query: &QueryAnchors, postings: &[Vec<Posting>]) -> u64 {
    // Framing anchors have no postings here (they are not read), so they never qualify.
    query.specific(held_mask(postings))
}

/// The query anchors that are framing words.
pub(crate) fn framing_mask(query: &QueryAnchors, text: &str) -> u64 {
    anchors_among(query, &anchor::framing_hashes(text, anchor_hash))
}

/// Anchors of a new turn as a forward record: per-side tf merged by anchor hash.
pub fn forward_record(user: &[HashedAnchor], assistant: &[HashedAnchor]) -> ForwardRecord {
    // Both sides are sorted by hash: merge them. By index: the compiler keeps two indices in
    // registers, where two peekable iterators went through memory at every step.
    let mut entries: Vec<(u64, u32, u32)> = Vec::with_capacity(user.len() + assistant.len());
    let (mut i, mut j) = (0, 0);
    while let (Some(u), Some(a)) = (user.get(i), assistant.get(j)) {
        entries.push(match u.hash.cmp(&a.hash) {
            Ordering::Less => (u.hash, u.tf, 0),
            Ordering::Greater => (a.hash, 0, a.tf),
            Ordering::Equal => (u.hash, u.tf, a.tf),
        });
        i += usize::from(u.hash <= a.hash);
        j += usize::from(a.hash <= u.hash);
    }
    entries.extend(user.get(i..).unwrap_or_default().iter().map(|u| (u.hash, u.tf, 0)));
    entries.extend(assistant.get(j..).unwrap_or_default().iter().map(|a| (a.hash, 0, a.tf)));
    let total = |side: &[HashedAnchor]| side.iter().map(|a| a.tf).sum();
    ForwardRecord { len_user: total(user), len_assistant: total(assistant), entries }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn forward_record_adds_up_both_sides() {
        let user = anchor::extract_hashed("Redis lock: redis SETNX with a TTL, 分布式锁", anchor_hash);
        let assistant =
            anchor::extract_hashed("a redis lock needs a lease; 分布式 lease renewal", anchor_hash);
        let mut expected: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
        for a in &user {
            expected.entry(a.hash).or_default().0 += a.tf;
        }
        for a in &assistant {
            expected.entry(a.hash).or_default().1 += a.tf;
        }
        let record = forward_record(&user, &assistant);
        let entries: Vec<(u64, u32, u32)> = expected.into_iter().map(|(h, (u, a))| (h, u, a)).collect();
        assert_eq!(record.entries, entries, "one entry per anchor of either side, ascending hash");
        let total = |side: &[HashedAnchor]| side.iter().map(|a| a.tf).sum::<u32>();
        assert_eq!((record.len_user, record.len_assistant), (total(&user), total(&assistant)));
        assert_eq!(forward_record(&[], &assistant).entries.len(), assistant.len());
    }

    #[test]
    fn older_turns_cover_only_what_the_segment_lacks() {
        let offer = |turn, matched| Offer {
            turn,
            tokens: 10,
            matched,
            covers: matched,
            in_greedy: true,
            whole_tokens: 10,
        };
        let mut offers = [offer(3, 0b011), offer(12, 0b001), offer(15, 0b100), offer(4, 0b1000)];
        topic_first(&mut offers, 10, 100);
        let covers: Vec<u64> = offers.iter().map(|o| o.covers).collect();
        assert_eq!(covers, [0b010, 0b001, 0b100, 0b1000]);
        assert!(offers.iter().zip([0b011, 0b001, 0b100, 0b1000]).all(|(o, m)| o.matched == m));
        // a segment starting at turn 0 holds every turn
        let mut all = [offer(3, 0b011), offer(12, 0b001)];
        topic_first(&mut all, 0, 100);
        assert_eq!(all.map(|o| o.covers), [0b011, 0b001]);
        // a segment turn over the budget cannot cover anything
        let mut tight = [offer(3, 0b011), Offer { tokens: 500, ..offer(12, 0b001) }];
        topic_first(&mut tight, 10, 100);
        assert_eq!(tight[0].covers, 0b011);
    }

    #[test]
    fn the_words_of_a_deictic_pattern_name_nothing() {
        let text = "what else about the lease";
        let q = QueryAnchors::build(text, &anchor::extract(text), 10, |_| Ok::<_, ()>(1)).unwrap();
        let bit = |t: &str| 1u64 << q.anchors().iter().position(|a| a.text == t).unwrap();
        assert_eq!(pattern_anchors(&q, Some("^what else")), bit("else"));
        assert_eq!(pattern_anchors(&q, Some("^(this|that|it)\\b")), 0);
        assert_eq!(pattern_anchors(&q, None), 0);
        assert_eq!(q.specific(q.full_mask()), q.full_mask(), "equal idf: all at the mean");
    }

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
