//! Chinese (and other CJK) character n-grams (DESIGN §3.1 rule 3).
//!
//! CJK text has no spaces between words, so every character 2-gram and 3-gram of each run of
//! CJK characters is an anchor (`分布式锁` gives `分布 布式 式锁 分布式 布式锁`). A run of one
//! character gives none. Their IDF floor is applied at query time, in [`crate::query::idf`].

use super::word::{self, Visitor, WordRun};
use crate::text::is_cjk;

/// Calls `emit` with every 2-gram and 3-gram of every CJK run of `text`.
pub fn for_each_ngram(text: &str, emit: impl FnMut(&str)) {
    for_each_ngram_of(text, &[2, 3], emit);
}

/// Calls `emit` with every n-gram, for each `n` in `sizes`, of every CJK run of `text`: run by
/// run, for each size in turn, in text order.
pub fn for_each_ngram_of(text: &str, sizes: &[usize], emit: impl FnMut(&str)) {
    if text.is_ascii() {
        return; // no CJK character; checking the bytes is much cheaper than decoding them
    }
    word::scan(text, &mut Ngrams { text, sizes, emit });
}

/// The n-grams of a scan's CJK runs, to a callback.
struct Ngrams<'t, F> {
    text: &'t str,
    sizes: &'t [usize],
    emit: F,
}

impl<F: FnMut(&str)> Visitor for Ngrams<'_, F> {
    fn word_run(&mut self, _: WordRun<'_>) {}

    fn cjk_run(&mut self, run: &Run) {
        for &n in self.sizes {
            run.for_each_ngram(self.text, n, &mut self.emit);
        }
    }
}

/// One CJK run of a text: where it is, and its characters, in a buffer reused from run to run.
#[derive(Debug, Default)]
pub struct Run {
    /// Byte offset in the text where the run starts.
    pub start: usize,
    /// Byte offset in the text where the run ends.
    pub end: usize,
    /// The characters.
    pub chars: Vec<char>,
}

impl Run {
    /// Makes this the run of CJK characters of `text` from byte `start` on, as long as it
    /// goes, and returns where it ends.
    pub fn read(&mut self, text: &str, start: usize) -> usize {
        self.chars.clear();
        if self.chars.capacity() == 0 {
            self.chars.reserve(chars_room(text.len() - start));
        }
        let mut end = start;
        for c in text.get(start..).unwrap_or_default().chars().take_while(|&c| is_cjk(c)) {
            self.chars.push(c);
            end += c.len_utf8();
        }
        (self.start, self.end) = (start, end);
        end
    }

    /// Calls `emit` with each `n`-gram of the run (of `text`), in order.
    pub fn for_each_ngram(&self, text: &str, n: usize, mut emit: impl FnMut(&str)) {
        let Some(first) = self.chars.get(..n) else { return };
        // The byte span of the n-gram, moved one character at a time.
        let mut start = self.start;
        let mut end = start + first.iter().map(|c| c.len_utf8()).sum::<usize>();
        for (k, c) in self.chars.iter().enumerate() {
            if let Some(gram) = text.get(start..end) {
                emit(gram);
            }
            let Some(next) = self.chars.get(k + n) else { return };
            start += c.len_utf8();
            end += next.len_utf8();
        }
    }

    /// Byte offset in the text of each character.
    pub fn offsets(&self) -> impl Iterator<Item = usize> {
        self.chars.iter().scan(self.start, |at, c| {
            let offset = *at;
            *at += c.len_utf8();
            Some(offset)
        })
    }
}

/// Room to set aside, on a text's first CJK run, in a buffer of about one entry per character
/// of `len` bytes of text (a CJK character takes three): one allocation for most texts, where
/// growing from nothing took several; never more than a few thousand entries ahead, for a long
/// text with little CJK in it.
pub fn chars_room(len: usize) -> usize {
    (len / 3).min(4096)
}

/// True if `anchor` is a CJK n-gram (2 or 3 CJK characters), the kind the IDF floor applies to.
pub fn is_ngram(anchor: &str) -> bool {
    let mut count = 0;
    for c in anchor.chars() {
        if !is_cjk(c) {
            return false;
        }
        count += 1;
    }
    (2..=3).contains(&count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grams(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_ngram(text, |g| out.push(g.to_string()));
        out
    }

    #[test]
    fn ngrams_of_runs() {
        let rows: &[(&str, &[&str])] = &[
            ("分布式锁", &["分布", "布式", "式锁", "分布式", "布式锁"]),
            ("锁", &[]),
            ("用Redis做锁", &["做锁"]),
            ("进程通信", &["进程", "程通", "通信", "进程通", "程通信"]),
            ("中文, 日本", &["中文", "日本"]),
        ];
        for (input, expected) in rows {
            assert_eq!(grams(input), *expected, "n-grams of {input:?}");
        }
    }

    #[test]
    fn ngram_kind() {
        assert!(is_ngram("分布") && is_ngram("分布式"));
        assert!(!is_ngram("分布式锁") && !is_ngram("锁") && !is_ngram("ab"));
    }
}
