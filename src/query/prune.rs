//! Sentence pruning (DESIGN §3.6): keep only the sentences of a block that carry the query.
//!
//! Each side keeps at most [`MAX_SENTENCES_PER_SIDE`] sentences that contain one of the query's
//! focus anchors (the anchors that must be covered, see `pipeline`), the ones with the most of
//! their IDF, in their original order. The assistant side always keeps its first sentence (it
//! says what the reply is about) within that cap. A block where no sentence contains a focus
//! anchor is empty after pruning: the caller skips it.

use crate::anchor::{self, is_cjk_ngram};
use crate::query::anchors::QueryAnchors;

use crate::text::{Sentence, split_sentences};
use crate::types::anchor_hash;

/// DESIGN §3.6: sentences kept per side.
pub const MAX_SENTENCES_PER_SIDE: usize = 3;

/// Marks where pruning removed sentences between two kept ones.
pub const GAP: &str = " … ";

/// A block after pruning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedBlock {
    /// The kept user sentences.
    pub user: String,
    /// The kept assistant sentences.
    pub assistant: String,
    /// Query anchors the kept text contains (bit `i` = anchor `i`).
    pub matched: u64,
}

/// Prunes a block to the sentences that contain the query's `focus` anchors (a mask over the
/// query's anchors; see `pipeline`); `None` if no sentence does. The returned mask is every
/// query anchor in the kept text.
pub fn prune(user: &str, assistant: &str, query: &QueryAnchors, focus: u64) -> Option<PrunedBlock> {
    let matcher = Matcher::new(query);
    let user = Side::new(user, &matcher);
    let assistant = Side::new(assistant, &matcher);
    let mut user_kept = user.matched(query, focus, false);
    let mut assistant_kept = assistant.matched(query, focus, true);
    if user_kept.is_empty() && assistant_kept.is_empty() {
        return None;
    }
    if assistant_kept.is_empty() && !assistant.sentences.is_empty() {
        assistant_kept.push(0);
    }
    // A kept question keeps the sentence that follows it, in the turn read as one dialogue (the
    // user's sentences, then the reply's): that is where its answer starts.
    let user_questions: Vec<usize> = user_kept.iter().copied().filter(|&i| user.is_question(i)).collect();
    for i in user_questions {
        if i + 1 < user.sentences.len() {
            user_kept.push(i + 1);
        } else if !assistant.sentences.is_empty() {
            assistant_kept.push(0);
        }
    }
    let assistant_questions: Vec<usize> =
        assistant_kept.iter().copied().filter(|&i| assistant.is_question(i)).collect();
    assistant_kept
        .extend(assistant_questions.into_iter().map(|i| i + 1).filter(|&i| i < assistant.sentences.len()));
    let (user_text, user_mask) = user.keep(&mut user_kept);
    let (assistant_text, assistant_mask) = assistant.keep(&mut assistant_kept);
    Some(PrunedBlock { user: user_text, assistant: assistant_text, matched: user_mask | assistant_mask })
}

/// One side of a block: its sentences and the query anchors each contains.
struct Side<'t> {
    sentences: Vec<Sentence<'t>>,
    masks: Vec<u64>,
}

impl<'t> Side<'t> {
    fn new(text: &'t str, matcher: &Matcher<'_>) -> Self {
        let sentences = split_sentences(text);
        let masks = sentences.iter().map(|s| matcher.mask(s.text)).collect();
        Side { sentences, masks }
    }

    /// At most [`MAX_SENTENCES_PER_SIDE`] sentences with a focus anchor, the ones with the most
    /// focus IDF (then the earlier); with `keep_first`, the first sentence is one of them when
    /// any sentence matched.
    fn matched(&self, query: &QueryAnchors, focus: u64, keep_first: bool) -> Vec<usize> {
        let masks = &self.masks;
        let mut ranked: Vec<usize> = (0..masks.len()).filter(|&i| masks[i] & focus != 0).collect();
        let weight = |i: usize| query.idf_of(masks[i] & focus);
        ranked.sort_by(|&a, &b| weight(b).total_cmp(&weight(a)).then(a.cmp(&b)));
        if keep_first && !ranked.is_empty() && !ranked.contains(&0) {
            ranked.insert(0, 0);
        }
        ranked.truncate(MAX_SENTENCES_PER_SIDE);
        ranked
    }

