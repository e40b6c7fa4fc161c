//! Anchors: the units of text with retrieval power (DESIGN §3.1), with term frequencies.
//!
//! [`extract`] turns a text into its anchors in priority order of the rules: English terms and
//! identifiers, hyphenated ones (`ticket-4242`) whole beside their parts (`word`), CJK
//! 2/3-grams (`cjk`), quoted phrases (`quoted`). It is pure and
//! infallible. Which anchors take part in a query (the CJK IDF floor, the 20-character fallback)
//! is decided with index statistics, in the crate's `query` module. [`extract_hashed`] and
//! [`extract_user`] give the same anchors as hashes, for indexing (`hashed`): every indexed
//! turn goes through them, so they find words and CJK runs in one scan of the text.

mod cjk;
mod forms;
mod framing;
mod hashed;
mod quoted;
mod stopwords;
mod word;
mod word_set;

pub use cjk::is_ngram as is_cjk_ngram;
pub use forms::word_forms;
pub use framing::{cjk_framing_chars, is_framing_word};
#[cfg(any(test, feature = "internals"))]
pub use framing::cjk_framing_ngrams;
pub use stopwords::is_stop_word;
pub use word::{for_each_word, is_one_word};

/// Version of the rules in this module. Stored in the index: an index built under other rules
/// must be rebuilt, since its postings would disagree with the anchors of new text.
///
/// 2: word runs joined by single hyphens are an anchor beside their parts (`ticket-4242`).
pub const ANCHOR_RULES_VERSION: u32 = 2;

/// DESIGN §3.1: a query without anchors falls back to its first 20 characters as one anchor.
pub const FALLBACK_ANCHOR_CHARS: usize = 20;

/// The anchors of one text with their term frequencies, sorted by anchor text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnchorCounts {
    entries: Vec<(String, u32)>,
}

impl AnchorCounts {
    /// Builds counts from `(anchor, tf)` pairs in any order; equal anchors add up.
    pub fn from_pairs(mut pairs: Vec<(String, u32)>) -> Self {
        pairs.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut entries: Vec<(String, u32)> = Vec::with_capacity(pairs.len());
        for (anchor, tf) in pairs {
            match entries.last_mut() {
                Some((last, count)) if *last == anchor => *count += tf,
                _ => entries.push((anchor, tf)),
            }
        }
        Self { entries }
    }

#[cfg(any(test, feature = "internals"))]
    /// `(anchor, tf)` pairs sorted by anchor.
    pub fn entries(&self) -> &[(String, u32)] {
        &self.entries
    }

#[cfg(any(test, feature = "internals"))]
    /// Number of distinct anchors.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

#[cfg(any(test, feature = "internals"))]
    /// True if the text had no anchors.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

#[cfg(any(test, feature = "internals"))]
    /// Total anchor occurrences: the document length BM25 normalizes by.
    pub fn total(&self) -> u32 {
        self.entries.iter().map(|(_, tf)| *tf).sum()
    }

#[cfg(any(test, feature = "internals"))]
    /// Term frequency of `anchor`, 0 if absent.
    pub fn tf(&self, anchor: &str) -> u32 {
        self.entries.binary_search_by(|(a, _)| a.as_str().cmp(anchor)).map_or(0, |i| self.entries[i].1)
    }

#[cfg(any(test, feature = "internals"))]
    /// True if `anchor` occurs in the text.
    pub fn contains(&self, anchor: &str) -> bool {
        self.tf(anchor) > 0
    }

    /// The anchors, sorted.
    pub fn anchors(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(a, _)| a.as_str())
    }
}

/// Extracts the anchors of `text` with their term frequencies.
pub fn extract(text: &str) -> AnchorCounts {
    let mut pairs = Vec::new();
    word::for_each_word(text, |w| pairs.push((w.to_string(), 1)));
    cjk::for_each_ngram(text, |g| pairs.push((g.to_string(), 1)));
    quoted::for_each_phrase(text, |p| pairs.push((p, 1)));
    AnchorCounts::from_pairs(pairs)
}

/// Hashes of the anchors of `text` that are framing words ([`is_framing_word`]) or CJK n-grams
/// touching one ([`cjk_framing_ngrams`]), sorted: how the text asks, not what it is about.
pub fn framing_hashes(text: &str, hash: impl Fn(&str) -> u64) -> Vec<u64> {
    let mut out = Vec::new();
    word::for_each_word(text, |w| {
        if is_framing_word(w) {
            out.push(hash(w));
        }
    });
    framing::for_each_framing_ngram(text, |g| out.push(hash(g)));
    sorted_set(out)
}

