//! A fixed set of short lower-case words, each with a few flag bits, looked up without
//! comparing strings.
//!
//! Every word of every indexed text is checked against the stop and framing words. A binary
//! search over `&str` costs a `memcmp` per probe; here each word of up to 16 bytes is packed
//! into a `u128` ([`Packed`]) and looked up in an open-addressing table at most half full: one
//! multiplication and, almost always, one probe. A bitmap of the used slots (128 bytes, always
//! in cache) answers most words that are in no list without reading the table. One table holds
//! both lists, so a word is looked up once whatever is asked of it.

/// Longest word a set can hold, in bytes.
const MAX_LEN: usize = 16;

/// A word of 1..=16 bytes as one integer: its bytes little-endian, zero-padded.
///
/// Distinct for distinct words that do not end in a NUL byte (a shorter word is a zero-padded
/// prefix), and [`Packed::new`] refuses those that do, so equal keys mean equal words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packed(u128);

impl Packed {
    /// `word` packed; `None` if it is empty, longer than 16 bytes or ends with a NUL byte: no
    /// set holds such a word.
    pub fn new(word: &[u8]) -> Option<Self> {
        let (&last, _) = word.split_last()?;
        if word.len() > MAX_LEN || last == 0 {
            return None;
        }
        let (low, high) = word.split_at(word.len().min(8));
        Some(Packed(u128::from(little_endian(low)) | u128::from(little_endian(high)) << 64))
    }
}

/// Up to 8 bytes as a little-endian integer, built in registers: copying a word into a
/// zeroed buffer and loading that back stalls on store forwarding, which cost more than the
/// table lookup itself.
fn little_endian(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |acc, &b| acc << 8 | u64::from(b))
}

/// A set of words of at most 16 bytes each, with flag bits per word.
pub struct WordSet {
    /// Packed words by [`slot`](Self::slot); 0 is an empty slot (no packed word is 0).
    keys: Vec<u128>,
    /// The flags of the word in the same slot of `keys`.
    flags: Vec<u8>,
    /// Bit `i` is set if slot `i` holds a word.
    used: Vec<u64>,
    /// `64 - log2(keys.len())`: the shift that turns a hash into a slot.
    shift: u32,
}

impl WordSet {
    /// The set of the words of `lists`, each word with the flags of every list holding it.
    /// Panics on a word longer than 16 bytes or an empty one: the lists are constants of this
    /// crate, checked by their tests.
    pub fn new(lists: &[(&[&str], u8)]) -> Self {
        let words: usize = lists.iter().map(|(words, _)| words.len()).sum();
        let size = (words * 2).next_power_of_two().max(16);
        let mut set = WordSet {
            keys: vec![0; size],
            flags: vec![0; size],
            used: vec![0; size.div_ceil(64)],
            shift: 64 - size.trailing_zeros(),
        };
        for &(words, flag) in lists {
            for word in words {
                let packed = Packed::new(word.as_bytes())
                    .unwrap_or_else(|| panic!("word-set entry {word:?} must be 1..=16 bytes"));
                let mut i = set.slot(packed);
                while set.keys[i] != 0 && set.keys[i] != packed.0 {
                    i = (i + 1) & (size - 1);
                }
                set.keys[i] = packed.0;
                set.flags[i] |= flag;
                set.used[i / 64] |= 1 << (i % 64);
            }
        }
        set
    }

    /// The flags of `word`, 0 if it is not in the set.
    pub fn flags(&self, word: Packed) -> u8 {
        let mask = self.keys.len() - 1;
        let mut i = self.slot(word);
        if self.used[i / 64] & (1 << (i % 64)) == 0 {
            return 0;
        }
        // The table is never full, so an empty slot ends every probe sequence.
        loop {
            match self.keys[i] {
                0 => return 0,
                key if key == word.0 => return self.flags[i],
                _ => i = (i + 1) & mask,
            }
        }
    }

    /// The flags of `word`, 0 if it is not in the set.
    pub fn flags_of(&self, word: &str) -> u8 {
        Packed::new(word.as_bytes()).map_or(0, |packed| self.flags(packed))
    }

    /// The home slot of a packed word: Fibonacci hashing of its two halves.
    fn slot(&self, word: Packed) -> usize {
        let folded = (word.0 as u64) ^ ((word.0 >> 64) as u64).rotate_left(29);
        (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> self.shift) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_is_exact() {
        let set = WordSet::new(&[(&["a", "an", "and", "the", "recommendation", "é"], 1)]);
        for w in ["a", "an", "and", "the", "recommendation", "é"] {
            assert_eq!(set.flags_of(w), 1, "{w}");
        }
        for w in
            ["", "b", "ann", "th", "recommendations", "the\0", "a\0", "a\0b", "averyveryverylongword", "e"]
        {
            assert_eq!(set.flags_of(w), 0, "{w:?}");
        }
    }

    #[test]
    fn flags_of_each_list_add_up() {
        let set = WordSet::new(&[(&["again", "the"], 1), (&["again", "problem"], 2)]);
        let flags: Vec<u8> = ["again", "the", "problem", "redis"].iter().map(|w| set.flags_of(w)).collect();
        assert_eq!(flags, [3, 1, 2, 0]);
    }

    #[test]
    fn packing_is_the_zero_padded_bytes() {
        let padded = |w: &str| {
            let mut buf = [0u8; 16];
            buf[..w.len()].copy_from_slice(w.as_bytes());
            Packed(u128::from_le_bytes(buf))
        };
        for w in ["a", "seven77", "eight888", "nine99999", "sixteen_bytes_16"] {
            assert_eq!(Packed::new(w.as_bytes()), Some(padded(w)), "{w}");
        }
        assert_eq!(Packed::new(b"seventeen_bytes17"), None);
    }

    #[test]
    fn agrees_with_a_sorted_list() {
        let words: Vec<String> = (0..400).map(|i| format!("w{}", i * 7919 % 1000)).collect();
        let refs: Vec<&str> = words.iter().map(String::as_str).collect();
        let set = WordSet::new(&[(&refs, 1)]);
        let mut sorted = refs.clone();
        sorted.sort_unstable();
        for i in 0..2000 {
            let probe = format!("w{i}");
            assert_eq!(set.flags_of(&probe) == 1, sorted.binary_search(&probe.as_str()).is_ok(), "{probe}");
        }
    }
}
