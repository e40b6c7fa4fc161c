//! Whether a session's history bears on a query at all, learnt from the index's own counts.
//!
//! A hook injects on every prompt, so the history must give nothing when it holds nothing for
//! the prompt. A query shares words with almost any long history (`support`, `group`, `go`),
//! and recall scores whatever turn holds them. What tells evidence from chance is the rest of
//! the index, taken as the null model of what a history of this length would hold. Per query
//! anchor, from its rate in the turns of the other sessions:
//! - **topical**: the history's turns hold it more often than that rate predicts, beyond chance
//!   (a one-sided Poisson test at [`SIGNIFICANCE`]): a name of this conversation, a subject it
//!   dwells on. A word most other sessions hold too counts only if it comes in bursts here
//!   (`spread::dispersion`): this person's everyday words come back evenly, however often;
//! - **absent**: the history holds it in no turn although that rate predicts it would, beyond
//!   chance (P(no turn) = e^−expected under [`SIGNIFICANCE`]): the query is about something
//!   that lives elsewhere, the other people or the other project a question names;
//! - **everyday**: most of the other sessions hold it, and it comes back evenly in them
//!   (`spread::evenly_used`; a word talked about in stretches is a subject, however widespread).
//!
//! A turn **bears** on the query when the combination of query anchors it holds is one that a
//! history of this length holds by chance with probability under [`SIGNIFICANCE`] (its
//! E-value: the history's length times the combination's rate elsewhere), or when it holds a
//! topical anchor and nothing of the query is absent. The combination's rate is the product of
//! the anchors' rates elsewhere (each counted as one more turn of the index when the query
//! names something absent, so that no single word seen nowhere else passes alone), but never
//! less than the share of the sampled other sessions' turns that hold them all together: the
//! words of a phrase a person reuses come together, and multiplying their rates as if they were
//! independent made a reused sentence frame look like a rare find. A turn is **admitted** if it bears, or, when nothing the query
//! names is absent, if it holds a word that is not everyday: one that shares only everyday
//! words never is. A history bears on the query when one of its turns is admitted.
//!
//! With fewer than two other sessions in the index, or fewer turns in them than the history
//! has, there is no null model (as for `spread`; a rate read off a handful of turns says
//! nothing of a longer history): every held anchor counts as topical, and the framing lists and
//! the focus decide alone.

use crate::error::Result;
use crate::query::anchors::QueryAnchors;
use crate::query::spread::{self, SIGNIFICANCE, SessionUse, above_chance};
use crate::store::{Source, View};
use std::collections::HashMap;

/// What the rest of the index says of a query's anchors in one session's history.
#[derive(Debug, Clone)]
pub struct Bearing {
    /// The query anchors the history uses more than the rest of the index predicts.
    pub topical: u64,
    /// The query anchors the history lacks although the rest of the index predicts it would
    /// hold them, beyond chance: what the query is about lives elsewhere.
    pub absent: u64,
    /// The held query anchors that most of the other sessions hold too, evenly.
    pub everyday: u64,
    /// Per query anchor, the share of the turns elsewhere that hold it (`None`: nothing else
    /// is indexed, so there is no null model).
    rates: Option<Vec<f64>>,
    /// The history's length in turns.
    history_turns: u32,
    /// Turns of the index outside the session.
    elsewhere_turns: u64,
    /// The sampled other sessions, for the rate of a combination as it comes together.
    sample: Sample,
}

/// The newest other sessions (at most [`spread::SAMPLED_SESSIONS`]) and, read on first need,
/// which of their turns hold each query anchor.
#[derive(Debug, Clone, Default)]
struct Sample {
    /// Session ids.
    sessions: Vec<u32>,
    /// Their turns, all together.
    turns: u64,
    /// Per query anchor: `session << 32 | turn` of the sampled turns that hold it, sorted.
    holders: Vec<Option<Vec<u64>>>,
    /// Per combination (a mask over the query's anchors): sampled turns holding all of it.
    together: HashMap<u64, u64>,
}

