//! Token estimates (DESIGN §3.5): a replaceable part, so a real tokenizer can stand in.
//!
//! [`Tokenizer`] names the ones ctxgate ships: the seed's `chars × 1.5` (the default) and the
//! OpenAI encodings `cl100k_base` and `o200k_base` (the `bpe-openai` crate's tables and its
//! counting, exact counts as tiktoken's; the tables written by `build.rs` into this binary and
//! read where they lie, `tokens::counting`). Every count of a selection (`budget.used`, each block's and projection's
//! `tokens`, a prompt's fit) goes through the [`TokenEstimator`] the call uses.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

mod counting;

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

/// Which tokens a budget counts: the unit of `budget.limit`, `budget.used` and every `tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum Tokenizer {
    /// Characters × 1.5, rounded up ([`CharEstimator`]): no model's tokens, an upper bound
    /// for most. The default.
    #[default]
    Chars,
    /// OpenAI's `cl100k_base` (GPT-4, GPT-3.5).
    Cl100k,
    /// OpenAI's `o200k_base` (GPT-4o and later).
    O200k,
}

impl Tokenizer {
    /// Every tokenizer, the default first.
    pub const ALL: [Tokenizer; 3] = [Tokenizer::Chars, Tokenizer::Cl100k, Tokenizer::O200k];

    /// Its name, as `--tokenizer` and the MCP argument take it.
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Chars => "chars",
            Tokenizer::Cl100k => "cl100k",
            Tokenizer::O200k => "o200k",
        }
    }

    /// Loads the encoding now, if it has one: a caller that will count soon (a hook process)
    /// starts this on a thread of its own, beside its other work.
    pub fn load(self) {
        let _ = self.encoding();
    }

    /// The encoding, loaded on first use and then kept for the process (its pattern compiled,
    /// once; the tables are read where they lie).
    fn encoding(self) -> Option<&'static counting::Encoding> {
        match self {
            Tokenizer::Chars => None,
            Tokenizer::Cl100k => Some(&CL100K),
            Tokenizer::O200k => Some(&O200K),
        }
    }
}

/// `cl100k_base`'s pre-tokenization, as `bpe-openai` 0.3.2 writes it (a look-ahead pattern second).
const CL100K_PATTERNS: [(&str, bool); 3] = [
    (
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+$",
        false,
    ),
    ("\\s+\\s", true),
    ("\\s+", false),
];

/// `o200k_base`'s pre-tokenization, as `bpe-openai` 0.3.2 writes it.
const O200K_PATTERNS: [(&str, bool); 3] = [
    (
        concat!(
            "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            "|\\p{N}{1,3}",
            "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*",
            "|\\s*[\\r\\n]+",
            "|\\s+$",
        ),
        false,
    ),
    ("\\s+\\s", true),
    ("\\s+", false),
];

/// The tables `build.rs` wrote for the encoding `NAME`, part of this binary.
macro_rules! tables {
    ($name:literal) => {
        counting::Tables {
            bytes: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bytes")),
            starts: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".starts")),
            sorted: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".sorted")),
            buckets: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".buckets")),
            split: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".split")),
            prefix: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".prefix")),
            lefts: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".lefts")),
            pairs: include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".pairs")),
        }
    };
}

static CL100K: LazyLock<counting::Encoding> =
    LazyLock::new(|| counting::Encoding::new(&tables!("cl100k"), &CL100K_PATTERNS));

static O200K: LazyLock<counting::Encoding> =
    LazyLock::new(|| counting::Encoding::new(&tables!("o200k"), &O200K_PATTERNS));

