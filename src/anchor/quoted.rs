//! Quoted phrases (DESIGN §3.1 rule 4): the whole text inside double or single quotes,
//! ASCII (`"…"`, `'…'`) and CJK (`“…”`, `‘…’`, `「…」`, `『…』`).
//!
//! An ASCII single quote only opens at the start of a word and closes at its end, so the
//! apostrophes of `don't` and `it's` are not quotes. A phrase that is already one anchor by the
//! other rules (a single word, a 2- or 3-character CJK run) is not repeated; phrases longer
//! than [`MAX_PHRASE_CHARS`] or spanning lines are not phrases but prose.

use super::cjk::is_ngram;
use crate::text::is_word_char;

/// Longer quoted text is a passage, not a phrase to look up.
pub const MAX_PHRASE_CHARS: usize = 64;

const PAIRS: &[(char, char)] =
    &[('"', '"'), ('\'', '\''), ('“', '”'), ('‘', '’'), ('「', '」'), ('『', '』')];

/// Calls `emit` with every quoted phrase of `text`, trimmed and lower-cased.
pub fn for_each_phrase(text: &str, mut emit: impl FnMut(String)) {
    let chars: Vec<(usize, char)> = text.char_indices().collect();
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
        if let Some(phrase) = text.get(inner_start..chars[j].0).and_then(normalize_phrase) {
            emit(phrase);
        }
        i = j + 1;
    }
}

fn normalize_phrase(inner: &str) -> Option<String> {
    let phrase = inner.trim();
    let len = phrase.chars().count();
    if !(2..=MAX_PHRASE_CHARS).contains(&len) || phrase.chars().any(char::is_control) {
        return None;
    }
    let is_one_word = phrase.chars().all(is_word_char);
    if is_one_word || is_ngram(phrase) {
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
            ("“分布”", &[]),
            ("unclosed \"quote here", &[]),
            ("\"spans\nlines\"", &[]),
            ("don't won't", &[]),
        ];
        for (input, expected) in rows {
            assert_eq!(phrases(input), *expected, "phrases of {input:?}");
        }
    }
}
