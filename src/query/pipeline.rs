//! One query through the index: gate, recall, content-word filter, pruning, selection
//! (DESIGN §3.2–§3.6), all inside one consistent view of the store.

use crate::anchor;
use crate::query::bearing::Bearing;
use crate::error::Result;
use crate::query::evidence_recall;
use crate::gate::{ContentWords, GateDecision, Topic};
use crate::query::prompt;
use crate::query::prune;
use crate::query::anchors::QueryAnchors;
use crate::query::recall::{self, RECALL_LIMIT, RecallContext};
use crate::query::gate_view::{Gated, SessionRef, gate, segment_start, turn_hashes};
use crate::query::select::{self, EmptyBecause, Offer, Policy};
use crate::query::session_lists;
use crate::query::spread;

use crate::store::{Source, View};
use crate::tokens::TokenEstimator;
use crate::types::{Posting, anchor_hash};
use std::collections::HashMap;

/// Candidates looked at, best first, to find the [`RECALL_LIMIT`] that pass the filters.
pub const MAX_SCANNED: usize = 10 * RECALL_LIMIT;

/// Candidates `fill` looks at, at most, to spend its budget past the top [`RECALL_LIMIT`]
/// (it stops earlier once its offers could fill the budget twice over): bounds the turns one
/// query reads.
pub const MAX_FILL_SCANNED: usize = 2000;

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
    /// Why nothing was chosen, when nothing was.
    pub empty_because: Option<EmptyBecause>,
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
    /// Tokens of the projection, by the call's estimator.
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
    /// When the turn was said, as its source wrote it (handed over with the turn: "when did
    /// …?" is answered by the date, which the text rarely holds).
    pub time: Option<String>,
    /// Tokens of `user`, `assistant` and the label's time part, by the call's estimator.
    pub tokens: u32,
    /// Of `tokens`, the label's time part: the time, or `same time` after a block of that time
    /// (`prompt::BlockLabels`).
    pub label_tokens: u32,
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
) -> Result<Outcome>
where
    View<S>: Sync,
    S::Norms: Sync,
{
    let Gated { mut query, decision, filter } = gate(view, Some(session), params.as_of, text)?;
    // Framing words identify nothing: neither their forms nor their (long) posting lists are
    // read at all.
    let framing = filter.framing();
    let is_framing = |hash: u64| framing.binary_search(&hash).is_ok();
    query.fold_word_forms(view.corpus_stats().blocks, is_framing, |h| view.df(h))?;
    let switch = decision.topic == Topic::Switch;
    let scored = query.full_mask() & !anchors_among(&query, framing);
    let lists = session_lists::read(view, session, &query, scored, params.as_of)?;
    let held = held_mask(&lists.history);
    // A query that leaves the current topic, names something no conversation of the index has
    // mentioned, and shares with this history only the person's everyday phrasing (learnt from
    // the other sessions, `spread`) is about something new: no turn is evidence, and only what
    // the history lacks may find a document. (On a continue the query's words are the topic's,
    // however common; a query whose new words other conversations know may be asking about
    // the vocabulary of the person's work, which those conversations share.)
    //
    // A switch whose every word the history holds, each of them the person's everyday phrasing
    // and spread evenly through their other conversations (never talked about for a stretch and
    // left, as a subject is), names nothing: it follows up what was just said, as a deictic
    // question does, and the latest turn is its context (`deictic_pin`), not the older turns
    // that happen to repeat its phrasing.
    let unseen = scored & !held;
    let novel = if switch { novel_anchors(view, &query, unseen, &lists.in_session)? } else { 0 };
    let asking = spread::SessionUse {
        id: session.id,
        turns: session.record.turn_count,
        as_of: params.as_of,
        history: &lists.history,
        in_session: &lists.in_session,
    };
    let everyday = switch
        && (novel != 0 || (unseen == 0 && held != 0))
        && spread::only_phrasing(view, &asking, &query, held)?;
    let phrasing_only = everyday && novel != 0;
    let names_nothing = everyday && unseen == 0 && spread::evenly_used(view, session.id, &query, held)?;
    let scored_for_evidence = if phrasing_only { unseen } else { scored };
    let scored = if phrasing_only || names_nothing { 0 } else { scored };
    let shared = held;
    let held = held & scored;
    let bearing = Bearing::measure(view, &asking, &query, scored)?;
    let focus = focus_anchors(&query, held);
    log::debug!("{:?}: {:?}, focus {:?}", text, decision.topic, query.texts_of(focus));
    let context = recall_context(view, params.as_of);
    let fill = params.policy == Policy::Fill;
    let scan_limit = if fill { MAX_FILL_SCANNED } else { MAX_SCANNED };
    let scores = recall::score(&query, &lists.history, &lists.lengths, scored, &context, scan_limit)?;
    let candidates = recall::Ranking::new(scores);
    let content_words = switch.then(|| ContentWords::of(text));
    // A focus word admits a block on a switch whatever its length: §3.3's four letters keep
    // `with` and `what` out, but also the specific short words a history holds (`dad`, `Jon`,
    // `GC`), whose turns the filter then refused, leaving the selection empty.
    let content_terms = content_words.as_ref().map_or(0, |w| {
        w.term_mask(query.anchors().iter().map(|a| a.text.as_str())) | (focus & word_anchors(&query))
    });

    // The top RECALL_LIMIT candidates that pass the content-word filter and hold a focus
    // anchor, pruned: what the greedy chooses from. At most MAX_SCANNED are looked at: past them
    // a turn is too weak to matter, and a query whose candidates all fail the filter stays fast.
    // `fill` reads on, past the top RECALL_LIMIT and including turns that hold only common
    // anchors (its second tier), until its focus offers could fill the budget twice over (some
    // will not fit) or MAX_FILL_SCANNED were looked at.
    let named = query.specific(scored) & !pattern_anchors(&query, decision.deictic) & !query.fallback_mask();
    let refers_back = names_nothing || (decision.topic == Topic::Continue && decision.deictic.is_some());
    let pinned = if refers_back { deictic_pin(view, session, &query, named, params)? } else { None };
    let pinned_turn = pinned.as_ref().map(|p| p.turn);
    // Does the turn bear on the query at all (`bearing`)? One that shares only everyday words
    // with the query never enters, under either policy, and when the query names something
    // this history conspicuously lacks, only a turn holding a combination rarer than chance
    // does: so a history that holds nothing for the query offers nothing. Without other
    // sessions to learn phrasing from, `fill` too takes only turns that hold a focus anchor:
    // nothing tells the rest from the person's everyday words.
    let mut bearing = bearing;
    let beyond_focus = fill && bearing.has_null_model();
    let mut refused = false;
    let mut admitted = |c: &recall::Candidate| -> Result<bool> {
        let admits = bearing.admits(view, &query, c.matched)?;
        refused |= !admits;
        Ok((beyond_focus || c.matched & focus != 0) && admits)
    };
    let mut offers = Vec::new();
    let mut pruned = Vec::new();
    let mut times: HashMap<String, u32> = HashMap::new();
    let same_time_tokens = params.estimator.estimate(&prompt::time_label(prompt::SAME_TIME));
    let (mut recalled, mut focus_tokens) = (0, 0u64);
    for candidate in candidates.take(scan_limit) {
        if !admitted(&candidate)? {
            continue;
        }
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
        // `minimal` keeps the sentences that hold any anchor it must cover (§3.6: "the sentences
        // that contain a query anchor"); `fill` keeps a focus turn's focus sentences, since it
        // hands turns over whole where room is left and fits more turns pruned tighter.
        let prune_by = if holds_focus && fill { focus } else { scored };
        let block = match prune::prune(&turn.user, &turn.assistant, &query, prune_by) {
            // Never a fragment of common words only (three sentences with a name outweighed
            // the one with the focus word): then the focus's sentences.
            Some(block) if holds_focus && block.matched & focus == 0 => {
                prune::prune(&turn.user, &turn.assistant, &query, focus).or(Some(block))
            }
            other => other,
        };
        let Some(block) = block else { continue };
        let time_tokens = time_tokens(params.estimator, turn.time.as_deref());
        let estimate = |user: &str, assistant: &str| {
            params.estimator.estimate(user)
                + params.estimator.estimate(assistant)
                + time_tokens
                + params.block_overhead
        };
        let tokens = estimate(&block.user, &block.assistant);
        let whole_tokens = if fill { estimate(&turn.user, &turn.assistant).max(tokens) } else { tokens };
        if holds_focus {
            focus_tokens += u64::from(tokens);
        }
        let next_id = times.len() as u32;
        let time = turn.time.as_ref().map(|t| *times.entry(t.clone()).or_insert(next_id));
        offers.push(Offer {
            turn: candidate.turn,
            tokens,
            matched: block.matched,
            covers: block.matched,
            in_greedy,
            whole_tokens,
            time,
            label_saving: time_tokens.saturating_sub(same_time_tokens),
        });
        // `fill` may hand the turn over whole: keep its text rather than read it again.
        let whole = fill.then_some((turn.user, turn.assistant));
        pruned.push((candidate, block, turn.time, whole));
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
        evidence_recall::recall(view, session.id, &query, scored_for_evidence)?
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
            time: None,
            label_saving: 0,
        });
    }

    let pinned_cost = pinned.as_ref().map_or(0, |p| p.tokens + params.block_overhead);
    // What the greedy must cover: for `minimal`, every anchor the history holds (a name, a
    // common word), so a second turn with the focus anchors and the rest is taken; which turns
    // may be taken is still the focus's say (`admitted`). `fill` starts from the focus alone and
    // spends the budget in rank order, which measured better than the greedy's cheaper picks.
    let must_cover = match params.policy {
        Policy::Minimal => held,
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
    let mut used_tokens = 0;
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
        let (candidate, block, time, whole) = &pruned[pick.offer];
        covered |= block.matched;
        let (user, assistant) = match whole {
            Some((user, assistant)) if pick.whole => (user.clone(), assistant.clone()),
            _ => (block.user.clone(), block.assistant.clone()),
        };
        let offer = &offers[pick.offer];
        let tokens = if pick.whole { offer.whole_tokens } else { offer.tokens } - params.block_overhead;
        blocks.push(ChosenBlock {
            turn: candidate.turn,
            user,
            assistant,
            score: candidate.score,
            newly_covered: pick.newly_covered & !pinned_covered,
            label_tokens: time_tokens(params.estimator, time.as_deref()),
            time: time.clone(),
            tokens,
        });
    }
    // Each block is charged the label the prompt gives it. The greedy counted a time as shown
    // once a block of it was taken; the prompt says `same time` only right after a block of that
    // time, which in a session's chronological turns comes to the same. Should a log's times
    // run out of order, blocks are let go, the last taken first, until the budget holds.
    let evidence_cost: u32 = chosen_evidence.iter().map(|e| e.tokens + params.evidence_overhead).sum();
    loop {
        let cost = charge_labels(&mut blocks, params.estimator);
        let framing = params.block_overhead * blocks.len() as u32;
        if blocks.len() <= 1 || cost + framing + evidence_cost <= params.budget {
            used_tokens += cost;
            break;
        }
        blocks.pop();
    }
    blocks.sort_by_key(|b| b.turn);
    let empty_because = (blocks.is_empty() && chosen_evidence.is_empty()).then(|| {
        if params.as_of == 0 {
            EmptyBecause::NoHistory
        } else if shared == 0 {
            EmptyBecause::NothingShared
        } else if phrasing_only || names_nothing {
            EmptyBecause::OnlyPhrasing { shared: query.texts_of(shared) }
        } else if refused && turn_offers == 0 {
            EmptyBecause::NotSpecific { shared: query.texts_of(shared) }
        } else {
            EmptyBecause::NoneFits
        }
    });
    Ok(Outcome { query, decision, blocks, used_tokens, covered, evidence: chosen_evidence, empty_because })
}

