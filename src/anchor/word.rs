//! English terms and code identifiers (DESIGN §3.1 rules 1 and 2).
//!
//! One scan finds maximal runs of letters, digits and `_` (CJK excluded). A run of letters only
//! is an English term; a run with a digit or `_` is an identifier, kept whole (`snake_case`,
//! `v1` from `v1.2.3`). Both are lower-cased. Stop words and one-character runs are dropped:
//! they identify nothing.

use super::stopwords::is_stop_word;
use crate::text::is_word_char;

/// Calls `emit` with every English term and identifier of `text`, lower-cased, in order.
/// The word is lower-cased into one reused buffer: no allocation per word.
pub fn for_each_word(text: &str, mut emit: impl FnMut(&str)) {
    let mut run_start = None;
    let mut word = String::new();
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        match (is_word_char(c), run_start) {
            (true, None) => run_start = Some(i),
            (false, Some(start)) => {
                run_start = None;
                if let Some(run) = text.get(start..i)
                    && normalize_word(run, &mut word)
                {
                    emit(&word);
                }
            }
            _ => {}
        }
    }
}

/// Lower-cases a word run into `word` and decides whether it is an anchor.
fn normalize_word(run: &str, word: &mut String) -> bool {
    if !run.chars().any(char::is_alphanumeric) || run.chars().nth(1).is_none() {
        return false;
    }
    word.clear();
    if run.is_ascii() {
        word.push_str(run);
        word.make_ascii_lowercase();
    } else {
        word.extend(run.chars().flat_map(char::to_lowercase));
    }
    !is_stop_word(word)
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
        ];
        for (input, expected) in rows {
            assert_eq!(words(input), *expected, "words of {input:?}");
        }
    }
}
