//! Quoted phrases (DESIGN §3.1 rule 4): the whole text inside double or single quotes,
//! ASCII (`"…"`, `'…'`) and CJK (`“…”`, `‘…’`, `「…」`, `『…』`).
//!
//! An ASCII single quote only opens at the start of a word and closes at its end, so the
//! apostrophes of `don't` and `it's` are not quotes. A phrase that is already one anchor by the
//! other rules (a single word, a hyphenated chain such as `"ticket-4242"`, a 2- or 3-character
//! CJK run) is not repeated; phrases longer
//! than [`MAX_PHRASE_CHARS`] or spanning lines are not phrases but prose.

use super::cjk::is_ngram;
use super::word::is_one_word;
use crate::text::is_word_char;

/// Longer quoted text is a passage, not a phrase to look up.
pub const MAX_PHRASE_CHARS: usize = 64;

const PAIRS: &[(char, char)] =
    &[('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’'), ('「', '」'), ('『', '』')];

/// Calls `emit` with every quoted phrase of `text`, trimmed and lower-cased.
pub fn for_each_phrase(text: &str, mut emit: impl FnMut(String)) {
    let mut pos = 0;
    while let Some(open_at) = next_opening(text.as_bytes(), pos) {
        let Some(open) = text.get(open_at..).and_then(|rest| rest.chars().next()) else { return };
        let after_open = open_at + open.len_utf8();
        pos = after_open;
        let Some(&(_, close)) = PAIRS.iter().find(|(o, _)| *o == open) else { continue };
        if open == '\'' && text[..open_at].chars().next_back().is_some_and(is_word_char) {
            continue;
        }
        let Some(close_at) = find_close(&text[after_open..], close).map(|k| after_open + k) else { continue };
        if let Some(phrase) = text.get(after_open..close_at).and_then(normalize_phrase) {
            emit(phrase);
        }
        pos = close_at + close.len_utf8();
    }
}

/// Byte offset of the first byte at or after `from` that may open a quote: `"`, `'`, or the
/// first byte of `“ ‘` (0xE2) and `「 『` (0xE3). These are never continuation bytes, so it is
/// a character boundary.
fn next_opening(bytes: &[u8], from: usize) -> Option<usize> {
    let may_open = |b: u8| matches!(b, b'"' | b'\'' | 0xE2 | 0xE3);
    let rest = bytes.get(from..)?;
    // Most of a text opens no quote: test 32 bytes at a time without a branch per byte (the
    // compiler vectorizes the fold), then find the byte in the chunk that has one.
    for (k, chunk) in rest.chunks(32).enumerate() {
        if chunk.iter().fold(false, |any, &b| any | may_open(b)) {
            return chunk.iter().position(|&b| may_open(b)).map(|i| from + k * 32 + i);
        }
    }
    None
}

/// Byte offset in `rest` of the quote `close` that ends a phrase on this line: an ASCII single
/// quote only at the end of a word.
fn find_close(rest: &str, close: char) -> Option<usize> {
    let mut chars = rest.char_indices().peekable();
    while let Some((k, c)) = chars.next() {
        if c == '\n' {
            return None;
        }
        if c == close && (close != '\'' || chars.peek().is_none_or(|&(_, next)| !is_word_char(next))) {
            return Some(k);
        }
    }
    None
}

fn normalize_phrase(inner: &str) -> Option<String> {
    let phrase = inner.trim();
    let len = phrase.chars().count();
    if !(2..=MAX_PHRASE_CHARS).contains(&len) || phrase.chars().any(char::is_control) {
        return None;
    }
    if is_one_word(phrase) || is_ngram(phrase) {
        return None;
    }
    Some(phrase.to_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phrases(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_phrase(text, |p| out.push(p));
        out
    }

    #[test]
    fn quoted_phrases() {
        let rows: &[(&str, &[&str])] = &[
            (r#"the "Connection Refused" error"#, &["connection refused"]),
            ("it's 'lock timeout' again, don't", &["lock timeout"]),
            ("“分布式锁”和「跨进程通信」", &["分布式锁", "跨进程通信"]),
            (r#"just "redis" here"#, &[]),
            (r#"see "ticket-4242" and "--dry-run" and "ticket 4242""#, &["--dry-run", "ticket 4242"]),
            ("“分布”", &[]),
            ("unclosed \"quote here", &[]),
            ("\"spans\nlines\"", &[]),
            ("don't won't", &[]),
        ];
        for (input, expected) in rows {
            assert_eq!(phrases(input), *expected, "phrases of {input:?}");
        }
    }

    /// The rule as first written: over a vector of the text's characters.
    fn phrases_by_definition(text: &str) -> Vec<String> {
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let (open_at, open) = chars[i];
            let Some(&(_, close)) = PAIRS.iter().find(|(o, _)| *o == open) else {
                i += 1;
                continue;
            };
            if open == '\'' && i > 0 && is_word_char(chars[i - 1].1) {
                i += 1;
                continue;
            }
            let close_index = (i + 1..chars.len()).find(|&j| {
                let (_, c) = chars[j];
                c == '\n'
                    || (c == close
                        && (close != '\'' || chars.get(j + 1).is_none_or(|&(_, next)| !is_word_char(next))))
            });
            let Some(j) = close_index.filter(|&j| chars[j].1 != '\n') else {
                i += 1;
                continue;
            };
            let inner_start = open_at + open.len_utf8();
            out.extend(text.get(inner_start..chars[j].0).and_then(normalize_phrase));
            i = j + 1;
        }
        out
    }

    proptest::proptest! {
        #[test]
        fn scanner_agrees_with_the_definition(text in "[ab '\"\n“”‘’「」『』分布x_.é]{0,40}") {
            proptest::prop_assert_eq!(phrases(&text), phrases_by_definition(&text));
        }
    }
}