impl Sample {
    /// Sampled turns that hold every anchor of `matched`.
    fn together<S: Source>(&mut self, view: &View<S>, query: &QueryAnchors, matched: u64) -> Result<u64> {
        if let Some(&n) = self.together.get(&matched) {
            return Ok(n);
        }
        let mut common: Option<Vec<u64>> = None;
        for i in (0..query.len()).filter(|&i| matched & (1u64 << i) != 0) {
            if self.holders[i].is_none() {
                let mut held = Vec::new();
                for &session in &self.sessions {
                    let turns = spread::session_turns(view, session, &query.anchors()[i])?;
                    held.extend(turns.into_iter().map(|t| u64::from(session) << 32 | u64::from(t)));
                }
                held.sort_unstable();
                self.holders[i] = Some(held);
            }
            let held = self.holders[i].as_deref().unwrap_or_default();
            common = Some(match common {
                None => held.to_vec(),
                Some(mut so_far) => {
                    so_far.retain(|t| held.binary_search(t).is_ok());
                    so_far
                }
            });
            if common.as_ref().is_some_and(Vec::is_empty) {
                break;
            }
        }
        let n = common.map_or(0, |c| c.len() as u64);
        self.together.insert(matched, n);
        Ok(n)
    }
}

impl Bearing {
    /// Measures the `scored` query anchors (framing words left out) in the history of
    /// `session`.
    pub fn measure<S: Source>(
        view: &View<S>,
        session: &SessionUse<'_>,
        query: &QueryAnchors,
        scored: u64,
    ) -> Result<Bearing> {
        let counts = Counts {
            session: session.id,
            turns: session.turns,
            history_turns: session.as_of,
            history: &|i| session.history[i].len() as u64,
            in_session: &|i| session.in_session[i] as u64,
            turns_of: &|i| session.history[i].iter().map(|p| p.turn).collect(),
        };
        Bearing::of_counts(view, &counts, query, scored)
    }

    /// Measures the `scored` query anchors in a whole session of `turns` turns, reading which
    /// of its turns hold each: for a turn found by the search across sessions.
    pub fn of_session<S: Source>(
        view: &View<S>,
        session: u32,
        turns: u32,
        query: &QueryAnchors,
        scored: u64,
    ) -> Result<Bearing> {
        let mut held_turns = vec![Vec::new(); query.len()];
        for (i, anchor) in query.anchors().iter().enumerate() {
            if scored & (1u64 << i) != 0 {
                held_turns[i] = spread::session_turns(view, session, anchor)?;
            }
        }
        let counts = Counts {
            session,
            turns,
            history_turns: turns,
            history: &|i| held_turns[i].len() as u64,
            in_session: &|i| held_turns[i].len() as u64,
            turns_of: &|i| held_turns[i].clone(),
        };
        Bearing::of_counts(view, &counts, query, scored)
    }

    fn of_counts<S: Source>(
        view: &View<S>,
        counts: &Counts<'_>,
        query: &QueryAnchors,
        scored: u64,
    ) -> Result<Bearing> {
        let held = (0..query.len())
            .filter(|&i| scored & (1u64 << i) != 0 && (counts.history)(i) > 0)
            .fold(0, |m, i| m | (1u64 << i));
        let history_turns = counts.history_turns;
        let elsewhere_turns = view.corpus_stats().blocks.saturating_sub(u64::from(counts.turns));
        // The rest of the index stands for what a history of this length would hold only when
        // it is at least as long, and one other conversation is no null model (as for
        // `spread`: no majority to speak of).
        if elsewhere_turns < u64::from(history_turns).max(1)
            || view.recent_sessions(counts.session, 2)?.len() < 2
        {
            return Ok(Bearing {
                topical: held,
                absent: 0,
                everyday: 0,
                rates: None,
                history_turns,
                elsewhere_turns: 0,
                sample: Sample::default(),
            });
        }
        let mut rates = vec![0.0; query.len()];
        let (mut topical, mut absent, mut everyday) = (0, 0, 0);
        let mut others: Option<Vec<u32>> = None;
        for (i, anchor) in query.anchors().iter().enumerate() {
            if scored & (1u64 << i) == 0 {
                continue;
            }
            let elsewhere = spread::anchor_df(view, anchor)?.saturating_sub((counts.in_session)(i));
            let rate = (elsewhere as f64 / elsewhere_turns as f64).min(1.0);
            rates[i] = rate;
            if held & (1u64 << i) == 0 {
                // P(no turn holds it) = e^-expected under the rate elsewhere.
                if (-f64::from(history_turns) * rate).exp() <= SIGNIFICANCE {
                    absent |= 1u64 << i;
                }
                continue;
            }
            let others = match &others {
                Some(others) => others,
                None => others.insert(view.recent_sessions(counts.session, spread::SAMPLED_SESSIONS)?),
            };
            // Most other conversations hold it, and it comes back evenly in them: how this person
            // talks. (One talked about in stretches is a subject, however widespread.)
            let common = others.len() >= 2
                && spread::held_by_most(view, anchor, others)?
                && spread::evenly_used(view, counts.session, query, 1u64 << i)?;
            if common {
                everyday |= 1u64 << i;
            }
            if !above_chance((counts.history)(i), f64::from(history_turns) * rate) {
                continue;
            }
            // Everyday words that this person happens to use more here come back evenly; a
            // subject is talked about for a stretch.
            if common
                && !spread::dispersion(&(counts.turns_of)(i), history_turns)
                    .is_some_and(|(d, f)| spread::chi_square_above_chance(d, f))
            {
                continue;
            }
            topical |= 1u64 << i;
        }
        let sessions = match others {
            Some(others) => others,
            None => view.recent_sessions(counts.session, spread::SAMPLED_SESSIONS)?,
        };
        let mut turns = 0;
        for &session in &sessions {
            turns += view.session_record(session)?.map_or(0, |r| u64::from(r.turn_count));
        }
        let sample = Sample { sessions, turns, holders: vec![None; query.len()], together: HashMap::new() };
        Ok(Bearing { topical, absent, everyday, rates: Some(rates), history_turns, elsewhere_turns, sample })
    }

