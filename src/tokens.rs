//! Token estimates (DESIGN §3.5): a replaceable part, so a real tokenizer can stand in.

/// Estimates how many model tokens a text costs.
pub trait TokenEstimator: Send + Sync {
    /// Estimated tokens of `text`.
    fn estimate(&self, text: &str) -> u32;
}

/// DESIGN §3.5: characters × 1.5, rounded up. Deliberately conservative: it over-counts
/// English several times and Chinese less, so a selection never overruns a real budget.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharEstimator;

/// DESIGN §3.7: token estimate factor.
pub const TOKENS_PER_CHAR: f64 = 1.5;

impl TokenEstimator for CharEstimator {
    fn estimate(&self, text: &str) -> u32 {
        let chars = text.chars().count() as f64;
        (chars * TOKENS_PER_CHAR).ceil().min(f64::from(u32::MAX)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chars_times_one_and_a_half() {
        assert_eq!(CharEstimator.estimate(""), 0);
        assert_eq!(CharEstimator.estimate("abc"), 5);
        assert_eq!(CharEstimator.estimate("分布式锁"), 6);
    }
}
