//! Framing words: how a question is asked, not what it is about.
//!
//! `problem`, `suggest`, `better way`, `请问一下`, `怎么解决` appear in questions on every topic.
//! They stay anchors (stored with their postings, seen by the gate), but a query's framing words
//! are not scored by its recall (`pipeline` leaves their lists unread), never admit a block
//! to a selection, never count toward its coverage, and are never content words (DESIGN §3.3):
//! a turn that shares only its phrasing with the query is not evidence for it. In a long-lived
//! index IDF learns which words are common; these lists are what a young index cannot learn
//! from a few turns. Like the stop words, the lists are small, fixed and documented here, and
//! hold no topic word.

use super::cjk::{Run, chars_room};
use super::word::{FRAMING, listed};
use crate::text::is_cjk;
use std::sync::LazyLock;

/// English framing words (lower case, sorted): requests, politeness, evaluation, discourse,
/// prepositions and adverbs the stop words leave out, and the verbs every technical question
/// uses whatever its topic (`error`, `fails`, `fix`, `configure`, `use`, `in production`, `last night`).
#[rustfmt::skip]
pub const ENGLISH: &[&str] = &[
    "able", "across", "actually", "advice", "again", "against", "ago", "already", "although",
    "always", "among", "anything", "anyway", "appreciate", "approach", "around", "ask", "asking",
    "basically", "better", "between", "break", "breaks", "broken", "configure", "configured",
    "cool", "correct", "correctly", "day", "days", "deal", "difference", "differences", "during",
    "earlier", "else", "error", "errors", "even", "ever", "every", "exactly", "explain",
    "explanation", "fail", "failed", "failing", "fails", "failure", "few", "fine", "first", "fix",
    "fixed", "fixing", "general", "generally", "get", "getting", "good", "got", "great", "handle",
    "handling", "happen", "happened", "happens", "hello", "help", "helps", "hey", "hi", "however",
    "idea", "ideas", "inside", "instead", "involve", "involved", "involves", "involving", "issue",
    "issues", "keep", "kind", "know", "last", "later", "like", "lot", "lots", "make", "many",
    "maybe", "mean", "morning", "much", "need", "never", "next", "nice", "night", "often", "okay",
    "one", "per", "perfect", "please", "possible", "problem", "problems", "prod", "production",
    "question", "questions", "quick", "really", "recommend", "recommendation", "recommended",
    "regarding", "related", "relevant", "right", "seeing", "seem", "seems", "setup", "something",
    "sometimes", "soon", "specific", "specifically", "still", "suggest", "suggestion",
    "suggestions", "sure", "thank", "thanks", "thing", "things", "think", "though", "time", "times",
    "today", "together", "tomorrow", "tried", "try", "trying", "twice", "use", "used", "uses",
    "using", "usually", "via", "want", "way", "ways", "week", "within", "without", "wonder",
    "wondering", "work", "worked", "working", "works", "yeah", "yes", "yesterday", "yet",
];

/// Chinese framing words, particles and deictics, and the verbs of technical questions
/// (`报错`, `出问题`, `配置`, `线上`). Single characters are only particles and pronouns that
/// do not start or end content words (`的`, `吗`, `我`), never `更` (`更新`) or `能` (`性能`).
/// A CJK n-gram of a query with a character inside an occurrence of these (`请问`, `到一` of
/// `遇到一个`, `下分` of `一下分区`) is framing ([`cjk_framing_ngrams`]).
#[rustfmt::skip]
const CJK: &[&str] = &[
    "一下", "一个", "一般", "不行", "为什么", "什么", "介绍", "你好", "你们", "做法", "具体", "出现", "办法", "区别",
    "可以", "可能", "告诉", "问题", "哪些", "哪个", "因为", "如何", "如果", "帮忙", "帮我", "常见", "应该", "建议",
    "怎么", "怎样", "情况", "我们", "或者", "推荐", "方法", "时候", "是否", "有没有", "有个", "的话", "总是", "能不能",
    "能否", "解决", "解释", "请问", "请教", "谢谢", "感谢", "还有", "还是", "这样", "遇到", "需要", "一直", "但是",
    "所以", "然后", "就是", "其实", "这个", "那个", "这些", "那些", "可不可以", "出问题", "出错", "报错", "错误", "失败",
    "配置", "设置", "修复", "怎么办", "不了", "一些", "有些", "线上", "生产环境", "环境", "经常", "已经", "的", "了",
    "吗", "呢", "吧", "啊", "呀", "哦", "嗯", "我", "你", "您", "他", "她", "们", "和", "也", "都", "就",
    "还", "又", "是", "有", "在",
];

