//! Chinese (and other CJK) character n-grams (DESIGN §3.1 rule 3).
//!
//! CJK text has no spaces between words, so every character 2-gram and 3-gram of each run of
//! CJK characters is an anchor (`分布式锁` gives `分布 布式 式锁 分布式 布式锁`). A run of one
//! character gives none. Their IDF floor is applied at query time, in [`crate::idf`].

use crate::text::is_cjk;

/// Calls `emit` with every 2-gram and 3-gram of every CJK run of `text`.
pub fn for_each_ngram(text: &str, emit: impl FnMut(&str)) {
    for_each_ngram_of(text, &[2, 3], emit);
}

/// Calls `emit` with every n-gram, for each `n` in `sizes`, of every CJK run of `text`.
pub fn for_each_ngram_of(text: &str, sizes: &[usize], mut emit: impl FnMut(&str)) {
    if text.is_ascii() {
        return; // no CJK character; checking the bytes is much cheaper than decoding them
    }
    let mut run: Vec<usize> = Vec::new(); // byte offsets of the run's characters
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        if i < text.len() && is_cjk(c) {
            run.push(i);
            continue;
        }
        let run_end = i;
        for &n in sizes {
            for start in 0..run.len().saturating_sub(n - 1) {
                let end = run.get(start + n).copied().unwrap_or(run_end);
                if let Some(gram) = text.get(run[start]..end) {
                    emit(gram);
                }
            }
        }
        run.clear();
    }
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
