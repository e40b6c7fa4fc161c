//! Everyday phrasing, learnt from the index rather than listed: which of a query's anchors
//! identify nothing.
//!
//! What a person talks about changes from one conversation to the next; how they ask and answer
//! (`after tuning … it looked fine`, `明显改善`, `版本升级以后`) comes back in most of them. So an
//! anchor that most of the index's other sessions hold is phrasing: it is no evidence that a
//! turn is about the query's subject, however rare it is within one session (IDF alone cannot
//! tell: in a session a frame used in a sixth of the turns and a subject used in a sixteenth
//! differ by a factor of 2.7). Read from the postings at query time, one seek per anchor and
//! session, it is up to date after every write and costs nothing to store. With fewer than two
//! other sessions there is no majority to speak of, and nothing is everyday. While an import's
//! runs wait to be merged, the index's counts already hold turns whose postings are not yet
//! readable: for that while the sessions it writes count as not holding the anchor, and the
//! rate elsewhere comes out a little high.

use crate::error::Result;
use crate::query::anchors::{QueryAnchor, QueryAnchors};
use crate::store::{Source, View};
use crate::types::Posting;

/// The other sessions looked at, at most: the newest, whose phrasing is the user's current one.
/// It bounds the seeks per query anchor (a matter of speed, not of relevance).
pub const SAMPLED_SESSIONS: usize = 32;

/// What [`only_phrasing`] needs to know of the session asking.
pub struct SessionUse<'a> {
    /// The session's id.
    pub id: u32,
    /// Its turns, all of them.
    pub turns: u32,
    /// The turns before the query (the history the selection reads).
    pub as_of: u32,
    /// Per query anchor: its postings in the history.
    pub history: &'a [Vec<Posting>],
    /// Per query anchor: turns of the whole session that hold it.
    pub in_session: &'a [usize],
}

/// The significance level of "used more often here": the conventional one-sided 5%.
pub const SIGNIFICANCE: f64 = 0.05;