/// The query anchors the session's history holds (framing words have no postings here).
fn held_mask(postings: &[Vec<Posting>]) -> u64 {
    (0..postings.len()).filter(|&i| !postings[i].is_empty()).fold(0, |m, i| m | (1u64 << i))
}

/// The query anchors whose hash is in `sorted`.
fn anchors_among(query: &QueryAnchors, sorted: &[u64]) -> u64 {
    query
        .anchors()
        .iter()
        .enumerate()
        .fold(0, |mask, (i, a)| if sorted.binary_search(&a.hash).is_ok() { mask | (1u64 << i) } else { mask })
}

/// Of `unseen` (query anchors this history lacks), those no other turn of the index holds
/// either: `in_session` counts the session's own later turns, which a query `as_of` an earlier
/// turn has not seen.
fn novel_anchors<S: Source>(
    view: &View<S>,
    query: &QueryAnchors,
    unseen: u64,
    in_session: &[usize],
) -> Result<u64> {
    let mut mask = 0;
    for (i, anchor) in query.anchors().iter().enumerate() {
        if unseen & (1u64 << i) != 0 && spread::anchor_df(view, anchor)? <= in_session[i] as u64 {
            mask |= 1u64 << i;
        }
    }
    Ok(mask)
}

/// Sets each block's label cost to what `prompt::BlockLabels` shows for it in turn order (the
/// blocks stay in their order); returns the blocks' tokens.
fn charge_labels(blocks: &mut [ChosenBlock], estimator: &dyn TokenEstimator) -> u32 {
    let mut order: Vec<usize> = (0..blocks.len()).collect();
    order.sort_by_key(|&i| blocks[i].turn);
    let mut previous: Option<String> = None;
    let mut total = 0;
    for i in order {
        let block = &mut blocks[i];
        let label = block.time.as_deref().map_or(0, |time| {
            let says = if previous.as_deref() == Some(time) { prompt::SAME_TIME } else { time };
            estimator.estimate(&prompt::time_label(says))
        });
        block.tokens = block.tokens - block.label_tokens + label;
        block.label_tokens = label;
        previous = block.time.clone();
        total += block.tokens;
    }
    total
}

