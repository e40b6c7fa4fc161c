//! A fixed set of short lower-case words, looked up without comparing strings.
//!
//! Stop words and framing words are checked for every word of every indexed text. A binary
//! search over `&str` costs a `memcmp` per probe; here each word of up to 16 bytes is packed
//! into a `u128` (bytes in order, zero-padded) and looked up in an open-addressing table at
//! most a quarter full: one multiplication and, almost always, one probe.

/// Longest word a set can hold, in bytes.
const MAX_LEN: usize = 16;

/// A set of words of at most [`MAX_LEN`] bytes each.
pub struct WordSet {
    /// Packed words by [`slot`]; 0 is an empty slot (no packed word is 0).
    table: Vec<u128>,
    /// `64 - log2(table.len())`: the shift that turns a hash into a slot.
    shift: u32,
}

impl WordSet {
    /// The set of `words`. Panics on a word longer than [`MAX_LEN`] bytes or an empty one: the
    /// lists are constants of this crate, checked by their tests.
    pub fn new(words: &[&str]) -> Self {
        let size = (words.len() * 4).next_power_of_two().max(16);
        let mut set = WordSet { table: vec![0; size], shift: 64 - size.trailing_zeros() };
        for word in words {
            let packed = pack(word).unwrap_or_else(|| panic!("word-set entry {word:?} must be 1..=16 bytes"));
            let mut i = set.slot(packed);
            while set.table[i] != 0 && set.table[i] != packed {
                i = (i + 1) & (size - 1);
            }
            set.table[i] = packed;
        }
        set
    }

    /// True if `word` is in the set.
    pub fn contains(&self, word: &str) -> bool {
        let Some(packed) = pack(word) else { return false };
        let mask = self.table.len() - 1;
        let mut i = self.slot(packed);
        // The table is never full, so an empty slot ends every probe sequence.
        loop {
            match self.table[i] {
                0 => return false,
                p if p == packed => return true,
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The home slot of a packed word: Fibonacci hashing of its two halves.
    fn slot(&self, packed: u128) -> usize {
        let folded = (packed as u64) ^ ((packed >> 64) as u64).rotate_left(29);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
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

    #[test]
    fn agrees_with_a_sorted_list() {
        let words: Vec<String> = (0..400).map(|i| format!("w{}", i * 7919 % 1000)).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let set = WordSet::new(&refs);
        let mut sorted = refs.clone();
        sorted.sort_unstable();
        for i in 0..2000 {
            let probe = format!("w{i}");
            assert_eq!(set.contains(&probe), sorted.binary_search(&probe.as_str()).is_ok(), "{probe}");
        }
    }
}
