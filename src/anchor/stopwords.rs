//! The English stop words: words with no retrieval value (DESIGN §3.1).
//!
//! The list is small and fixed on purpose: function words (articles, pronouns, auxiliaries,
//! prepositions, conjunctions) and nothing topical. Changing it changes every stored anchor,
//! so it bumps [`super::ANCHOR_RULES_VERSION`]. Stop words are never content words (§3.3).

use super::word::{STOP, listed};

/// Sorted, so a reader finds a word at a glance (the lookup is one table with the framing
/// words, [`listed`]).
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "each", "for",
    "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "just", "me", "more", "most", "my", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should",
    "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they",
    "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// The longest stop word, in bytes: longer words are not looked up at all.
pub const LONGEST: usize = 7;

/// True if `word` (already lower-cased) is an English stop word.
pub fn is_stop_word(word: &str) -> bool {
    word.len() <= LONGEST && listed(word) & STOP != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_is_sorted_and_unique() {
        assert!(STOP_WORDS.windows(2).all(|w| w[0] < w[1]), "keep STOP_WORDS sorted");
        assert_eq!(STOP_WORDS.iter().map(|w| w.len()).max(), Some(LONGEST));
    }

    #[test]
    fn membership() {
        for w in ["the", "with", "that", "what", "yours", "a"] {
            assert!(is_stop_word(w), "{w} should be a stop word");
        }
        for w in ["redis", "lock", "problem", "asyncio", "The"] {
            assert!(!is_stop_word(w), "{w} should not be a stop word");
        }
    }
}