/// What a block's time label costs (`prompt::time_label`).
fn time_tokens(estimator: &dyn TokenEstimator, time: Option<&str>) -> u32 {
    time.map_or(0, |t| estimator.estimate(&prompt::time_label(t)))
}

/// The query anchors that are words (hyphen chains too), not CJK n-grams or phrases.
fn word_anchors(query: &QueryAnchors) -> u64 {
    query
        .anchors()
        .iter()
        .enumerate()
        .fold(0, |mask, (i, a)| if anchor::is_one_word(&a.text) { mask | (1u64 << i) } else { mask })
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

/// A follow-up that refers back (a deictic one the gate continued, or one made of everyday
/// phrasing alone) and names nothing the latest turn lacks ("那这个呢？", "go on, what else?", a
/// short reply to the question the last turn asked) refers to what was just said: that turn is its context, whatever words older turns share
/// with it. `named` are the query's specific anchors. It is handed over first, whole
/// if it fits the budget, else pruned to the query; the greedy then spends the rest. Its score
/// is 0: it is not recalled.
fn deictic_pin<S: Source>(
    view: &View<S>,
    session: &SessionRef<'_>,
    query: &QueryAnchors,
    named: u64,
    params: &SelectParams<'_>,
) -> Result<Option<ChosenBlock>> {
    let Some(latest) = params.as_of.checked_sub(1) else { return Ok(None) };
    let Some(turn) = view.turn_record(session.id, latest)? else { return Ok(None) };
    let time_tokens = time_tokens(params.estimator, turn.time.as_deref());
    let estimate = |user: &str, assistant: &str| {
        params.estimator.estimate(user) + params.estimator.estimate(assistant) + time_tokens
    };
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
    Ok(Some(ChosenBlock {
        turn: latest,
        user,
        assistant,
        score: 0.0,
        newly_covered,
        label_tokens: time_tokens,
        time: turn.time,
        tokens,
    }))
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
/// Of the `held` anchors (those the session's history contains, framing words and everyday
/// phrasing left out), the focus is those at least as specific as their mean: IDF at or above
/// the mean IDF of that set. The rarest shared anchors say what the query is about; much more
/// common ones (a person's name repeated every turn, `production`, `error`) are context, and
/// buying coverage of them is how off-topic fragments get selected. The mean is a statistic of
/// the query itself, not a tuned constant. Empty when nothing qualifies: `minimal` then selects
/// nothing, since what the history shares with the query is phrasing, not evidence.
fn focus_anchors(query: &QueryAnchors, held: u64) -> u64 {
    query.specific(held)
}

/// The query anchors that are framing words.
pub(crate) fn framing_mask(query: &QueryAnchors, text: &str) -> u64 {
    anchors_among(query, &anchor::framing_hashes(text, anchor_hash))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn older_turns_cover_only_what_the_segment_lacks() {
        let offer = |turn, matched| Offer {
            turn,
            tokens: 10,
            matched,
            covers: matched,
            in_greedy: true,
            whole_tokens: 10,
            time: None,
            label_saving: 0,
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
}