impl TokenEstimator for Tokenizer {
    fn estimate(&self, text: &str) -> u32 {
        match self.encoding() {
            None => CharEstimator.estimate(text),
            Some(encoding) => u32::try_from(encoding.count(text)).unwrap_or(u32::MAX),
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown tokenizer name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tokenizer {0:?}: use chars, cl100k or o200k")]
pub struct UnknownTokenizer(pub String);

impl FromStr for Tokenizer {
    type Err = UnknownTokenizer;

    fn from_str(name: &str) -> Result<Tokenizer, UnknownTokenizer> {
        Tokenizer::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| UnknownTokenizer(name.to_string()))
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
        assert_eq!(Tokenizer::Chars.estimate("分布式锁"), 6);
    }

    #[test]
    fn the_encodings_count_as_tiktoken() {
        // Counts from OpenAI's tiktoken for the same strings.
        assert_eq!(Tokenizer::Cl100k.estimate("Hello, world!"), 4);
        assert_eq!(Tokenizer::O200k.estimate("Hello, world!"), 4);
        assert_eq!(Tokenizer::Cl100k.estimate(""), 0);
        assert!(
            Tokenizer::O200k.estimate("分布式锁怎么续期") < Tokenizer::Chars.estimate("分布式锁怎么续期")
        );
    }

    /// The reduced tables count exactly as the crate's full encodings, on text of every kind a
    /// history holds (prose, code, JSON, CJK, emoji, digits, runs of spaces and newlines).
    #[test]
    fn reduced_encodings_count_as_the_full_ones() {
        let mut texts: Vec<String> = vec![
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap(),
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/tokens.rs")).unwrap(),
            "分布式锁怎么续期？Redis 的 SETNX 加上过期时间，😀👍🏽 ünïcödé   \n\n\t 12345678 it's".into(),
            "{\"a\":[1,2,3],\"b\":null}\r\n    fn main() { println!(\"{}\", x); }".into(),
        ];
        let pieces: Vec<&str> = texts[0].split_inclusive(['\n', ' ', '.']).collect();
        let shuffled: String = pieces.iter().rev().copied().collect();
        texts.push(shuffled);
        for text in &texts {
            for (ours, full) in
                [(Tokenizer::O200k, bpe_openai::o200k_base()), (Tokenizer::Cl100k, bpe_openai::cl100k_base())]
            {
                assert_eq!(ours.estimate(text) as usize, full.count(text.as_str()), "{ours}");
                for cut in (0..text.len()).step_by(text.len() / 40 + 1).filter(|&i| text.is_char_boundary(i))
                {
                    assert_eq!(ours.estimate(&text[cut..]) as usize, full.count(&text[cut..]));
                }
            }
        }
    }

    /// The static tables and their search count as the full encodings on generated text that
    /// mixes scripts, digits, punctuation, whitespace runs, combining marks and emoji: words
    /// the vocabulary has whole, pieces it has to split, and bytes of characters it barely has.
    #[test]
    fn static_tables_count_as_the_full_encodings_on_generated_text() {
        const POOL: &[&str] = &[
            "the",
            " the",
            "ing",
            "tion",
            " gateway",
            "Certificate",
            "rotate",
            "zebra7731",
            "ß",
            "é",
            "e\u{301}",
            "Ω",
            "Жук",
            "分布式",
            "锁",
            "続",
            "한국어",
            "مرحبا",
            "👍🏽",
            "🧑‍💻",
            "0",
            "12",
            "345",
            "6789",
            " ",
            "  ",
            "\n",
            "\r\n",
            "\t",
            "\n\n\n",
            ".",
            ",",
            "'s",
            "'LL",
            "{\"a\":",
            "}",
            "::",
            "->",
            "(",
            ")",
            "`",
            "~~",
            "\u{feff}",
            "\u{200b}",
            "ǅ",
            "İ",
            "ﬁ",
            "𝔘",
            "\u{10ffff}",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let len = (next() % 40) as usize;
            let text: String = (0..len).map(|_| POOL[(next() % POOL.len() as u64) as usize]).collect();
            for (ours, full) in
                [(Tokenizer::O200k, bpe_openai::o200k_base()), (Tokenizer::Cl100k, bpe_openai::cl100k_base())]
            {
                assert_eq!(ours.estimate(&text) as usize, full.count(text.as_str()), "{ours} {text:?}");
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for t in Tokenizer::ALL {
            assert_eq!(t.name().parse::<Tokenizer>(), Ok(t));
            assert_eq!(serde_json::to_string(&t).unwrap(), format!("\"{t}\""));
        }
        assert_eq!("o200k_base".parse::<Tokenizer>(), Err(UnknownTokenizer("o200k_base".into())));
    }
}