/// True if every anchor of `held` (a mask over the query's anchors: those the history holds) is
/// everyday phrasing: more than half of the sampled other sessions hold it, and this session's
/// history does not use it significantly more often than the rest of the index does (a
/// subject the person talks about everywhere, but most of all here, is still this
/// conversation's subject). Then all the history shares with the query is how things are said,
/// and no turn of it is evidence. Stops at the first anchor that is not everyday, rarest first.
pub fn only_phrasing<S: Source>(
    view: &View<S>,
    session: &SessionUse<'_>,
    query: &QueryAnchors,
    held: u64,
) -> Result<bool> {
    if held == 0 {
        return Ok(false);
    }
    let elsewhere_turns = view.corpus_stats().blocks.saturating_sub(u64::from(session.turns));
    if elsewhere_turns == 0 {
        return Ok(false);
    }
    // Read only if some anchor is not this session's own.
    let mut others: Option<Vec<u32>> = None;
    let mut order: Vec<usize> = (0..query.len()).filter(|&i| held & (1u64 << i) != 0).collect();
    order.sort_by(|&a, &b| query.anchors()[b].idf.total_cmp(&query.anchors()[a].idf));
    for i in order {
        let anchor = &query.anchors()[i];
        // Used more often here than elsewhere, beyond chance: this conversation's subject.
        let elsewhere = anchor_df(view, anchor)?.saturating_sub(session.in_session[i] as u64);
        let expected = f64::from(session.as_of) * elsewhere as f64 / elsewhere_turns as f64;
        if above_chance(session.history[i].len() as u64, expected) {
            return Ok(false);
        }
        let others = match &others {
            Some(others) => others,
            None => others.insert(view.recent_sessions(session.id, SAMPLED_SESSIONS)?),
        };
        if others.len() < 2 {
            return Ok(false);
        }
        if !held_by_most(view, anchor, others)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// True if more than half of `others` (sessions) hold `anchor` or one of its forms.
pub(crate) fn held_by_most<S: Source>(view: &View<S>, anchor: &QueryAnchor, others: &[u32]) -> Result<bool> {
    let mut holders = 0;
    for (seen, &other) in others.iter().enumerate() {
        // Stop once the answer is known either way.
        if 2 * holders > others.len() || 2 * (holders + others.len() - seen) <= others.len() {
            break;
        }
        for hash in anchor.hashes() {
            if view.session_holds(hash, other)? {
                holders += 1;
                break;
            }
        }
    }
    Ok(2 * holders > others.len())
}

/// The index of dispersion of `turns` (sorted turn ids, each below `n`) over ⌈√n⌉ equal
/// stretches of `n` turns, and its degrees of freedom: how much more the counts per stretch
/// vary than a Poisson count does. `None` when there is too little to count.
pub(crate) fn dispersion(turns: &[u32], n: u32) -> Option<(f64, u32)> {
    if n < 4 || turns.len() < 2 {
        return None;
    }
    let bins = f64::from(n).sqrt().ceil() as u32;
    let mut counts = vec![0u32; bins as usize];
    for &turn in turns {
        counts[(u64::from(turn.min(n - 1)) * u64::from(bins) / u64::from(n)) as usize] += 1;
    }
    let mean = turns.len() as f64 / f64::from(bins);
    Some((counts.iter().map(|&c| (f64::from(c) - mean).powi(2)).sum::<f64>() / mean, bins - 1))
}

/// True if none of the `held` anchors comes in bursts in the other sessions that hold it: a
/// subject is talked about for a stretch and then left (its turns cluster), while phrasing
/// comes back evenly all through a conversation. With [`only_phrasing`], that is a query whose
/// every word is how this person talks, however often, and which therefore names nothing.
///
/// Each holder session among the newest [`SAMPLED_SESSIONS`] is cut into ⌈√n⌉ stretches of
/// its `n` turns (the square-root rule of histogram bins) and the anchor's turns are counted in
/// each: evenly spread counts vary no more than a Poisson count does, clustered ones far more.
/// The index of dispersion, summed over the holder sessions, is tested as a χ² against its
/// degrees of freedom (Wilson–Hilferty) at the one-sided [`SIGNIFICANCE`].
pub fn evenly_used<S: Source>(view: &View<S>, session: u32, query: &QueryAnchors, held: u64) -> Result<bool> {
    let mut others = Vec::new();
    for other in view.recent_sessions(session, SAMPLED_SESSIONS)? {
        others.push((other, view.session_record(other)?.map_or(0, |r| r.turn_count)));
    }
    for (i, anchor) in query.anchors().iter().enumerate() {
        if held & (1u64 << i) == 0 {
            continue;
        }
        let (mut dispersion, mut freedom) = (0.0, 0u32);
        for &(other, n) in &others {
            if n < 4 {
                continue;
            }
            if let Some((d, f)) = self::dispersion(&session_turns(view, other, anchor)?, n) {
                dispersion += d;
                freedom += f;
            }
        }
        if freedom > 0 && chi_square_above_chance(dispersion, freedom) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The turns of `session` that hold `anchor` or one of its forms, folded and pending.
pub(crate) fn session_turns<S: Source>(
    view: &View<S>,
    session: u32,
    anchor: &QueryAnchor,
) -> Result<Vec<u32>> {
    let (mut turns, mut list) = (Vec::new(), Vec::new());
    for hash in anchor.hashes() {
        // Only the turns count: no side lengths are looked up.
        list.clear();
        view.session_postings_without_lengths(hash, session, &mut list)?;
        turns.extend(list.iter().map(|p| p.turn));
    }
    turns.sort_unstable();
    turns.dedup();
    Ok(turns)
}

/// True if a χ² statistic of `freedom` degrees of freedom is beyond its upper [`SIGNIFICANCE`]
/// point, by the Wilson–Hilferty cube-root normal approximation (1.645: the one-sided 5% point).
pub(crate) fn chi_square_above_chance(statistic: f64, freedom: u32) -> bool {
    let k = f64::from(freedom);
    let spread = 2.0 / (9.0 * k);
    ((statistic / k).cbrt() - (1.0 - spread)) / spread.sqrt() > 1.645
}

/// The turns of the index that hold `anchor` or one of its forms (at most: a turn with two
/// forms counts twice).
pub(crate) fn anchor_df<S: Source>(view: &View<S>, anchor: &QueryAnchor) -> Result<u64> {
    let mut df = 0;
    for hash in anchor.hashes() {
        df += view.df(hash)?;
    }
    Ok(df)
}

/// True if `observed` turns are more than a Poisson count of mean `expected` reaches with
/// probability [`SIGNIFICANCE`]: P(X ≥ observed) ≤ SIGNIFICANCE.
pub(crate) fn above_chance(observed: u64, expected: f64) -> bool {
    if observed == 0 {
        return false;
    }
    if expected <= 0.0 {
        return true;
    }
    if expected > 500.0 {
        // The sum of e^-expected-scaled terms loses precision this far out (and e^-expected
        // underflows past ~745): the normal approximation, with continuity correction
        // (1.645: the one-sided 5% point).
        return (observed as f64 - 0.5 - expected) / expected.sqrt() > 1.645;
    }
    // P(X ≥ observed) = 1 − P(X ≤ observed − 1); the loop ends once the lower tail passes
    // 1 − SIGNIFICANCE, which happens within a few standard deviations of the mean.
    let (mut term, mut lower) = ((-expected).exp(), 0.0);
    for k in 0..observed {
        lower += term;
        if lower >= 1.0 - SIGNIFICANCE {
            return true;
        }
        term *= expected / (k + 1) as f64;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chi_square_upper_tail() {
        // χ²(9): the 95% point is 16.92; χ²(30): 43.77.
        assert!(!chi_square_above_chance(16.5, 9) && chi_square_above_chance(17.4, 9));
        assert!(!chi_square_above_chance(43.0, 30) && chi_square_above_chance(44.6, 30));
        assert!(!chi_square_above_chance(0.0, 5), "no variation at all is even");
    }

    #[test]
    fn above_chance_is_the_poisson_upper_tail() {
        // mean 1: P(X ≥ 3) = 0.080, P(X ≥ 4) = 0.019
        assert!(!above_chance(3, 1.0));
        assert!(above_chance(4, 1.0));
        // never seen elsewhere: any use is above chance; no use never is
        assert!(above_chance(1, 0.0));
        assert!(!above_chance(0, 0.0));
        // at the mean, and below it
        assert!(!above_chance(5, 4.5));
        assert!(!above_chance(1, 0.67));
        // mean 0.3 (a word seen twice in 1,438 turns): P(X ≥ 1) = 0.26, P(X ≥ 2) = 0.037
        assert!(!above_chance(1, 0.3));
        assert!(above_chance(2, 0.3));
        // the normal approximation past 500 agrees with the exact tail near its edge
        assert!(above_chance(560, 520.0) && !above_chance(530, 520.0));
    }
}
