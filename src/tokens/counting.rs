//! Counting with an OpenAI encoding read from where it lies in the program: the tables
//! `build.rs` writes from `bpe-openai`'s encodings, used as byte arrays (`include_bytes!`), so
//! that a process that counts once — a hook, a process per prompt — pays no load for the
//! 200,000 merges of `o200k_base` (deserializing them into the crate's hash map took most of a
//! hook's CPU time, docs/hooks.md "Latency"). Only the pre-tokenization pattern is compiled at
//! load.
//!
//! The count is `bpe`'s backtracking encoder (`BytePairEncoding::count`, GitHub's rust-gems)
//! over these tables: the longest token at each position, shortened to its longest prefix
//! token, or undone, until each token and the one before it are the pair BPE would have left.
//! The crate finds the longest token with an automaton; here a binary search over the tokens in
//! byte order finds the greatest token not after the text, and its chain of prefix tokens the
//! longest one the text starts with (every token before the text that is a prefix of it is a
//! prefix of that greatest one too). `tests` in `src/tokens.rs` check the counts against the
//! crate's full encodings.

use regex_automata::meta::Regex;
use regex_automata::{Anchored, Input};

/// An encoding's tables, as `build.rs` writes them (see there for each one's layout).
pub(crate) struct Tables {
    pub bytes: &'static [u8],
    pub starts: &'static [u8],
    pub sorted: &'static [u8],
    pub buckets: &'static [u8],
    pub split: &'static [u8],
    pub prefix: &'static [u8],
    pub lefts: &'static [u8],
    pub pairs: &'static [u8],
}

/// An encoding ready to count: its tables and the pre-tokenization.
pub(crate) struct Encoding {
    bytes: &'static [u8],
    starts: &'static [[u8; 4]],
    sorted: &'static [[u8; 4]],
    buckets: &'static [[u8; 4]],
    split: &'static [[u8; 8]],
    prefix: &'static [[u8; 4]],
    lefts: &'static [[u8; 4]],
    pairs: &'static [[u8; 8]],
    pattern: Regex,
    /// For each pattern of `pattern`, whether its last character is a look-ahead to drop.
    lookahead: Vec<bool>,
}

impl Encoding {
    /// The encoding of `tables`, pre-tokenized by `patterns` (each with whether it ends in a
    /// one-character look-ahead, as `bpe-openai` writes them).
    ///
    /// # Panics
    /// Tables or patterns that are not those of `build.rs` and `src/tokens.rs` (a build error).
    pub(crate) fn new(tables: &Tables, patterns: &[(&str, bool)]) -> Encoding {
        let (starts, _) = tables.starts.as_chunks::<4>();
        let (sorted, _) = tables.sorted.as_chunks::<4>();
        let (buckets, _) = tables.buckets.as_chunks::<4>();
        let (split, _) = tables.split.as_chunks::<8>();
        let (prefix, _) = tables.prefix.as_chunks::<4>();
        let (lefts, _) = tables.lefts.as_chunks::<4>();
        let (pairs, _) = tables.pairs.as_chunks::<8>();
        let tokens = sorted.len();
        assert!(
            starts.len() == tokens + 1
                && lefts.len() == tokens + 1
                && split.len() == tokens
                && prefix.len() == tokens
                && buckets.len() == 65_537,
            "build.rs wrote one entry per token"
        );
        let (pattern, lookahead): (Vec<&str>, Vec<bool>) = patterns.iter().copied().unzip();
        let pattern = Regex::new_many(&pattern).expect("the encodings' own patterns compile");
        Encoding {
            bytes: tables.bytes,
            starts,
            sorted,
            buckets,
            split,
            prefix,
            lefts,
            pairs,
            pattern,
            lookahead,
        }
    }

    /// The number of tokens of `text`: tiktoken's count.
    pub(crate) fn count(&self, text: &str) -> usize {
        self.pieces(text).map(|piece| self.count_piece(piece.as_bytes())).sum()
    }