/// Hashes of the CJK 3-grams of `text`, sorted. The gate leaves them out: each repeats what its
/// two 2-grams already say, and crossing word boundaries more often than 2-grams do, they
/// inflated the share of "new" anchors (measured in `docs/relevance.md`).
pub fn cjk_trigram_hashes(text: &str, hash: impl Fn(&str) -> u64) -> Vec<u64> {
    let mut out = Vec::new();
    cjk::for_each_ngram_of(text, &[3], |g| out.push(hash(g)));
    sorted_set(out)
}

fn sorted_set(mut hashes: Vec<u64>) -> Vec<u64> {
    hashes.sort_unstable();
    hashes.dedup();
    hashes
}

/// A user message as indexing needs it, from one scan of the text: its anchors, and what the
/// topic gate leaves out of them ([`framing_hashes`], [`cjk_trigram_hashes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserAnchors {
    /// [`extract_hashed`] of the text.
    pub anchors: Vec<HashedAnchor>,
    /// [`framing_hashes`] of the text.
    pub framing: Vec<u64>,
    /// [`cjk_trigram_hashes`] of the text.
    pub trigrams: Vec<u64>,
}

/// [`UserAnchors`] of `text`: the three results of separate calls, for one scan of the text
/// (and one of the quotes).
pub fn extract_user(text: &str, hash: impl Fn(&str) -> u64) -> UserAnchors {
    hashed::Hits::collect(text, &hash, true).into_user()
}

/// One anchor as the index stores it: its hash, term frequency and whether it is a CJK n-gram
/// (the kind the IDF floor applies to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HashedAnchor {
    /// `store::anchor_hash` of the anchor text.
    pub hash: u64,
    /// Term frequency.
    pub tf: u32,
    /// True for a CJK 2- or 3-gram.
    pub cjk_ngram: bool,
}

/// [`extract`] for indexing: the same anchors, as hashes sorted ascending, without allocating
/// a string per occurrence. `hash` is the hash function of the index's keys.
pub fn extract_hashed(text: &str, hash: impl Fn(&str) -> u64) -> Vec<HashedAnchor> {
    hashed::Hits::collect(text, &hash, false).into_anchors()
}

/// Calls `emit` with each word and identifier anchor of `text` (hyphenated chains included:
/// every anchor that is [`is_one_word`]) and, if `cjk`, each CJK 2- and 3-gram: the anchors
/// [`extract`] gives but quoted phrases, without counting them, and the
/// stop words too (no anchor is one, so they match nothing). For matching a few known anchors
/// against many sentences.
pub fn for_each_single_anchor(text: &str, cjk: bool, mut emit: impl FnMut(&str)) {
    word::for_each_word_or_stop_word(text, &mut emit);
    if cjk {
        cjk::for_each_ngram(text, emit);
    }
}

