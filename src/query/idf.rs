//! Inverse document frequency (DESIGN §3.1).

/// DESIGN §3.1: CJK n-grams with an IDF below this take no part in anchor computations
/// (they occur in more than ~60% of blocks: the n-gram equivalent of stop words).
pub const CJK_NGRAM_MIN_IDF: f64 = 1.5;

/// `idf(t) = ln((N + 1) / (df(t) + 1)) + 1` over all blocks of the index.
pub fn idf(blocks: u64, df: u64) -> f64 {
    ((blocks as f64 + 1.0) / (df as f64 + 1.0)).ln() + 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_for_a_fixed_corpus() {
        // N = 9: an anchor in no block, one block, three blocks, every block.
        let rows = [(0, 10f64.ln() + 1.0), (1, 5f64.ln() + 1.0), (3, 2.5f64.ln() + 1.0), (9, 1.0)];
        for (df, expected) in rows {
            assert!((idf(9, df) - expected).abs() < 1e-12, "idf(9, {df})");
        }
        // The floor: an n-gram in 6 of 9 blocks is below 1.5, in 5 of 9 above.
        assert!(idf(9, 6) < CJK_NGRAM_MIN_IDF && idf(9, 5) > CJK_NGRAM_MIN_IDF);
    }
}