    /// True if a turn holding the query anchors `matched` may be offered once the history bears
    /// on the query: it [`bears`](Self::bears) itself, or holds a word most other sessions
    /// lack (and the query names nothing absent).
    pub fn admits<S: Source>(&mut self, view: &View<S>, query: &QueryAnchors, matched: u64) -> Result<bool> {
        if self.holds_an_ordinary_word(matched) {
            return Ok(true);
        }
        self.bears(view, query, matched)
    }

    /// True if the rest of the index served as a null model: without one, every held anchor
    /// counts as topical and nothing tells a subject from phrasing.
    pub fn has_null_model(&self) -> bool {
        self.rates.is_some()
    }

    /// True if `matched` holds a word that is not everyday, and nothing the query names is
    /// absent.
    fn holds_an_ordinary_word(&self, matched: u64) -> bool {
        self.absent == 0 && matched & !self.everyday != 0
    }

    /// True if a turn holding the query anchors `matched` bears on the query: a topical anchor
    /// (when nothing the query names is absent), or a combination that a history of this
    /// length holds by chance with probability under [`SIGNIFICANCE`].
    pub fn bears<S: Source>(&mut self, view: &View<S>, query: &QueryAnchors, matched: u64) -> Result<bool> {
        if !self.bears_if_independent(matched) {
            return Ok(false);
        }
        if (matched & self.topical != 0 && self.absent == 0) || self.rates.is_none() {
            return Ok(true);
        }
        // Words that come together elsewhere (a reused phrase) are as common together as the
        // phrase is.
        if self.sample.turns == 0 {
            return Ok(true);
        }
        let together = self.sample.together(view, query, matched)? as f64 / self.sample.turns as f64;
        Ok(f64::from(self.history_turns) * together <= SIGNIFICANCE)
    }

    /// [`bears`](Self::bears) with the combination's rate taken as the product of its anchors'
    /// rates, as if they came independently: the first test, and the whole one when no sample
    /// of other sessions is at hand.
    fn bears_if_independent(&self, matched: u64) -> bool {
        if matched & self.topical != 0 && self.absent == 0 {
            return true;
        }
        let Some(rates) = &self.rates else { return matched != 0 };
        if matched == 0 {
            return false;
        }
        // With something absent, a word seen nowhere else counts as seen once more: the query's
        // own subject lives elsewhere, so one word unique to this history is no evidence alone.
        let elsewhere = self.elsewhere_turns as f64;
        let rate = |i: usize| {
            if self.absent == 0 { rates[i] } else { (rates[i] * elsewhere + 1.0) / (elsewhere + 1.0) }
        };
        let expected = (0..rates.len())
            .filter(|&i| matched & (1u64 << i) != 0)
            .fold(f64::from(self.history_turns), |e, i| e * rate(i));
        expected <= SIGNIFICANCE
    }
}

