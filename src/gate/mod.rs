//! The topic gate (DESIGN §3.2) and the content-word filter applied on a switch (§3.3).
//!
//! No storage here: the caller supplies the query's weighted anchors, membership in the current
//! topic segment's anchors `A(T)`, and (read only when needed) whether the previous answer asked
//! a question.

mod reference;

pub use reference::{REPLY_TO_QUESTION, asks_question, deictic_pattern, describe as describe_reference};
#[cfg(any(test, feature = "internals"))]
pub use reference::CJK_PRONOUN;

use crate::anchor::{cjk_framing_chars, is_framing_word, is_stop_word};
use crate::text::{is_cjk, is_word_char};
use regex::Regex;
use serde::Serialize;
use std::sync::LazyLock;

/// DESIGN §3.2: overlap above this continues the topic.
pub const OVERLAP_CONTINUE: f64 = 0.45;
/// DESIGN §3.2: overlap below this (with `new_ratio` above [`NEW_RATIO_SWITCH`]) switches.
pub const OVERLAP_SWITCH: f64 = 0.20;
/// DESIGN §3.2: share of new-anchor IDF above which a low-overlap query switches.
pub const NEW_RATIO_SWITCH: f64 = 0.70;
/// DESIGN §3.3: content words are Chinese words of at least 4 characters and English terms
/// of at least 4 letters.
pub const CONTENT_WORD_MIN_CHARS: usize = 4;

/// Whether a query continues the current topic or switches to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Topic {
    /// Same topic: the current segment goes on.
    Continue,
    /// Another topic: the query starts a new segment.
    Switch,
}

/// The gate's decision with the numbers behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct GateDecision {
    /// Continue or switch.
    pub topic: Topic,
    /// IDF share of the query's anchors found in the topic.
    pub overlap: f64,
    /// IDF share of the query's anchors not in the topic.
    pub new_ratio: f64,
    /// The deictic pattern the query starts with (also after a short acknowledgement such as
    /// `好的，`), if any; or "reply to a question" when the query would
    /// have switched but answers the question the previous turn ended with.
    pub deictic: Option<&'static str>,
}

/// Decides continue or switch for a query (DESIGN §3.2), in the specified branch order.
/// `weights` are the query's anchors as `(hash, idf)`; `in_topic` says which are in `A(T)`.
/// Sums run in the order given, so callers pass one canonical order (by hash).
/// `previous_asks` says whether the turn before ended by asking a question
/// ([`asks_question`]); it is called only when the query would otherwise switch.
pub fn decide<E>(
    query: &str,
    weights: &[(u64, f64)],
    in_topic: impl Fn(u64) -> bool,
    previous_asks: impl FnOnce() -> Result<bool, E>,
) -> Result<GateDecision, E> {
    let (shared, new): (f64, f64) = weights.iter().fold((0.0, 0.0), |(shared, new), &(hash, idf)| {
        if in_topic(hash) { (shared + idf, new) } else { (shared, new + idf) }
    });
    let total = shared + new;
    let (overlap, new_ratio) = if total > 0.0 { (shared / total, new / total) } else { (0.0, 0.0) };
    let mut deictic = deictic_pattern(query);
    let topic = if overlap > OVERLAP_CONTINUE {
        Topic::Continue
    } else if overlap < OVERLAP_SWITCH && new_ratio > NEW_RATIO_SWITCH && deictic.is_none() {
        if previous_asks()? {
            // A reply refers to the question it answers as a deictic word refers to its
            // antecedent: the deictic branch continues it.
            deictic = Some(REPLY_TO_QUESTION);
            Topic::Continue
        } else {
            Topic::Switch
        }
    } else {
        // A deictic query that would otherwise switch continues; so does the middle ground.
        Topic::Continue
    };
    Ok(GateDecision { topic, overlap, new_ratio, deictic })
}

static VERSION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\bv?\d+\.\d+\.\d+\b").expect("the version pattern is a valid regex"));
static ENGLISH_TERM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b[a-z]{4,}\b").expect("the term pattern is a valid regex"));

