//! The previous-turn overlap baseline: the IDF-weighted share of the query's terms found in the
//! turn just before it, judged switch below a threshold swept over the set.
//!
//! Terms are lower-cased words minus English stop words ([`ctxgate::anchor::is_stop_word`]) and
//! the character bigrams of CJK runs. The tokenizer is this tool's own, so the baseline does not
//! move when ctxgate's anchor rules do.

use crate::data::{Conversations, Expected, Task};
use crate::metrics::Confusion;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Thresholds swept, in hundredths: 0.00, 0.01, ..., 1.00.
const THRESHOLD_STEPS: u32 = 100;

/// The distinct terms of `text`, sorted: lower-cased words (runs of letters, digits and `_`
/// outside CJK) that are not stop words, and every bigram of each CJK run (a run of one CJK
/// character has no bigram and gives nothing).
pub fn terms(text: &str) -> BTreeSet<String> {
    let lower = text.to_lowercase();
    let mut terms = BTreeSet::new();
    let mut word = String::new();
    let mut cjk_run: Vec<char> = Vec::new();
    // At most one of the two runs is non-empty: each ends where the other starts.
    let mut flush = |word: &mut String, cjk_run: &mut Vec<char>| {
        if !word.is_empty() && !ctxgate::anchor::is_stop_word(word) {
            terms.insert(std::mem::take(word));
        }
        word.clear();
        for pair in cjk_run.windows(2) {
            terms.insert(pair.iter().collect());
        }
        cjk_run.clear();
    };
    for c in lower.chars() {
        if ctxgate::text::is_cjk(c) {
            if !word.is_empty() {
                flush(&mut word, &mut cjk_run);
            }
            cjk_run.push(c);
        } else if c.is_alphanumeric() || c == '_' {
            if !cjk_run.is_empty() {
                flush(&mut word, &mut cjk_run);
            }
            word.push(c);
        } else {
            flush(&mut word, &mut cjk_run);
        }
    }
    flush(&mut word, &mut cjk_run);
    terms
}

/// Document frequencies over the turns of a set (a turn is its user and assistant text).
#[derive(Debug, Default)]
pub struct Idf {
    turns: u64,
    df: HashMap<String, u64>,
}

impl Idf {
    /// Counts the terms of every turn.
    pub fn of_turns<'a>(texts: impl IntoIterator<Item = (&'a str, &'a str)>) -> Idf {
        let mut idf = Idf::default();
        for (user, assistant) in texts {
            idf.turns += 1;
            for term in turn_terms(user, assistant) {
                *idf.df.entry(term).or_default() += 1;
            }
        }
        idf
    }

    /// `ln((N + 1) / (df + 1)) + 1`: positive for every term, highest for the rarest.
    pub fn weight(&self, term: &str) -> f64 {
        let df = self.df.get(term).copied().unwrap_or(0);
        ((self.turns as f64 + 1.0) / (df as f64 + 1.0)).ln() + 1.0
    }
}

/// The terms of a turn: its user and assistant text together.
pub fn turn_terms(user: &str, assistant: &str) -> HashSet<String> {
    terms(user).into_iter().chain(terms(assistant)).collect()
}

/// The IDF-weighted share of `query`'s terms found in `previous`; `None` when the query has no
/// terms at all (such a query is judged continue at every threshold).
pub fn overlap_share(query: &BTreeSet<String>, previous: &HashSet<String>, idf: &Idf) -> Option<f64> {
    let (found, total) = query.iter().fold((0.0, 0.0), |(found, total), term| {
        let weight = idf.weight(term);
        (if previous.contains(term) { found + weight } else { found }, total + weight)
    });
    (total > 0.0).then(|| found / total)
}

/// One scored task: its expected answer and its overlap share with the previous turn.
#[derive(Debug, Clone, Copy)]
pub struct Scored {
    /// Whether the task is expected to switch.
    pub expected_switch: bool,
    /// The overlap share, `None` for a query without terms.
    pub share: Option<f64>,
}