/// The longest English framing word, in bytes.
pub const LONGEST_ENGLISH: usize = 14;

/// True if the English word `word` (lower case) is a framing word.
pub fn is_framing_word(word: &str) -> bool {
    listed(word) & FRAMING != 0
}

/// The CJK framing words, arranged for one scan of a text instead of one per word.
struct CjkWords {
    /// The words as characters, grouped by their first character.
    groups: Vec<Vec<Vec<char>>>,
    /// Open-addressing table from a first character to its group: `(character, group)`,
    /// [`NO_CHAR`] in an empty slot. One multiplication and, almost always, one probe per
    /// character of a text, where a binary search took several.
    slots: Vec<(u32, usize)>,
}

/// An empty slot of [`CjkWords::slots`]: no character is this large.
const NO_CHAR: u32 = u32::MAX;

impl CjkWords {
    fn new(words: &[&str]) -> Self {
        let mut first_chars: Vec<char> = Vec::new();
        let mut groups: Vec<Vec<Vec<char>>> = Vec::new();
        for word in words {
            let word: Vec<char> = word.chars().collect();
            let Some(&first) = word.first() else { continue };
            match first_chars.iter().position(|&c| c == first) {
                Some(group) => groups[group].push(word),
                None => {
                    first_chars.push(first);
                    groups.push(vec![word]);
                }
            }
        }
        // At most a quarter full.
        let size = (first_chars.len() * 4).next_power_of_two();
        let mut table = CjkWords { groups, slots: vec![(NO_CHAR, 0); size] };
        for (group, &c) in first_chars.iter().enumerate() {
            let mut i = table.slot(c);
            while table.slots[i].0 != NO_CHAR {
                i = (i + 1) % size;
            }
            table.slots[i] = (u32::from(c), group);
        }
        table
    }

