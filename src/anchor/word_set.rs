//! A fixed set of short lower-case words, looked up without comparing strings.
//!
//! Stop words and framing words are checked for every word of every indexed text. A binary
//! search over `&str` costs a `memcmp` per probe; here each word of up to 16 bytes is packed
//! into a `u128` (bytes in order, zero-padded), and the sorted packed words are searched by
//! integer comparison.

/// Longest word a set can hold, in bytes.
const MAX_LEN: usize = 16;

/// A set of words of at most [`MAX_LEN`] bytes each.
pub struct WordSet {
    packed: Vec<u128>,
}

impl WordSet {
    /// The set of `words`. Panics on a word longer than [`MAX_LEN`] bytes or an empty one: the
    /// lists are constants of this crate, checked by their tests.
    pub fn new(words: &[&str]) -> Self {
        let mut packed: Vec<u128> = words
            .iter()
            .map(|w| pack(w).unwrap_or_else(|| panic!("word-set entry {w:?} must be 1..=16 bytes")))
            .collect();
        packed.sort_unstable();
        packed.dedup();
        WordSet { packed }
    }

    /// True if `word` is in the set.
    pub fn contains(&self, word: &str) -> bool {
        pack(word).is_some_and(|p| self.packed.binary_search(&p).is_ok())
    }
}

/// `word`'s bytes as a big-endian integer, zero-padded: distinct for distinct words of
/// 1..=16 bytes (no word contains a NUL byte and a shorter word is a zero-padded prefix).
fn pack(word: &str) -> Option<u128> {
    let bytes = word.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_LEN || bytes.contains(&0) {
        return None;
    }
    let mut buf = [0u8; MAX_LEN];
    buf[..bytes.len()].copy_from_slice(bytes);
    Some(u128::from_be_bytes(buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_is_exact() {
        let set = WordSet::new(&["a", "an", "and", "the", "recommendation", "é"]);
        for w in ["a", "an", "and", "the", "recommendation", "é"] {
            assert!(set.contains(w), "{w}");
        }
        for w in ["", "b", "ann", "th", "recommendations", "the\0", "a\0", "averyveryverylongword", "e"] {
            assert!(!set.contains(w), "{w:?}");
        }
    }
}