/// Scores every task of a set against its previous turn, IDF over all turns of `conversations`.
pub fn score(conversations: &Conversations, tasks: &[Task]) -> Vec<Scored> {
    let idf = Idf::of_turns(conversations.turns().map(|t| (t.user.as_str(), t.assistant.as_str())));
    tasks
        .iter()
        .map(|task| {
            let previous = conversations
                .turn(&task.session, task.upto_turn - 1)
                .map(|t| turn_terms(&t.user, &t.assistant))
                .unwrap_or_default();
            Scored {
                expected_switch: task.expected == Expected::Switch,
                share: overlap_share(&terms(&task.query), &previous, &idf),
            }
        })
        .collect()
}

/// The judgements at `threshold`: switch when the share is below it.
pub fn confusion_at(scored: &[Scored], threshold: f64) -> Confusion {
    let mut confusion = Confusion::default();
    for s in scored {
        confusion.record(s.expected_switch, s.share.is_some_and(|share| share < threshold));
    }
    confusion
}

/// The threshold in 0.00..=1.00 (step 0.01) with the highest balanced accuracy, the lowest such
/// on ties, with its confusion.
pub fn best_threshold(scored: &[Scored]) -> (f64, Confusion) {
    let mut best: Option<(f64, f64, Confusion)> = None;
    for step in 0..=THRESHOLD_STEPS {
        let threshold = f64::from(step) / f64::from(THRESHOLD_STEPS);
        let confusion = confusion_at(scored, threshold);
        let accuracy = confusion.balanced_accuracy().unwrap_or(0.0);
        if best.as_ref().is_none_or(|&(_, best_accuracy, _)| accuracy > best_accuracy) {
            best = Some((threshold, accuracy, confusion));
        }
    }
    let (threshold, _, confusion) = best.expect("the sweep visits at least one threshold");
    (threshold, confusion)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(words: &[&str]) -> BTreeSet<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn english_words_are_lower_cased_without_stop_words() {
        assert_eq!(
            terms("I need a CHEAP Hotel in the north , please ."),
            set(&["cheap", "hotel", "need", "north", "please"])
        );
        assert_eq!(terms("it's 4 stars, room_id 12"), set(&["12", "4", "room_id", "s", "stars"]));
        assert_eq!(terms("  , . ! "), BTreeSet::new());
    }

    #[test]
    fn cjk_runs_give_bigrams() {
        assert_eq!(terms("推荐酒店"), set(&["推荐", "荐酒", "酒店"]));
        // Punctuation and ASCII split runs; a one-character run gives nothing.
        assert_eq!(terms("好，评分4分以上的Hotel"), set(&["4", "hotel", "上的", "以上", "分以", "评分"]));
        assert_eq!(terms("北京B酒店"), set(&["b", "北京", "酒店"]));
    }

    #[test]
    fn idf_is_highest_for_rare_terms() {
        let idf = Idf::of_turns([("hotel north", "ok"), ("hotel south", "ok"), ("taxi", "ok")]);
        assert!(idf.weight("north") > idf.weight("hotel"));
        assert!(idf.weight("hotel") > idf.weight("ok"));
        assert!((idf.weight("ok") - 1.0).abs() < 1e-12, "a term in every turn weighs 1");
        assert!(idf.weight("unseen") > idf.weight("north"));
    }

    #[test]
    fn share_is_weighted_by_idf() {
        let idf = Idf::of_turns([("hotel north", "ok"), ("hotel south", "ok"), ("taxi", "ok")]);
        let previous = turn_terms("hotel", "ok");
        let share = overlap_share(&terms("hotel north"), &previous, &idf).expect("the query has terms");
        let expected = idf.weight("hotel") / (idf.weight("hotel") + idf.weight("north"));
        assert!((share - expected).abs() < 1e-12);
        assert_eq!(overlap_share(&terms("the of"), &previous, &idf), None);
    }

    #[test]
    fn sweep_finds_the_separating_threshold() {
        let scored: Vec<Scored> =
            [(true, Some(0.05)), (true, Some(0.1)), (false, Some(0.3)), (false, Some(0.9)), (false, None)]
                .into_iter()
                .map(|(expected_switch, share)| Scored { expected_switch, share })
                .collect();
        let (threshold, confusion) = best_threshold(&scored);
        assert!((threshold - 0.11).abs() < 1e-12, "lowest threshold separating the classes, got {threshold}");
        assert_eq!(confusion.balanced_accuracy(), Some(1.0));
    }
}
