//! English terms and code identifiers (DESIGN §3.1 rules 1 and 2), and the one scan of a text
//! that finds them and its CJK runs.
//!
//! One scan finds maximal runs of letters, digits and `_` (CJK excluded). A run of letters only
//! is an English term; a run with a digit or `_` is an identifier, kept whole (`snake_case`,
//! `v1` from `v1.2.3`). Runs joined by single hyphens are also kept whole, beside their parts
//! (`ticket-4242` gives `ticket`, `4242` and `ticket-4242`). All are lower-cased. Stop words and
//! one-character runs are dropped: they identify nothing.

use super::cjk::Run;
use super::framing;
use super::stopwords;
use super::word_set::WordSet;
use crate::text::{is_cjk, is_word_char};
use std::sync::LazyLock;

/// [`listed`] flag: a stop word.
pub const STOP: u8 = 1;
/// [`listed`] flag: an English framing word.
pub const FRAMING: u8 = 2;

/// The stop words and the English framing words in one table, so that one lookup per word
/// answers both questions.
static LISTED: LazyLock<WordSet> =
    LazyLock::new(|| WordSet::new(&[(stopwords::STOP_WORDS, STOP), (framing::ENGLISH, FRAMING)]));

/// The lists (`STOP`, `FRAMING`) that hold `word`, already lower-cased.
pub fn listed(word: &str) -> u8 {
    LISTED.flags_of(word)
}

/// What one scan of a text finds, in text order.
pub trait Visitor {
    /// A maximal run of word characters, or a chain of them joined by hyphens ([`Chain`]).
    fn word_run(&mut self, run: WordRun<'_>);
    /// A maximal run of CJK characters.
    fn cjk_run(&mut self, run: &Run);
}

/// Calls `visitor` with each run of word characters and each run of CJK characters of `text`,
/// in order, and after the runs of a hyphenated chain ([`Chain`]) the chain as one more run.
/// ASCII bytes are classified as bytes; only other characters are decoded.
pub fn scan(text: &str, visitor: &mut impl Visitor) {
    let bytes = text.as_bytes();
    let mut run = Run::default();
    let mut chain = Chain::default();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b < 0x80 {
            i = if is_word_byte(b) { word_run(text, i, &mut chain, visitor) } else { i + 1 };
            continue;
        }
        let Some(c) = char_at(text, i) else { break };
        i = if is_cjk(c) {
            chain.finish(text, visitor);
            let end = run.read(text, i);
            visitor.cjk_run(&run);
            end
        } else if is_word_char_quick(c) {
            word_run(text, i, &mut chain, visitor)
        } else {
            i + c.len_utf8()
        };
    }
    chain.finish(text, visitor);
}

/// Word runs joined by single ASCII hyphens (`ticket-4242`, `gpt-4o`, `en-US`): an identifier
/// whose parts also name other things (`host-4242`), so it is an anchor of its own beside its
/// parts. Only a single `-` between two runs joins them: `--flag` is `flag`, `a--b` (a dash in
/// prose) is two words, and a trailing `-` is not part of the chain.
#[derive(Default)]
struct Chain {
    /// Byte offset of the chain's start in the text.
    start: usize,
    /// Byte offset of the end of its last run.
    end: usize,
    /// Word runs in it; 0 when there is none.
    parts: usize,
    /// All its runs are ASCII.
    ascii: bool,
    /// [`byte_class`] bits of its runs, or-ed (a hyphen adds none).
    classes: u8,
}

impl Chain {
    /// Adds the run at `start..end`: to this chain if one hyphen separates them, else to a new
    /// chain, reporting this one if it is complete.
    fn add(&mut self, text: &str, start: usize, end: usize, run: &WordRun<'_>, visitor: &mut impl Visitor) {
        if self.parts > 0 && self.end + 1 == start && text.as_bytes().get(self.end) == Some(&b'-') {
            self.end = end;
            self.parts += 1;
            self.ascii &= run.ascii;
            self.classes |= run.classes;
            return;
        }
        self.finish(text, visitor);
        *self = Chain { start, end, parts: 1, ascii: run.ascii, classes: run.classes };
    }