/// How many turns of a session hold each query anchor.
struct Counts<'a> {
    /// The session's id.
    session: u32,
    /// The session's turns.
    turns: u32,
    /// The turns of its history (before the query).
    history_turns: u32,
    /// Per anchor: the history's turns that hold it.
    history: &'a dyn Fn(usize) -> u64,
    /// Per anchor: the session's turns that hold it.
    in_session: &'a dyn Fn(usize) -> u64,
    /// Per anchor: the history's turns that hold it.
    turns_of: &'a dyn Fn(usize) -> Vec<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Bearing::admits`] where no sample is read (none is set up here).
    fn admits(b: &Bearing, matched: u64) -> bool {
        b.holds_an_ordinary_word(matched) || b.bears_if_independent(matched)
    }

    fn bearing(topical: u64, rates: &[f64], turns: u32) -> Bearing {
        Bearing {
            topical,
            absent: 0,
            everyday: 0,
            rates: Some(rates.to_vec()),
            history_turns: turns,
            elsewhere_turns: 1000,
            sample: Sample::default(),
        }
    }

    #[test]
    fn a_topical_anchor_bears_whatever_else_the_turn_holds() {
        let b = bearing(0b10, &[0.2, 0.0, 0.3], 300);
        assert!(
            b.bears_if_independent(0b10) && b.bears_if_independent(0b11) && b.bears_if_independent(0b110)
        );
        assert!(
            !b.bears_if_independent(0b001) && !b.bears_if_independent(0b100) && !b.bears_if_independent(0)
        );
    }

    #[test]
    fn common_words_bear_only_in_a_combination_rare_by_chance() {
        // 300 turns: one word at 1% is expected in 3 turns; two at 1% in 0.03 turns.
        let b = bearing(0, &[0.01, 0.01, 0.2], 300);
        assert!(!b.bears_if_independent(0b001) && !b.bears_if_independent(0b010));
        assert!(b.bears_if_independent(0b011), "E = 300 × 0.01 × 0.01 = 0.03");
        assert!(!b.bears_if_independent(0b101), "E = 300 × 0.01 × 0.2 = 0.6");
        // a shorter history makes the same pairing of commoner words rare enough
        assert!(bearing(0, &[0.1, 0.1, 0.2], 4).bears_if_independent(0b011), "E = 4 × 0.01 = 0.04");
    }

    #[test]
    fn when_the_query_names_something_absent_only_a_rare_combination_bears() {
        // anchor 2 is absent here (its subject lives elsewhere); anchor 1 is this history's
        // own word, seen nowhere else: topical, but alone no longer enough.
        let b = Bearing { absent: 0b100, ..bearing(0b010, &[0.01, 0.0, 0.3], 300) };
        assert!(
            !b.bears_if_independent(0b010),
            "E = 300 × 1/1001 = 0.3: a word unique to this history is no evidence alone"
        );
        assert!(b.bears_if_independent(0b011), "E = 300 × 0.01 × 1/1001 = 0.003");
        assert!(!admits(&b, 0b001), "nothing but what bears is admitted");
        let alone = bearing(0b010, &[0.01, 0.0, 0.3], 300);
        assert!(alone.bears_if_independent(0b010));
    }

    #[test]
    fn a_turn_of_everyday_words_alone_is_never_admitted() {
        let b = Bearing { everyday: 0b011, ..bearing(0b100, &[0.2, 0.3, 0.0], 300) };
        assert!(!admits(&b, 0b001) && !admits(&b, 0b011), "everyday words only");
        assert!(admits(&b, 0b100), "the topical word");
        let ordinary = Bearing { everyday: 0b001, ..bearing(0, &[0.2, 0.05, 0.0], 300) };
        assert!(
            !ordinary.bears_if_independent(0b010) && admits(&ordinary, 0b010),
            "a word most sessions lack is admitted"
        );
    }

    #[test]
    fn without_a_null_model_anything_held_bears() {
        let b = Bearing {
            topical: 0b11,
            absent: 0,
            everyday: 0,
            rates: None,
            history_turns: 10,
            elsewhere_turns: 0,
            sample: Sample::default(),
        };
        assert!(b.bears_if_independent(0b01) && !b.bears_if_independent(0));
    }
}
