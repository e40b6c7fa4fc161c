//! English terms and code identifiers (DESIGN §3.1 rules 1 and 2).
//!
//! One scan finds maximal runs of letters, digits and `_` (CJK excluded). A run of letters only
//! is an English term; a run with a digit or `_` is an identifier, kept whole (`snake_case`,
//! `v1` from `v1.2.3`). Both are lower-cased. Stop words and one-character runs are dropped:
//! they identify nothing.

use super::framing;
use super::stopwords::{self, is_stop_word};
use super::word_set::WordSet;
use crate::text::is_word_char;
use std::sync::LazyLock;

/// [`listed`] flag: a stop word.
pub const STOP: u8 = 1;
/// [`listed`] flag: an English framing word.
pub const FRAMING: u8 = 2;

/// The stop words and the English framing words in one table, so that one lookup per word
/// answers both questions.
static LISTED: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::new(&[(stopwords::STOP_WORDS, STOP), (framing::ENGLISH, FRAMING)]));

/// The lists (`STOP`, `FRAMING`) that hold `word`, already lower-cased.
pub fn listed(word: &str) -> u8 {
    LISTED.flags_of(word)
}

/// Calls `emit` with every English term and identifier of `text`, lower-cased, in order.
/// The word is lower-cased into one reused buffer: no allocation per word. ASCII bytes are
/// classified as bytes; only other characters are decoded.
pub fn for_each_word(text: &str, emit: impl FnMut(&str)) {
    scan(text, true, emit);
}

/// [`for_each_word`] with stop words too: for looking words up among known anchors, which
/// never include a stop word, without paying for the stop-word test.
pub fn for_each_word_or_stop_word(text: &str, emit: impl FnMut(&str)) {
    scan(text, false, emit);
}

fn scan(text: &str, drop_stop_words: bool, mut emit: impl FnMut(&str)) {
    let bytes = text.as_bytes();
    let mut word = String::new();
    let mut i = 0;
    while i < bytes.len() {
        let (is_word, len) = classify(text, i);
        if !is_word {
            i += len;
            continue;
        }
        let start = i;
        let mut ascii = len == 1;
        i += len;
        while i < bytes.len() {
            let (is_word, len) = classify(text, i);
            if !is_word {
                break;
            }
            ascii &= len == 1;
            i += len;
        }
        if let Some(run) = text.get(start..i)
            && normalize_word(run, ascii, &mut word)
            && !(drop_stop_words && is_stop_word(&word))
        {
            emit(&word);
        }
    }
}

/// Whether the character at byte `i` of `text` is a word character, and its length in bytes.
fn classify(text: &str, i: usize) -> (bool, usize) {
    let b = text.as_bytes()[i];
    if b < 0x80 {
        return (b.is_ascii_alphanumeric() || b == b'_', 1);
    }
    match text.get(i..).and_then(|rest| rest.chars().next()) {
        Some(c) => (is_word_char(c), c.len_utf8()),
        // `i` is always a character boundary: every step advances by a whole character.
        None => (false, 1),
    }
}

/// Lower-cases a word run into `word`; false for runs too short or without a letter or digit.
fn normalize_word(run: &str, ascii: bool, word: &mut String) -> bool {
    word.clear();
    if ascii {
        // A run of `_` alone, or of one character, identifies nothing.
        if run.len() < 2 || run.bytes().all(|b| b == b'_') {
            return false;
        }
        word.push_str(run);
        word.make_ascii_lowercase();
    } else {
        if !run.chars().any(char::is_alphanumeric) || run.chars().nth(1).is_none() {
            return false;
        }
        word.extend(run.chars().flat_map(char::to_lowercase));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn words_and_identifiers() {
        let rows: &[(&str, &[&str])] = &[
            ("Use Redis with asyncio", &["use", "redis", "asyncio"]),
            ("bump v1.2.3 now", &["bump", "v1"]),
            ("call snake_case and CamelCase", &["call", "snake_case", "camelcase"]),
            ("a b c __ 7 42", &["42"]),
            ("Redis锁问题", &["redis"]),
            ("multi-process", &["multi", "process"]),
            ("Café déjà", &["café", "déjà"]),
            ("x_ _x __init__ ÉTÉ é", &["x_", "_x", "__init__", "été"]),
            ("Ünïcödé WORDS", &["ünïcödé", "words"]),
        ];
        for (input, expected) in rows {
            assert_eq!(words(input), *expected, "words of {input:?}");
        }
    }

    /// The rule as first written: runs of `is_word_char`, decoded character by character.
    fn words_by_definition(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut run = String::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if is_word_char(c) {
                run.push(c);
                continue;
            }
            let lower: String = run.chars().flat_map(char::to_lowercase).collect();
            if run.chars().any(char::is_alphanumeric) && run.chars().count() >= 2 && !is_stop_word(&lower) {
                out.push(lower);
            }
            run.clear();
        }
        out
    }

    #[test]
    fn stop_words_only_where_asked() {
        let mut all = Vec::new();
        for_each_word_or_stop_word("The lock is on the Redis key", |w| all.push(w.to_string()));
        assert_eq!(all, ["the", "lock", "is", "on", "the", "redis", "key"]);
        assert_eq!(words("The lock is on the Redis key"), ["lock", "redis", "key"]);
    }

    #[test]
    fn listed_words_carry_both_flags() {
        assert_eq!(listed("the"), STOP);
        assert_eq!(listed("problem"), FRAMING);
        assert_eq!(listed("again"), STOP | FRAMING);
        assert_eq!(listed("redis"), 0);
    }

    proptest::proptest! {
        #[test]
        fn scanner_agrees_with_the_definition(text in "[a-zA-Z0-9_ .,'\"éÉßİ分布式锁\u{0}-\u{7f}\u{80}-\u{3000}]{0,60}") {
            proptest::prop_assert_eq!(words(&text), words_by_definition(&text));
        }
    }
}