    /// Reports the chain if it joins two runs or more, and starts none.
    fn finish(&mut self, text: &str, visitor: &mut impl Visitor) {
        if self.parts >= 2
            && let Some(chain) = text.get(self.start..self.end)
        {
            visitor.word_run(WordRun { text: chain, ascii: self.ascii, classes: self.classes });
        }
        self.parts = 0;
    }
}

/// True if `text` is one word by these rules as written: a run of [`is_word_char`]s, or such
/// runs joined by single hyphens (a hyphen chain).
pub fn is_one_word(text: &str) -> bool {
    !text.is_empty() && text.split('-').all(|part| !part.is_empty() && part.chars().all(is_word_char))
}

/// The character at byte `i` of `text`; `i` is always a character boundary, since every step
/// advances by a whole character.
fn char_at(text: &str, i: usize) -> Option<char> {
    text.get(i..).and_then(|rest| rest.chars().next())
}

/// True for the ASCII bytes of words: letters, digits and `_`.
fn is_word_byte(b: u8) -> bool {
    byte_class(b) != 0
}

/// [`byte_class`]: a word byte (letter, digit or `_`).
const WORD: u8 = 1;
/// [`byte_class`]: a letter or digit.
const ALPHANUMERIC: u8 = 2;
/// [`byte_class`]: an upper-case letter.
const UPPER: u8 = 4;

/// What an ASCII byte is to a word, as [`WORD`], [`ALPHANUMERIC`] and [`UPPER`] bits; 0 for
/// any other byte. One table load per byte instead of several range tests, and the run's
/// bits say whether it needs lower-casing or is only `_`.
fn byte_class(b: u8) -> u8 {
    BYTE_CLASSES[usize::from(b)]
}

static BYTE_CLASSES: [u8; 256] = {
    let mut table = [0; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        table[i] = if b.is_ascii_uppercase() {
            WORD | ALPHANUMERIC | UPPER
        } else if b.is_ascii_alphanumeric() {
            WORD | ALPHANUMERIC
        } else if b == b'_' {
            WORD
        } else {
            0
        };
        i += 1;
    }
    table
};

/// A maximal run of word characters, or a hyphenated chain of them, as written.
#[derive(Debug, Clone, Copy)]
pub struct WordRun<'a> {
    /// The run.
    pub text: &'a str,
    /// All its characters are ASCII.
    ascii: bool,
    /// [`byte_class`] bits of its ASCII bytes, or-ed.
    classes: u8,
}

/// [`is_word_char`], answering the punctuation of CJK and typographic text (`，。、“”—…·`)
/// without the Unicode table search of `char::is_alphanumeric`, which for a Chinese text cost
/// more than finding its words. None of these is a letter or digit (tested on every one).
fn is_word_char_quick(c: char) -> bool {
    !is_punctuation(c) && is_word_char(c)
}

/// Blocks of punctuation and symbols frequent in CJK and typographic text, less the letters and
/// digits among them (`々〆〇`, the full-width letters and digits).
fn is_punctuation(c: char) -> bool {
    matches!(c as u32,
        0x00B7                  // middle dot
        | 0x2000..=0x206F       // General Punctuation
        | 0x3000..=0x3004       // CJK Symbols and Punctuation, less 々〆〇
        | 0x3008..=0x3020
        | 0xFF01..=0xFF0F       // full-width punctuation
        | 0xFF1A..=0xFF20
        | 0xFF3B..=0xFF40
        | 0xFF5B..=0xFF65)
}

/// Reports the word run starting at `start` and returns where it ends.
fn word_run(text: &str, start: usize, chain: &mut Chain, visitor: &mut impl Visitor) -> usize {
    let bytes = text.as_bytes();
    let mut i = start;
    let mut ascii = true;
    let mut classes = 0;
    loop {
        while let Some(class) = bytes.get(i).map(|&b| byte_class(b))
            && class != 0
        {
            classes |= class;
            i += 1;
        }
        match bytes.get(i) {
            Some(&b) if b >= 0x80 => match char_at(text, i) {
                Some(c) if is_word_char_quick(c) => {
                    ascii = false;
                    i += c.len_utf8();
                }
                _ => break,
            },
            _ => break,
        }
    }
    if let Some(run) = text.get(start..i) {
        let run = WordRun { text: run, ascii, classes };
        chain.add(text, start, i, &run, visitor);
        visitor.word_run(run);
    }
    i
}