    fn is_question(&self, i: usize) -> bool {
        self.sentences[i].text.ends_with(['?', '？'])
    }

    /// The text of the `kept` sentences in their order, and the query anchors in them.
    fn keep(&self, kept: &mut Vec<usize>) -> (String, u64) {
        kept.sort_unstable();
        kept.dedup();
        (join(&self.sentences, kept), kept.iter().fold(0, |m, &i| m | self.masks[i]))
    }
}

/// Joins kept sentences, marking each gap where sentences were left out.
fn join(sentences: &[Sentence<'_>], kept: &[usize]) -> String {
    let mut out = String::new();
    let mut previous: Option<usize> = None;
    for &i in kept {
        match previous {
            None if i > 0 => out.push_str(GAP.trim_start()),
            Some(p) if i > p + 1 => out.push_str(GAP),
            Some(_) => out.push(' '),
            None => {}
        }
        out.push_str(sentences[i].text);
        previous = Some(i);
    }
    if previous.is_some_and(|p| p + 1 < sentences.len()) {
        out.push_str(GAP.trim_end());
    }
    out
}

/// Finds which query anchors a sentence contains. This runs for every sentence of every
/// candidate turn, so sentences are not put through full anchor extraction: their words (and
/// CJK n-grams, if the query has some) are hashed and looked up among the query's.
struct Matcher<'q> {
    /// `(hash, bit)` of the word and n-gram anchors, sorted by hash.
    single: Vec<(u64, u64)>,
    /// The query has CJK n-gram anchors.
    cjk: bool,
    /// `(bit, text)` of phrases and the fallback anchor, matched by their text.
    text: Vec<(u64, &'q str)>,
}

impl<'q> Matcher<'q> {
    fn new(query: &'q QueryAnchors) -> Self {
        let mut matcher = Matcher { single: Vec::new(), cjk: false, text: Vec::new() };
        for (i, a) in query.anchors().iter().enumerate() {
            // Words (hyphenated ones too) and n-grams are matched as anchors (so `lock` is not
            // found in `block`, nor `ticket-42` in `xticket-421`); phrases and the fallback
            // anchor, which extraction of a sentence need not produce, by their text.
            if anchor::is_one_word(&a.text) {
                matcher.single.extend(a.hashes().map(|h| (h, 1u64 << i)));
            } else if is_cjk_ngram(&a.text) {
                matcher.single.push((a.hash, 1u64 << i));
                matcher.cjk = true;
            } else {
                matcher.text.push((1u64 << i, a.text.as_str()));
            }
        }
        // A hash may stand for two anchors (`paint` is a form of `painted`): one entry, both bits.
        matcher.single.sort_unstable();
        matcher.single.dedup_by(|next, kept| {
            let same = next.0 == kept.0;
            if same {
                kept.1 |= next.1;
            }
            same
        });
        matcher
    }

    /// The query anchors `sentence` contains.
    fn mask(&self, sentence: &str) -> u64 {
        let mut mask = 0;
        anchor::for_each_single_anchor(sentence, self.cjk, |a| {
            let hash = anchor_hash(a);
            if let Ok(i) = self.single.binary_search_by_key(&hash, |s| s.0) {
                mask |= self.single[i].1;
            }
        });
        if !self.text.is_empty() {
            let lower = sentence.to_lowercase();
            for &(bit, text) in &self.text {
                if lower.contains(text) {
                    mask |= bit;
                }
            }
        }
        mask
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn query(text: &str) -> QueryAnchors {
        // Equal document frequencies: anchors order by text, idf equal.
        let counts = anchor::extract(text);
        let _: HashMap<(), ()> = HashMap::new();
        QueryAnchors::build(text, &counts, 100, |_| Ok::<_, ()>(1)).unwrap()
    }

    #[test]
    fn pruning_rows() {
        // (user, assistant, query, expected user, expected assistant)
        let rows: &[(&str, &str, &str, &str, &str)] = &[
            // `. ` split; only the anchored sentence stays, gaps are marked
            (
                "Hello there. The redis lock expired. Thanks.",
                "Sure. Use a longer TTL.",
                "redis ttl",
                "… The redis lock expired. …",
                "Sure. Use a longer TTL.",
            ),
            // `\n` split, assistant keeps its first sentence without an anchor
            (
                "first line\nredis line",
                "Okay then.\nNothing here.\nredis again",
                "redis",
                "… redis line",
                "Okay then. … redis again",
            ),
            // CJK sentence ends
            (
                "你好。分布式锁超时了！怎么办？",
                "建议。续期分布式锁。",
                "分布式锁",
                "… 分布式锁超时了！ …",
                "建议。 续期分布式锁。",
            ),
            // three-sentence cap per side: the three with most query IDF win
            (
                "redis a. redis lock. redis lock ttl. redis lock ttl expire. plain.",
                "",
                "redis lock ttl expire",
                "… redis lock. redis lock ttl. redis lock ttl expire. …",
                "",
            ),
            // `lock` is not found inside `block`
            ("a block here", "a block there", "lock", "", ""),
        ];
        for (user, assistant, q, want_user, want_assistant) in rows {
            let q = query(q);
            let got = prune(user, assistant, &q, q.full_mask());
            match got {
                Some(p) => {
                    assert_eq!(p.user, *want_user, "user side of {user:?} for {q:?}");
                    assert_eq!(p.assistant, *want_assistant, "assistant side of {assistant:?} for {q:?}");
                }
                None => {
                    assert!(want_user.is_empty() && want_assistant.is_empty(), "{user:?} pruned to nothing")
                }
            }
        }
    }

    #[test]
    fn a_kept_question_keeps_what_follows_it() {
        let q = query("adopt shelter");
        // The user's matched question is the last user sentence: the reply's first sentence
        // (kept anyway) answers it. A question inside a side keeps the next sentence there.
        let p =
            prune("Hi. Did you adopt the pup? Yes, last week. Bye now.", "Cute.", &q, q.full_mask()).unwrap();
        assert_eq!(p.user, "… Did you adopt the pup? Yes, last week. …");
        let p = prune(
            "So, where did you adopt her? Nice.",
            "Cute. From a local place. Great day.",
            &q,
            q.full_mask(),
        )
        .unwrap();
        assert_eq!(p.user, "So, where did you adopt her? Nice.");
        assert_eq!(p.assistant, "Cute. …");
        let p =
            prune("Tell me.", "Okay. Why adopt now? Because she needed a home. The end.", &q, q.full_mask())
                .unwrap();
        assert_eq!(p.assistant, "Okay. Why adopt now? Because she needed a home. …");
        // A sentence that states, not asks, keeps no neighbour.
        let p = prune("I adopt pets. Another line. More.", "", &q, q.full_mask()).unwrap();
        assert_eq!(p.user, "I adopt pets. …");
    }

    #[test]
    fn hyphenated_anchors_match_as_whole_words() {
        let q = query("ticket-4242");
        let bit = |text: &str| 1u64 << q.anchors().iter().position(|a| a.text == text).unwrap();
        let whole = bit("ticket-4242");
        let matcher = Matcher::new(&q);
        for sentence in ["Ticket-4242 failed", "see (ticket-4242).", "--ticket-4242", "\"ticket-4242\" again"]
        {
            assert_ne!(matcher.mask(sentence) & whole, 0, "{sentence:?} holds ticket-4242");
        }
        for sentence in
            ["xticket-42421", "ticket-4242-b", "ticket 4242", "ticket--4242", "host-4242 ticket-6406"]
        {
            assert_eq!(matcher.mask(sentence) & whole, 0, "{sentence:?} does not hold ticket-4242");
        }
        assert_eq!(matcher.mask("host-4242 ticket-6406"), bit("ticket") | bit("4242"));
    }

    #[test]
    fn empty_after_pruning_is_none() {
        let q = query("redis");
        assert_eq!(prune("nothing relevant", "still nothing", &q, q.full_mask()), None);
    }

    #[test]
    fn matched_mask_covers_kept_text_only() {
        let q = query("alpha beta");
        let p =
            prune("alpha one. x. y. z. w. alpha two. alpha three. alpha four beta", "", &q, q.full_mask())
                .unwrap();
        assert_eq!(p.matched, q.full_mask());
    }

    #[test]
    fn only_focus_anchors_keep_sentences() {
        let q = query("alpha beta");
        let alpha = 1 << q.anchors().iter().position(|a| a.text == "alpha").unwrap();
        let p = prune("beta only here. alpha here", "", &q, alpha).unwrap();
        assert_eq!(p.user, "… alpha here");
        assert_eq!(prune("beta only here", "beta", &q, alpha), None, "beta alone keeps nothing");
    }
}
