//! Okapi BM25 as the eval-dev README's recall baselines define it: k1 1.5, b 0.75, words are
//! the `[a-z0-9_]+` runs of the lower-cased text, no stop list, one index per conversation.
//!
//! The README names no idf variant. Its published dev figures reproduce with the one of
//! `rank_bm25`'s `BM25Okapi` (the usual Python implementation, whose defaults are these k1 and
//! b): `idf = ln(N - df + 0.5) - ln(df + 0.5)`, and a word in more than half the documents,
//! whose idf would be negative, gets 0.25 × the mean idf of all words instead. A query word
//! counts once per occurrence in the query. With Lucene's `ln(1 + (N - df + 0.5) / (df + 0.5))`
//! the turn recall figures come out 0.002–0.011 off.

use std::collections::HashMap;

/// The README's k1.
const K1: f64 = 1.5;
/// The README's b.
const B: f64 = 0.75;
/// `rank_bm25`'s floor for negative idfs, as a share of the mean idf.
const EPSILON: f64 = 0.25;

/// The words of `text`: runs of `[a-z0-9_]` in the lower-cased text, in order, repeats kept.
pub fn words(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    let mut words = Vec::new();
    let mut word = String::new();
    for c in lower.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
            word.push(c);
        } else if !word.is_empty() {
            words.push(std::mem::take(&mut word));
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words
}

/// A BM25 index over a fixed list of documents.
#[derive(Debug)]
pub struct Bm25 {
    /// Term frequencies of each document.
    docs: Vec<HashMap<String, u32>>,
    /// Words in each document.
    lens: Vec<usize>,
    avg_len: f64,
    idf: HashMap<String, f64>,
}

impl Bm25 {
    /// Indexes `docs`, each given as its words.
    pub fn new(docs: impl IntoIterator<Item = Vec<String>>) -> Bm25 {
        let mut tfs = Vec::new();
        let mut lens = Vec::new();
        let mut df: HashMap<String, u32> = HashMap::new();
        for words in docs {
            lens.push(words.len());
            let mut tf: HashMap<String, u32> = HashMap::new();
            for w in words {
                *tf.entry(w).or_default() += 1;
            }
            for w in tf.keys() {
                *df.entry(w.clone()).or_default() += 1;
            }
            tfs.push(tf);
        }
        let n = tfs.len() as f64;
        let avg_len = if tfs.is_empty() { 0.0 } else { lens.iter().sum::<usize>() as f64 / n };
        // Sorted, so the mean idf is summed in one order whatever the hash seed.
        let mut df: Vec<(String, u32)> = df.into_iter().collect();
        df.sort_unstable();
        let mut idf: HashMap<String, f64> = df
            .iter()
            .map(|(w, f)| (w.clone(), (n - f64::from(*f) + 0.5).ln() - (f64::from(*f) + 0.5).ln()))
            .collect();
        let mean = df.iter().map(|(w, _)| idf[w]).sum::<f64>() / df.len().max(1) as f64;
        for value in idf.values_mut() {
            if *value < 0.0 {
                *value = EPSILON * mean;
            }
        }
        Bm25 { docs: tfs, lens, avg_len, idf }
    }

    /// The score of every document for `query` (its words, repeats counting again), in
    /// document order.
    pub fn scores(&self, query: &[String]) -> Vec<f64> {
        self.docs
            .iter()
            .zip(&self.lens)
            .map(|(tf, &len)| {
                let norm = K1 * (1.0 - B + B * len as f64 / self.avg_len);
                query
                    .iter()
                    .filter_map(|w| {
                        let tf = f64::from(*tf.get(w)?);
                        Some(self.idf[w] * tf * (K1 + 1.0) / (tf + norm))
                    })
                    .sum()
            })
            .collect()
    }

    /// The documents scoring above 0 for `query`, best first; ties in document order.
    pub fn ranked(&self, query: &[String]) -> Vec<usize> {
        let scores = self.scores(query);
        let mut ranked: Vec<usize> = (0..scores.len()).filter(|&d| scores[d] > 0.0).collect();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(texts: &[&str]) -> Bm25 {
        Bm25::new(texts.iter().map(|t| words(t)))
    }

    #[test]
    fn words_are_lower_cased_ascii_runs_with_repeats() {
        assert_eq!(
            words("Caroline's LGBTQ_group, 2023! café"),
            ["caroline", "s", "lgbtq_group", "2023", "caf"]
        );
        assert_eq!(words("go go"), ["go", "go"]);
        assert!(words("分布式 — …").is_empty());
    }

    #[test]
    fn rare_words_score_higher_and_absent_words_not_at_all() {
        let index = docs(&["the cat sat", "the dog sat", "the dog ran", "a bird", "a fish"]);
        let s = index.scores(&words("cat dog"));
        assert!(s[0] > s[1], "cat (df 1) must outweigh dog (df 2): {s:?}");
        assert_eq!(s[3], 0.0, "a document with no query word scores 0");
        assert_eq!(index.ranked(&words("cat dog")), [0, 1, 2], "ties in document order");
        assert!(index.ranked(&words("horse")).is_empty(), "nothing scoring 0 is ranked");
    }

    #[test]
    fn common_words_get_a_small_positive_idf() {
        // "the" is in 3 of 4 documents: ln(1.5) - ln(3.5) < 0, floored at 0.25 × the mean.
        let index = docs(&["the cat", "the dog", "the end", "bird"]);
        let the = index.scores(&words("the"));
        assert!(the[0] > 0.0 && the[3] == 0.0, "{the:?}");
        assert!(the[0] < index.scores(&words("cat"))[0], "a floored idf stays below a rare word's");
    }

    #[test]
    fn repeated_query_words_count_again_and_long_documents_less() {
        let index = docs(&["cat", "cat and many other words here", "dog", "bird", "fish"]);
        let once = index.scores(&words("cat"));
        let twice = index.scores(&words("cat cat"));
        assert!((twice[0] - 2.0 * once[0]).abs() < 1e-12, "{once:?} {twice:?}");
        assert!(once[0] > once[1], "length normalisation: {once:?}");
    }
}