/// The content words of a query (DESIGN §3.3): what a block must contain to be a candidate
/// after a topic switch. Stop words and framing words (`problem`, `请问一下`) are never
/// content words: they have the length but identify no topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContentWords {
    /// English terms of at least 4 letters, not stop words, and identifiers of at least 4
    /// characters (`acquire_lock`, `utf8mb4`): DESIGN §3.3's pattern `\b[a-z]{4,}\b` misses
    /// identifiers, which name a developer conversation's topic better than any word.
    pub terms: Vec<String>,
    /// Version numbers such as `v1.2.3`.
    pub versions: Vec<String>,
    /// Every 4-character window of the query's CJK runs: a Chinese word of 4 or more characters
    /// contains one, and without a segmenter the windows are what can be matched.
    pub cjk: Vec<String>,
}

impl ContentWords {
    /// Finds the content words of `query`.
    pub fn of(query: &str) -> Self {
        let lower = query.to_lowercase();
        let mut words = ContentWords::default();
        for m in ENGLISH_TERM.find_iter(&lower) {
            let term = m.as_str();
            let generic = is_stop_word(term) || is_framing_word(term);
            if !generic && !is_part_of_longer_word(&lower, m.start(), m.end()) {
                push_unique(&mut words.terms, term);
            }
        }
        crate::anchor::for_each_word(&lower, |word| {
            let is_identifier = word.chars().any(|c| c.is_ascii_digit() || c == '_');
            if is_identifier
                && word.chars().count() >= CONTENT_WORD_MIN_CHARS
                && word.chars().any(char::is_alphabetic)
            {
                push_unique(&mut words.terms, word);
            }
        });
        for m in VERSION.find_iter(&lower) {
            push_unique(&mut words.versions, m.as_str().trim_start_matches('v'));
        }
        let chars: Vec<char> = query.chars().collect();
        let framing = cjk_framing_chars(query);
        for start in 0..chars.len().saturating_sub(CONTENT_WORD_MIN_CHARS - 1) {
            let window = &chars[start..start + CONTENT_WORD_MIN_CHARS];
            let touches_framing = framing[start..start + CONTENT_WORD_MIN_CHARS].iter().any(|&f| f);
            if window.iter().all(|&c| is_cjk(c)) && !touches_framing {
                push_unique(&mut words.cjk, &window.iter().collect::<String>());
            }
        }
        words
    }

#[cfg(any(test, feature = "internals"))]
    /// True if the query has no content word.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty() && self.versions.is_empty() && self.cjk.is_empty()
    }

    /// True if some content words can only be found in a block's text (versions, CJK words);
    /// otherwise [`ContentWords::term_mask`] decides alone.
    pub fn needs_text(&self) -> bool {
        !self.versions.is_empty() || !self.cjk.is_empty()
    }

    /// The query anchors (bit `i` = anchor `i` of `anchors`) that are content terms: a block
    /// whose recall match includes one of them is admitted without reading its text.
    pub fn term_mask<'a>(&self, anchors: impl Iterator<Item = &'a str>) -> u64 {
        anchors
            .enumerate()
            .filter(|(_, a)| self.terms.iter().any(|t| t == a))
            .fold(0, |mask, (i, _)| mask | (1u64 << i))
    }

    /// True if `text` contains at least one of the content words.
    pub fn admits(&self, text: &str) -> bool {
        let lower = text.to_lowercase();
        self.terms.iter().any(|t| contains_word(&lower, t))
            || self.versions.iter().any(|v| contains_word(&lower, v))
            || self.cjk.iter().any(|w| lower.contains(w.as_str()))
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

/// `\b[a-z]{4,}\b` also matches the letters of `snake_case2` or `café`; those are not terms.
fn is_part_of_longer_word(text: &str, start: usize, end: usize) -> bool {
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    before.is_some_and(is_word_char) || after.is_some_and(is_word_char)
}

/// True if `word` occurs in `text` with no word character right before or after it.
fn contains_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| !is_part_of_longer_word(text, i, i + word.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash(text: &str) -> u64 {
        crate::types::anchor_hash(text)
    }

    /// (query, anchors with idf, topic anchors, expected topic, deictic pattern)
    type GateRow<'a> = (&'a str, &'a [(&'a str, f64)], &'a [&'a str], Topic, Option<&'a str>);

    /// Gate triples covering every branch.
    #[test]
    fn gate_branches() {
        let rows: &[GateRow] = &[
            // overlap 3/4 > 0.45: continue
            (
                "redis lock ttl",
                &[("redis", 1.0), ("lock", 2.0), ("ttl", 1.0)],
                &["redis", "lock"],
                Topic::Continue,
                None,
            ),
            // overlap 0, new 1: switch
            ("kubernetes pod", &[("kubernetes", 2.0), ("pod", 2.0)], &["redis"], Topic::Switch, None),
            // overlap 0 but deictic: continue
            (
                "this pod crashed",
                &[("pod", 2.0), ("crashed", 2.0)],
                &["redis"],
                Topic::Continue,
                Some("^(this|that|it)\\b"),
            ),
            ("那个怎么配置", &[("配置", 2.0)], &["redis"], Topic::Continue, Some("^那个")),
            // middle ground: overlap 0.3 continues
            ("redis pod", &[("redis", 3.0), ("pod", 7.0)], &["redis"], Topic::Continue, None),
            // overlap 0.15 and new 0.85: switch
            ("redis pod", &[("redis", 1.5), ("pod", 8.5)], &["redis"], Topic::Switch, None),
            // exactly 0.45 is not above it: middle ground continues
            ("a b", &[("a", 4.5), ("b", 5.5)], &["a"], Topic::Continue, None),
            // no anchors: nothing to judge, continue
            ("", &[], &[], Topic::Continue, None),
        ];
        for (query, anchors, topic, expected, deictic) in rows {
            let weights: Vec<(u64, f64)> = anchors.iter().map(|(t, i)| (hash(t), *i)).collect();
            let topic: Vec<u64> = topic.iter().map(|t| hash(t)).collect();
            let d = decide(query, &weights, |h| topic.contains(&h), || Ok::<_, ()>(false)).unwrap();
            assert_eq!(d.topic, *expected, "gate for {query:?}: {d:?}");
            assert_eq!(d.deictic, *deictic, "deictic of {query:?}");
            if !anchors.is_empty() {
                assert!((d.overlap + d.new_ratio - 1.0).abs() < 1e-12);
            }
        }
    }

    #[test]
    fn a_reply_to_a_question_continues_only_where_it_would_switch() {
        let weights = [(hash("friday"), 2.0), (hash("people"), 2.0)];
        let asked = |asks: bool| move || Ok::<_, ()>(asks);
        let d = decide("for 5 people on friday", &weights, |_| false, asked(true)).unwrap();
        assert_eq!((d.topic, d.deictic), (Topic::Continue, Some(REPLY_TO_QUESTION)));
        let d = decide("for 5 people on friday", &weights, |_| false, asked(false)).unwrap();
        assert_eq!((d.topic, d.deictic), (Topic::Switch, None));
        // a deictic pattern is reported first; the previous turn is not even read
        let d = decide(
            "it is for friday",
            &weights,
            |_| false,
            || -> Result<bool, ()> { panic!("the deictic branch needs no reply check") },
        )
        .unwrap();
        assert_eq!(d.deictic, Some("^(this|that|it)\\b"));
        // an overlapping query continues without being a reply
        let d = decide("people", &weights, |h| h == hash("people"), asked(true)).unwrap();
        assert_eq!((d.topic, d.deictic), (Topic::Continue, None));
        // errors reading the previous turn reach the caller
        assert_eq!(decide("x", &weights, |_| false, || Err::<bool, _>("unreadable")), Err("unreadable"));
    }

    #[test]
    fn content_words() {
        let w = ContentWords::of("What about Redis with asyncio in v1.2.3 and 分布式锁的问题?");
        assert_eq!(w.terms, ["redis", "asyncio"], "`about` and `with` are stop words");
        assert_eq!(w.versions, ["1.2.3"]);
        assert_eq!(w.cjk, ["分布式锁"], "windows touching framing words (的, 问题) are not words");
        // stop words and framing words of four letters are never content words
        assert!(ContentWords::of("what with that them").is_empty());
        assert!(ContentWords::of("problem: suggest something better").is_empty());
        assert!(ContentWords::of("请问一下怎么解决").is_empty());
        assert_eq!(
            ContentWords::of("fix acquire_lock in utf8mb4 ab_1").terms,
            ["acquire_lock", "utf8mb4", "ab_1"]
        );
        assert!(ContentWords::of("v2 ab_ x1").is_empty(), "identifiers shorter than 4 characters");
    }

    #[test]
    fn admission() {
        let w = ContentWords::of("redis 分布式锁 v2.0.1");
        assert!(w.admits("Use REDIS here"));
        assert!(w.admits("我们的分布式锁实现"));
        assert!(w.admits("upgrade to 2.0.1 now"));
        assert!(!w.admits("use redistribution"), "substring of a longer word");
        assert!(!w.admits("分布式事务"));
        assert!(!w.admits("2.0.10"));
    }
}