/// The fallback anchor of a query that yields none: its first 20 characters, trimmed and
/// lower-cased (DESIGN §3.1). `None` for a text that is blank.
pub fn fallback_anchor(text: &str) -> Option<String> {
    let head: String = text.trim().chars().take(FALLBACK_ANCHOR_CHARS).collect();
    let head = head.trim().to_lowercase();
    (!head.is_empty()).then_some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(&'static str, u32)> {
        // Leak is fine in a test: it turns owned anchors into comparable rows.
        extract(text).entries().iter().map(|(a, tf)| (&*Box::leak(a.clone().into_boxed_str()), *tf)).collect()
    }

    #[test]
    fn exact_anchors_and_tfs() {
        let rows: &[(&str, &[(&str, u32)])] = &[
            (
                "Redis lock: use Redis SETNX with a TTL.",
                &[("lock", 1), ("redis", 2), ("setnx", 1), ("ttl", 1), ("use", 1)],
            ),
            (
                "分布式锁和分布式事务",
                &[
                    ("分布", 2),
                    ("分布式", 2),
                    ("布式", 2),
                    ("布式事", 1),
                    ("布式锁", 1),
                    ("式事", 1),
                    ("式事务", 1),
                    ("式锁", 1),
                    ("式锁和", 1),
                    ("和分", 1),
                    ("和分布", 1),
                    ("锁和", 1),
                    ("锁和分", 1),
                    ("事务", 1),
                ],
            ),
            (
                "call parse_config() in v2.0.1 \"config loader\"",
                &[
                    ("call", 1),
                    ("config", 1),
                    ("config loader", 1),
                    ("loader", 1),
                    ("parse_config", 1),
                    ("v2", 1),
                ],
            ),
            ("用Redis实现锁", &[("redis", 1), ("实现", 1), ("实现锁", 1), ("现锁", 1)]),
            (
                "host-4242 ticket-6406 \"ticket-4242\"",
                &[
                    ("4242", 2),
                    ("6406", 1),
                    ("host", 1),
                    ("host-4242", 1),
                    ("ticket", 2),
                    ("ticket-4242", 1),
                    ("ticket-6406", 1),
                ],
            ),
            (
                "--Dry-Run the x86-64 分布-式",
                &[("dry", 1), ("dry-run", 1), ("run", 1), ("x86", 1), ("x86-64", 1), ("64", 1), ("分布", 1)],
            ),
            ("the and of", &[]),
        ];
        for (input, expected) in rows {
            let mut expected = expected.to_vec();
            expected.sort();
            assert_eq!(pairs(input), expected, "anchors of {input:?}");
        }
    }

    fn hash(anchor: &str) -> u64 {
        xxhash_rust::xxh3::xxh3_64(anchor.as_bytes())
    }

    /// [`extract_hashed`] as its definition: [`extract`]'s anchors, hashed.
    fn hashed_by_definition(text: &str) -> Vec<HashedAnchor> {
        let mut expected: Vec<HashedAnchor> = extract(text)
            .entries()
            .iter()
            .map(|(a, tf)| HashedAnchor { hash: hash(a), tf: *tf, cjk_ngram: is_cjk_ngram(a) })
            .collect();
        expected.sort_unstable_by_key(|a| a.hash);
        expected
    }

    #[test]
    fn hashed_extraction_agrees_with_text_extraction() {
        for text in [
            "Redis lock: use Redis SETNX with a TTL.",
            "分布式锁和分布式事务 “跨进程通信” v1.2.3 CamelCase snake_case",
            "Ünïcödé WORDS and 'quoted phrase' here",
            "ticket-4242 \"ticket-4242\" host-4242, --dry-run gpt-4o EN-us 分布式-锁 a--b x-",
        ] {
            assert_eq!(extract_hashed(text, hash), hashed_by_definition(text), "anchors of {text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn hashed_extractions_agree_with_the_separate_ones(
            text in proptest::prop_oneof![
                "[a-zA-Z0-9_ .,'\"“”‘’「」éİ\n分布式锁请问一下怎么的是我了吗有没有生产环境\u{80}-\u{3100}]{0,120}",
                // Hyphenated chains, quoted or not.
                "([a-zA-Z0-9]{1,5}[- \"]{1,2}){0,40}",
                // Long enough for a hundred words, or n-grams, of one kind.
                "([a-zA-Z_]{1,6}[ .]){0,160}",
                "[分布式锁请问一下怎么的是我了吗有没有生产环境，。 a]{0,160}",
            ]
        ) {
            proptest::prop_assert_eq!(extract_hashed(&text, hash), hashed_by_definition(&text));
            let expected = UserAnchors {
                anchors: hashed_by_definition(&text),
                framing: framing_hashes(&text, hash),
                trigrams: cjk_trigram_hashes(&text, hash),
            };
            proptest::prop_assert_eq!(extract_user(&text, hash), expected);
        }
    }

    #[test]
    fn framing_hashes_are_the_phrasing() {
        let framing = framing_hashes("Thanks! 请问一下分布式锁怎么续期? any suggestion for redis", hash);
        for word in ["thanks", "suggestion", "请问", "一下", "怎么", "下分", "锁怎"] {
            assert!(framing.binary_search(&hash(word)).is_ok(), "{word} is framing");
        }
        for word in ["redis", "分布", "分布式", "续期"] {
            assert!(framing.binary_search(&hash(word)).is_err(), "{word} names the topic");
        }
    }

    #[test]
    fn user_extraction_is_the_three_results() {
        for text in [
            "Thanks! 请问一下分布式锁怎么续期? any suggestion for redis",
            "plain \"quoted phrase\" with problem words and “跨进程通信”",
            "",
            "分布式锁和分布式事务",
        ] {
            let expected = UserAnchors {
                anchors: extract_hashed(text, hash),
                framing: framing_hashes(text, hash),
                trigrams: cjk_trigram_hashes(text, hash),
            };
            assert_eq!(extract_user(text, hash), expected, "{text:?}");
        }
    }

    #[test]
    fn trigram_hashes() {
        let expected: Vec<u64> = {
            let mut v = vec![hash("分布式"), hash("布式锁")];
            v.sort_unstable();
            v
        };
        assert_eq!(cjk_trigram_hashes("redis 分布式锁 ab", hash), expected);
    }

    #[test]
    fn counts_helpers() {
        let counts = extract("redis redis lock");
        assert_eq!(counts.tf("redis"), 2);
        assert_eq!(counts.tf("absent"), 0);
        assert_eq!(counts.total(), 3);
        assert_eq!(counts.len(), 2);
    }

    #[test]
    fn fallback_is_first_twenty_chars() {
        assert_eq!(fallback_anchor("  ?? !! -- ?? !! -- ?? !!  ").as_deref(), Some("?? !! -- ?? !! -- ??"));
        assert_eq!(fallback_anchor("   "), None);
    }
}