/// Lower-cases word runs, reusing one buffer: no allocation per word.
#[derive(Default)]
pub struct Lowercase {
    buffer: String,
}

impl Lowercase {
    /// The word of `run`, lower-cased, or `None` for a run too short or without a letter or
    /// digit. An ASCII run with no upper-case letter is returned as it is.
    pub fn word<'a>(&'a mut self, run: WordRun<'a>) -> Option<&'a str> {
        let WordRun { text: run, ascii, classes } = run;
        if ascii {
            // A run of `_` alone, or of one character, identifies nothing.
            if run.len() < 2 || classes & ALPHANUMERIC == 0 {
                return None;
            }
            if classes & UPPER == 0 {
                return Some(run);
            }
            self.buffer.clear();
            self.buffer.push_str(run);
            self.buffer.make_ascii_lowercase();
        } else {
            if !run.chars().any(char::is_alphanumeric) || run.chars().nth(1).is_none() {
                return None;
            }
            self.buffer.clear();
            self.buffer.extend(run.chars().flat_map(char::to_lowercase));
        }
        Some(&self.buffer)
    }
}

/// Calls `emit` with every English term and identifier of `text`, lower-cased, in order.
pub fn for_each_word(text: &str, emit: impl FnMut(&str)) {
    scan(text, &mut Words { lower: Lowercase::default(), drop_stop_words: true, emit });
}

/// [`for_each_word`] with stop words too: for looking words up among known anchors, which
/// never include a stop word, without paying for the stop-word test.
pub fn for_each_word_or_stop_word(text: &str, emit: impl FnMut(&str)) {
    scan(text, &mut Words { lower: Lowercase::default(), drop_stop_words: false, emit });
}

/// The words of a scan, to a callback.
struct Words<F> {
    lower: Lowercase,
    drop_stop_words: bool,
    emit: F,
}

impl<F: FnMut(&str)> Visitor for Words<F> {
    fn word_run(&mut self, run: WordRun<'_>) {
        if let Some(word) = self.lower.word(run)
            && !(self.drop_stop_words && stopwords::is_stop_word(word))
        {
            (self.emit)(word);
        }
    }

    fn cjk_run(&mut self, _: &Run) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_word(text, |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn words_and_identifiers() {
        let rows: &[(&str, &[&str])] = &[
            ("Use Redis with asyncio", &["use", "redis", "asyncio"]),
            ("bump v1.2.3 now", &["bump", "v1"]),
            ("call snake_case and CamelCase", &["call", "snake_case", "camelcase"]),
            ("a b c __ 7 42", &["42"]),
            ("Redis锁问题", &["redis"]),
            ("multi-process", &["multi", "process", "multi-process"]),
            ("ticket-4242 host-4242", &["ticket", "4242", "ticket-4242", "host", "4242", "host-4242"]),
            ("GPT-4o en-US x86-64", &["gpt", "4o", "gpt-4o", "en", "us", "en-us", "x86", "64", "x86-64"]),
            // One-character parts make no word, the chain does; a chain of `_` alone does not.
            ("e-mail a-b _-_", &["mail", "e-mail", "a-b"]),
            ("state-of-the-art", &["state", "art", "state-of-the-art"]),
            // Leading, trailing and doubled hyphens join nothing.
            ("--dry-run --force pre- -x a--b", &["dry", "run", "dry-run", "force", "pre"]),
            ("café-déjà snake_case-v2", &["café", "déjà", "café-déjà", "snake_case", "v2", "snake_case-v2"]),
            // Only an ASCII hyphen joins, with nothing else between the runs.
            ("ab\u{2010}cd ab- cd ab-分布-cd", &["ab", "cd", "ab", "cd", "ab", "cd"]),
            ("Café déjà", &["café", "déjà"]),
            ("x_ _x __init__ ÉTÉ é", &["x_", "_x", "__init__", "été"]),
            ("Ünïcödé WORDS", &["ünïcödé", "words"]),
        ];
        for (input, expected) in rows {
            assert_eq!(words(input), *expected, "words of {input:?}");
        }
    }

    /// The rule as first written: runs of `is_word_char`, decoded character by character, each
    /// chain of runs with one `-` between them after its runs.
    fn words_by_definition(text: &str) -> Vec<String> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
            match (is_word_char(c) && i < text.len(), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    runs.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        let mut chains: Vec<Vec<(usize, usize)>> = Vec::new();
        for run in runs {
            match chains.last_mut() {
                Some(chain) if chain.last().is_some_and(|last| &text[last.1..run.0] == "-") => {
                    chain.push(run)
                }
                _ => chains.push(vec![run]),
            }
        }
        let mut out = Vec::new();
        let mut push = |word: &str| {
            let lower: String = word.chars().flat_map(char::to_lowercase).collect();
            if word.chars().any(char::is_alphanumeric) && word.chars().count() >= 2 && !is_stop_word(&lower) {
                out.push(lower);
            }
        };
        for chain in chains {
            for &(s, e) in &chain {
                push(&text[s..e]);
            }
            if let (Some(first), Some(last)) = (chain.first(), chain.last())
                && chain.len() >= 2
            {
                push(&text[first.0..last.1]);
            }
        }
        out
    }

    /// CJK runs as first written: maximal runs of `is_cjk` characters.
    fn cjk_runs_by_definition(text: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut start = None;
        for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
            match (is_cjk(c) && i < text.len(), start) {
                (true, None) => start = Some(i),
                (false, Some(s)) => {
                    out.push((s, i));
                    start = None;
                }
                _ => {}
            }
        }
        out
    }