    /// The home slot of `c`.
    fn slot(&self, c: char) -> usize {
        let spread = u64::from(c).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (spread >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// The words that start with `c`.
    fn starting_with(&self, c: char) -> &[Vec<char>] {
        let mut i = self.slot(c);
        // The table is never full, so an empty slot ends every probe sequence.
        loop {
            match self.slots[i] {
                (key, group) if key == u32::from(c) => return &self.groups[group],
                (NO_CHAR, _) => return &[],
                _ => i = (i + 1) % self.slots.len(),
            }
        }
    }
}

static CJK_WORDS: LazyLock<CjkWords> = LazyLock::new(|| CjkWords::new(CJK));

/// For each character of `text`, whether it lies inside an occurrence of a Chinese framing
/// word. Indexed by char position.
pub fn cjk_framing_chars(text: &str) -> Vec<bool> {
    let chars: Vec<char> = text.chars().collect();
    framing_marks(&chars)
}

/// [`cjk_framing_chars`] of the characters `chars`.
fn framing_marks(chars: &[char]) -> Vec<bool> {
    let mut marked = vec![false; chars.len()];
    mark_words(chars, &mut marked);
    // Non-CJK characters never make an n-gram framing.
    for (m, c) in marked.iter_mut().zip(chars) {
        *m &= is_cjk(*c);
    }
    marked
}

/// Sets `marked[i]` for each character `chars[i]` inside an occurrence of a framing word.
fn mark_words(chars: &[char], marked: &mut [bool]) {
    let words = &*CJK_WORDS;
    for (start, &c) in chars.iter().enumerate() {
        for word in words.starting_with(c) {
            if chars[start..].starts_with(word) {
                marked[start..start + word.len()].fill(true);
            }
        }
    }
}

/// The framing n-grams of a text found one CJK run at a time, with buffers reused from run to
/// run: no pass over the whole text and no allocation per run.
///
/// Every framing word is CJK throughout (tested), so each occurrence lies inside one CJK run,
/// and an n-gram (at most 3 characters) holding a marked character reaches at most two
/// characters past its run on either side.
#[derive(Debug, Default)]
pub struct RunFraming {
    /// Byte offsets of the characters from two before the run to two after it, and the end
    /// of the last.
    bounds: Vec<usize>,
    /// Whether each of those characters is inside a framing word.
    marked: Vec<bool>,
}

impl RunFraming {
    /// Calls `emit` with the hash of each n-gram of [`cjk_framing_ngrams`] of `text` that
    /// holds a character of `run` inside a framing word. Over all runs of the text, that is
    /// each framing n-gram at least once (one between two runs can come twice).
    ///
    /// `own` holds the hashes of the run's own 2-grams and 3-grams, in order: those n-grams
    /// are not hashed again, only the ones reaching past the run.
    pub fn for_each_hash(
        &mut self,
        text: &str,
        run: &Run,
        own: [&[u64]; 2],
        hash: impl Fn(&str) -> u64,
        mut emit: impl FnMut(u64),
    ) {
        self.marked.clear();
        self.bounds.clear();
        if self.marked.capacity() == 0 {
            // The runs and two characters either side of each, and the end.
            self.marked.reserve(chars_room(text.len() - run.start) + 4);
            self.bounds.reserve(chars_room(text.len() - run.start) + 5);
        }
        let head = text.get(..run.start).unwrap_or_default();
        let from = head.char_indices().rev().take(2).last().map_or(run.start, |(i, _)| i);
        self.push_context(text, from, run.start);
        let lead = self.marked.len();
        self.marked.resize(lead + run.chars.len(), false);
        mark_words(&run.chars, &mut self.marked[lead..]);
        if !self.marked.contains(&true) {
            return;
        }
        let tail = text.get(run.end..).unwrap_or_default();
        let to = run.end + tail.char_indices().nth(2).map_or(tail.len(), |(i, _)| i);
        self.bounds.extend(run.offsets());
        self.push_context(text, run.end, to);
        self.bounds.push(to);
        for (n, own) in [2, 3].into_iter().zip(own) {
            for (start, window) in self.marked.windows(n).enumerate() {
                if !window.contains(&true) {
                    continue;
                }
                // The run's own n-gram `k`, if the window lies inside the run.
                if let Some(&h) = start.checked_sub(lead).and_then(|k| own.get(k)) {
                    emit(h);
                } else if let Some(gram) = text.get(self.bounds[start]..self.bounds[start + n]) {
                    emit(hash(gram));
                }
            }
        }
    }

    /// Appends the characters of `text[from..to]`, outside the run, to `bounds` and `marked`.
    fn push_context(&mut self, text: &str, from: usize, to: usize) {
        for (i, _) in text.get(from..to).unwrap_or_default().char_indices() {
            self.bounds.push(from + i);
            self.marked.push(false);
        }
    }
}

/// Calls `emit` with each n-gram of [`cjk_framing_ngrams`], 2-grams then 3-grams, in text
/// order, repeats included, without allocating a string per n-gram.
pub fn for_each_framing_ngram(text: &str, mut emit: impl FnMut(&str)) {
    if text.is_ascii() || !text.chars().any(is_cjk) {
        return; // no CJK character: nothing is marked
    }
    let (offsets, chars): (Vec<usize>, Vec<char>) = text.char_indices().unzip();
    let marked = framing_marks(&chars);
    let end_of = |i: usize| offsets.get(i).copied().unwrap_or(text.len());
    for n in [2usize, 3] {
        for start in 0..chars.len().saturating_sub(n - 1) {
            if marked[start..start + n].iter().any(|&m| m) {
                emit(&text[offsets[start]..end_of(start + n)]);
            }
        }
    }
}

#[cfg(any(test, feature = "internals"))]
/// The CJK n-grams (2 and 3 characters) of `text` that name no topic: those with a character
/// inside an occurrence of a framing word. That is the framing words' own n-grams (`请问`, `到一`
/// of `遇到一个`) and the n-grams straddling a framing word and its neighbour (`下分` of
/// `一下分区`): rare cross-word n-grams look discriminative to IDF, but belong to no word.
pub fn cjk_framing_ngrams(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for_each_framing_ngram(text, |gram| {
        if !out.iter().any(|g| g == gram) {
            out.push(gram.to_string());
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_list_is_sorted() {
        assert!(ENGLISH.windows(2).all(|w| w[0] < w[1]), "keep ENGLISH sorted");
        assert_eq!(ENGLISH.iter().map(|w| w.len()).max(), Some(LONGEST_ENGLISH));
        assert!(is_framing_word("suggest") && is_framing_word("problem"));
        assert!(is_framing_word("production") && is_framing_word("errors"));
        assert!(!is_framing_word("redis") && !is_framing_word("autovacuum") && !is_framing_word("index"));
    }

    #[test]
    fn cjk_words_are_cjk_throughout() {
        // `RunFraming` looks for each occurrence inside one CJK run.
        assert!(CJK.iter().all(|w| !w.is_empty() && w.chars().all(is_cjk)));
    }

    /// The definition: every occurrence of every word, found by trying each at each position.
    fn marks_by_definition(text: &str) -> Vec<bool> {
        let chars: Vec<char> = text.chars().collect();
        let mut marked = vec![false; chars.len()];
        for word in CJK {
            let word: Vec<char> = word.chars().collect();
            for start in 0..(chars.len() + 1).saturating_sub(word.len()) {
                if chars[start..start + word.len()] == word[..] {
                    marked[start..start + word.len()].iter_mut().for_each(|m| *m = true);
                }
            }
        }
        marked.iter().zip(&chars).map(|(m, c)| *m && is_cjk(*c)).collect()
    }

    #[test]
    fn framing_chars_match_the_definition() {
        for text in [
            "",
            "请问一下，分布式锁怎么解决？",
            "可不可以用redis做分布式锁，可以吗",
            "生产环境经常出问题怎么办 能不能 有没有",
            "plain english text only",
            "遇到一个问题的话我们就是这样",
        ] {
            assert_eq!(cjk_framing_chars(text), marks_by_definition(text), "{text:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn framing_chars_match_the_definition_anywhere(
            text in "[一下个般不行为什么介绍你好们做法具体出现办问题可以能告诉哪些 a,的了吗呢吧分布式锁]{0,60}"
        ) {
            proptest::prop_assert_eq!(cjk_framing_chars(&text), marks_by_definition(&text));
        }
    }

    #[test]
    fn cjk_framing_ngrams_of_a_question() {
        let grams = cjk_framing_ngrams("请问一下，分布式锁怎么解决？");
        for g in ["请问", "问一", "一下", "请问一", "问一下", "怎么", "么解", "解决", "怎么解", "么解决"]
        {
            assert!(grams.contains(&g.to_string()), "{g} should be framing: {grams:?}");
        }
        for g in ["锁怎", "锁怎么", "下，"] {
            assert!(
                grams.contains(&g.to_string()) || g.contains('，'),
                "{g} straddles a framing word: {grams:?}"
            );
        }
        for g in ["分布", "布式", "式锁", "分布式", "布式锁"] {
            assert!(!grams.contains(&g.to_string()), "{g} names the topic: {grams:?}");
        }
    }
}