    /// The pre-tokenization's pieces of `text`: each anchored match of the patterns, less its
    /// look-ahead character where the pattern that matched has one.
    fn pieces<'a>(&'a self, text: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let mut last = 0;
        std::iter::from_fn(move || {
            let found = self.pattern.find(Input::new(&text[last..]).anchored(Anchored::Yes))?;
            let start = last;
            let mut end = last + found.range().end;
            if self.lookahead[found.pattern().as_usize()] {
                end -= text[start..end].chars().next_back().map_or(0, char::len_utf8);
            }
            // A pattern that matched only its look-ahead would never end: the patterns do not.
            if end == start {
                return None;
            }
            last = end;
            Some(&text[start..end])
        })
    }

    fn word(entry: [u8; 4]) -> usize {
        u32::from_le_bytes(entry) as usize
    }

    /// The bytes of `token`.
    fn token(&self, token: u32) -> &'static [u8] {
        let (start, end) =
            (Self::word(self.starts[token as usize]), Self::word(self.starts[token as usize + 1]));
        &self.bytes[start..end]
    }

    fn len(&self, token: u32) -> usize {
        Self::word(self.starts[token as usize + 1]) - Self::word(self.starts[token as usize])
    }

    fn halves(&self, token: u32) -> (u32, u32) {
        let b = self.split[token as usize];
        (u32::from_le_bytes([b[0], b[1], b[2], b[3]]), u32::from_le_bytes([b[4], b[5], b[6], b[7]]))
    }

    /// The longest token that is a proper prefix of `token`.
    fn shorter(&self, token: u32) -> Option<u32> {
        Some(u32::from_le_bytes(self.prefix[token as usize])).filter(|&p| p != u32::MAX)
    }

    /// The token BPE merges `left` and `right` into, if any.
    fn merged(&self, left: u32, right: u32) -> Option<u32> {
        let (from, to) = (Self::word(self.lefts[left as usize]), Self::word(self.lefts[left as usize + 1]));
        let pairs = &self.pairs[from..to];
        let found =
            pairs.binary_search_by_key(&right, |e| u32::from_le_bytes([e[0], e[1], e[2], e[3]])).ok()?;
        let e = pairs[found];
        Some(u32::from_le_bytes([e[4], e[5], e[6], e[7]]))
    }

    /// The longest token `text` starts with (every byte is a token: `None` only for no text).
    fn next_token(&self, text: &[u8]) -> Option<u32> {
        let first = *text.first()?;
        // The tokens in byte order that start with the text's first two bytes (or, for one
        // byte, all): those before are before the text, those after are after it.
        let (from, to) = match text.get(1) {
            Some(&second) => {
                let bucket = usize::from(first) * 256 + usize::from(second);
                (Self::word(self.buckets[bucket]), Self::word(self.buckets[bucket + 1]))
            }
            None => (0, self.sorted.len()),
        };
        let within = self.sorted[from..to].partition_point(|&t| self.token(u32::from_le_bytes(t)) <= text);
        let mut token = u32::from_le_bytes(*self.sorted.get((from + within).checked_sub(1)?)?);
        // The greatest token not after the text; the longest of its prefix tokens that the text
        // starts with is the answer.
        let common = self.token(token).iter().zip(text).take_while(|(a, b)| a == b).count();
        while self.len(token) > common {
            token = self.shorter(token)?;
        }
        Some(token)
    }

    /// Whether BPE would leave `left` and `right` side by side: no merge across their boundary
    /// comes before the ones that made them (`bpe`'s `is_valid_token_pair`).
    fn valid_pair(&self, mut left: u32, mut right: u32) -> bool {
        let mut limit = u32::MAX;
        loop {
            if self.merged(left, right).is_some_and(|merged| merged < limit) {
                return false;
            }
            // Undo the later of the two merges that made them.
            if left > right {
                limit = left;
                left = self.halves(left).1;
                if left == limit {
                    limit = right + 1;
                    right = self.halves(right).0;
                    if right + 1 == limit {
                        return true;
                    }
                }
            } else {
                limit = right + 1;
                right = self.halves(right).0;
                if right + 1 == limit {
                    limit = left;
                    left = self.halves(left).1;
                    if left == limit {
                        return true;
                    }
                }
            }
        }
    }

    /// The tokens of one piece, by backtracking: the leftmost-longest token at each position,
    /// shortened while it cannot follow the token before it or ends where no encoding goes
    /// on, or else the token before it undone.
    fn count_piece(&self, text: &[u8]) -> usize {
        let mut tokens: Vec<u32> = Vec::with_capacity(text.len() / 3);
        // Positions from which the rest of the piece can still be encoded.
        let mut open = vec![true; text.len() + 1];
        let mut pos = 0;
        let mut next = self.next_token(text);
        while let Some(mut token) = next {
            let last = tokens.last().copied();
            loop {
                let end = pos + self.len(token);
                if open[end] && last.is_none_or(|last| self.valid_pair(last, token)) {
                    tokens.push(token);
                    pos = end;
                    next = self.next_token(&text[end..]);
                    break;
                } else if let Some(shorter) = self.shorter(token) {
                    token = shorter;
                } else {
                    open[pos] = false;
                    tokens.pop();
                    pos -= last.map_or(0, |t| self.len(t));
                    next = last;
                    break;
                }
            }
        }
        tokens.len()
    }
}