    struct Runs(Vec<(usize, usize)>);

    impl Visitor for Runs {
        fn word_run(&mut self, _: WordRun<'_>) {}
        fn cjk_run(&mut self, run: &Run) {
            self.0.push((run.start, run.end));
        }
    }

    use stopwords::is_stop_word;

    /// Every word run and chain a scan reports, as written.
    struct WholeRuns<'a>(&'a mut Vec<String>);

    impl Visitor for WholeRuns<'_> {
        fn word_run(&mut self, run: WordRun<'_>) {
            self.0.push(run.text.to_string());
        }
        fn cjk_run(&mut self, _: &Run) {}
    }

    #[test]
    fn stop_words_only_where_asked() {
        let mut all = Vec::new();
        for_each_word_or_stop_word("The lock is on the Redis key", |w| all.push(w.to_string()));
        assert_eq!(all, ["the", "lock", "is", "on", "the", "redis", "key"]);
        assert_eq!(words("The lock is on the Redis key"), ["lock", "redis", "key"]);
    }

    #[test]
    fn punctuation_holds_no_word_character() {
        let wrong: Vec<char> = (0..=0x10FFFF)
            .filter_map(char::from_u32)
            .filter(|&c| is_punctuation(c) && is_word_char(c))
            .collect();
        assert!(wrong.is_empty(), "is_punctuation must not claim word characters: {wrong:?}");
    }

    #[test]
    fn listed_words_carry_both_flags() {
        assert_eq!(listed("the"), STOP);
        assert_eq!(listed("problem"), FRAMING);
        assert_eq!(listed("again"), STOP | FRAMING);
        assert_eq!(listed("redis"), 0);
    }

    proptest::proptest! {
        #[test]
        fn scanner_agrees_with_the_definition(text in "[a-zA-Z0-9_ .,'\"éÉßİK分布式锁\u{0}-\u{7f}\u{80}-\u{3000}]{0,60}") {
            proptest::prop_assert_eq!(words(&text), words_by_definition(&text));
        }

        #[test]
        fn scanner_agrees_with_the_definition_on_hyphens(text in "[abAé4_\\- 分.]{0,40}") {
            proptest::prop_assert_eq!(words(&text), words_by_definition(&text));
        }

        #[test]
        fn one_word_is_what_the_scanner_gives_whole(text in "[abAé4_\\- 分.]{1,12}") {
            let mut runs = Vec::new();
            scan(&text, &mut WholeRuns(&mut runs));
            proptest::prop_assert_eq!(is_one_word(&text), runs.contains(&text), "{:?}", runs);
        }

        #[test]
        fn cjk_runs_agree_with_the_definition(text in "[a-z0-9_ .,é分布式锁ア한\u{3000}-\u{3100}\u{20000}\u{80}-\u{3000}]{0,40}") {
            let mut runs = Runs(Vec::new());
            scan(&text, &mut runs);
            proptest::prop_assert_eq!(runs.0, cjk_runs_by_definition(&text));
        }
    }
}
