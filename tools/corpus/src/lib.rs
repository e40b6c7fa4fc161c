//! Deterministic multi-topic developer conversations in English, Chinese and both, for ctxgate's
//! benches and measurements (STYLE §8: corpora come from here with a fixed seed, nothing large
//! is committed).
//!
//! A [`Corpus`] is a seed. Each session is an endless, independent stream of [`Turn`]s: topic
//! runs of random length (a few turns to a few dozen), sometimes returning to an earlier topic.
//! Each of the 20 topics has its own vocabulary (identifiers, versions, error messages, paths,
//! commands, code), filled into phrasing shared by all topics, so topics overlap the way real
//! ones do. A session has a language style: English, Chinese (with English identifiers), or
//! mixed sentence by sentence. A turn carries about 100–150 anchor occurrences.
//!
//! ```
//! let corpus = corpus::Corpus::new(42);
//! let turns: Vec<_> = corpus.session(0).take(3).collect();
//! assert_eq!(turns, corpus.session(0).take(3).collect::<Vec<_>>());
//! let question = corpus.query_for(turns[0].topic, 0);
//! assert!(!question.is_empty());
//! ```

pub mod index;
pub mod jsonl;
mod phrases;
mod rng;
pub mod team;
pub mod timing;
mod topics;
pub mod transcript;

use phrases::*;
use rng::Rng;
pub use topics::Lang;
use topics::{TOPICS, TopicData};

/// Bumped whenever the generated text changes, so cached indexes are rebuilt.
pub const CORPUS_VERSION: u32 = 1;

/// A topic of conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicId(u8);

impl TopicId {
    /// Every topic, in a fixed order.
    pub fn all() -> impl Iterator<Item = TopicId> {
        (0..TOPICS.len()).map(|i| TopicId(i as u8))
    }

    /// The topic named `name` (see [`TopicId::name`]).
    pub fn from_name(name: &str) -> Option<TopicId> {
        TOPICS.iter().position(|t| t.name == name).map(|i| TopicId(i as u8))
    }

    /// A stable ASCII name, such as `redis-lock` or `zh-db-index`.
    pub fn name(self) -> &'static str {
        self.data().name
    }

    /// A human title, such as `Redis distributed locks` or `数据库索引`.
    pub fn title(self) -> &'static str {
        self.data().title
    }

    /// The language the topic is usually discussed in.
    pub fn native_lang(self) -> Lang {
        self.data().native
    }

    fn data(self) -> &'static TopicData {
        TOPICS[usize::from(self.0)]
    }
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// What the turn is about.
    pub topic: TopicId,
    /// The user message: 1–3 sentences.
    pub user: String,
    /// The assistant reply: 2–6 sentences.
    pub assistant: String,
}

/// A turn placed in a data set: its session and its position there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacedTurn {
    /// Session index, from 0 (its name is [`session_name`]).
    pub session: u32,
    /// Turn index within the session, from 0.
    pub turn: u32,
    /// The turn.
    pub content: Turn,
}

/// The name of session `index` in data sets and indexes built from a corpus.
pub fn session_name(index: u32) -> String {
    format!("session-{index:04}")
}

/// A seeded generator of conversations.
#[derive(Debug, Clone, Copy)]
pub struct Corpus {
    seed: u64,
}

/// Streams of the seed: each use of randomness gets its own, so they do not shift each other.
const STREAM_SESSION: u64 = 1;
const STREAM_QUERY: u64 = 2;
const STREAM_IDENTIFIERS: u64 = 3;

/// Identifiers appended to each side of a turn by [`Corpus::with_identifiers`].
pub const IDENTIFIERS_PER_SIDE: usize = 3;

impl Corpus {
    /// A corpus; equal seeds give equal text.
    pub fn new(seed: u64) -> Self {
        Corpus { seed }
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The endless turns of session `index`, independent of every other session.
    pub fn session(&self, index: u32) -> SessionTurns {
        let mut rng = Rng::derive(self.seed, STREAM_SESSION, u64::from(index));
        let style = match rng.below(10) {
            0..=4 => Style::English,
            5..=7 => Style::Chinese,
            _ => Style::Mixed,
        };
        let topic = rng.below(TOPICS.len());
        let run_left = run_length(&mut rng);
        SessionTurns { rng, style, topic, run_left, first_of_run: true, visited: vec![topic] }
    }

    /// `turns` turns spread over `sessions` sessions (the first `turns % sessions` sessions get
    /// one more), session by session, in turn order.
    ///
    /// # Panics
    /// If `sessions` is 0 while `turns` is not.
    pub fn spread(&self, turns: u64, sessions: u32) -> impl Iterator<Item = PlacedTurn> + '_ {
        assert!(sessions > 0 || turns == 0, "cannot spread {turns} turns over 0 sessions");
        let sessions = sessions.max(1);
        let base = turns / u64::from(sessions);
        let extra = turns % u64::from(sessions);
        (0..sessions).flat_map(move |s| {
            let count = base + u64::from(u64::from(s) < extra);
            self.session(s).take(count as usize).enumerate().map(move |(t, content)| PlacedTurn {
                session: s,
                turn: t as u32,
                content,
            })
        })
    }

    /// `placed` with identifiers drawn from large pools appended to both sides, as real logs
    /// carry them (hosts, tickets, commits): a vocabulary that keeps growing with the history,
    /// where the topic vocabularies alone stop at a few thousand anchors. Deterministic per
    /// seed, session and turn.
    pub fn with_identifiers(&self, mut placed: PlacedTurn) -> PlacedTurn {
        let index = (u64::from(placed.session) << 32) | u64::from(placed.turn);
        let mut rng = Rng::derive(self.seed, STREAM_IDENTIFIERS, index);
        let mut user = Vec::with_capacity(IDENTIFIERS_PER_SIDE);
        for _ in 0..IDENTIFIERS_PER_SIDE {
            user.push(format!("node-{:05} ticket_{:06}", rng.below(60_000), rng.below(600_000)));
        }
        let commits: Vec<String> =
            (0..IDENTIFIERS_PER_SIDE).map(|_| format!("commit_{:07x}", rng.below(2_000_000))).collect();
        placed.content.user.push_str(&format!(" See {}.", user.join(" ")));
        placed.content.assistant.push_str(&format!(" Checked {}.", commits.join(" ")));
        placed
    }

    /// A realistic follow-up question about `topic`; `n` picks one of many variants.
    pub fn query_for(&self, topic: TopicId, n: u64) -> String {
        let mut rng = Rng::derive(self.seed, STREAM_QUERY, (u64::from(topic.0) << 32) ^ n);
        let data = topic.data();
        let lang = if rng.percent(80) { data.native } else { other(data.native) };
        let template = match lang {
            Lang::En => rng.pick(QUERY_EN),
            Lang::Zh => rng.pick(QUERY_ZH),
        };
        fill(template, data, &mut rng)
    }
}

/// The language style of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Style {
    English,
    Chinese,
    /// Chinese and English sentences side by side.
    Mixed,
}

/// The turns of one session: an endless iterator (use `take`).
#[derive(Debug, Clone)]
pub struct SessionTurns {
    rng: Rng,
    style: Style,
    topic: usize,
    run_left: u32,
    first_of_run: bool,
    visited: Vec<usize>,
}

impl Iterator for SessionTurns {
    type Item = Turn;

    fn next(&mut self) -> Option<Turn> {
        if self.run_left == 0 {
            self.switch_topic();
        }
        self.run_left -= 1;
        let first = std::mem::replace(&mut self.first_of_run, false);
        Some(self.turn(first))
    }
}

impl SessionTurns {
    fn switch_topic(&mut self) {
        let rng = &mut self.rng;
        let previous = self.topic;
        self.topic = if self.visited.len() > 1 && rng.percent(30) {
            // Back to an earlier topic, as people do.
            *rng.pick(&self.visited)
        } else {
            rng.below(TOPICS.len())
        };
        if self.topic == previous {
            self.topic = (previous + 1 + rng.below(TOPICS.len() - 1)) % TOPICS.len();
        }
        if !self.visited.contains(&self.topic) {
            self.visited.push(self.topic);
        }
        self.run_left = run_length(rng);
        self.first_of_run = true;
    }

    fn turn(&mut self, first_of_run: bool) -> Turn {
        let data = &TOPICS[self.topic];
        let rng = &mut self.rng;
        let lang = turn_lang(self.style, data.native, rng);
        let mixed = self.style == Style::Mixed;

        let mut user = Text::default();
        let opener = first_of_run || rng.percent(30);
        let first = match (lang, opener) {
            (Lang::En, true) => USER_OPEN_EN,
            (Lang::En, false) => USER_FOLLOW_EN,
            (Lang::Zh, true) => USER_OPEN_ZH,
            (Lang::Zh, false) => USER_FOLLOW_ZH,
        };
        user.push(&fill(rng.pick::<&str>(first), data, rng));
        // Sentence counts: English sentences carry fewer anchors than Chinese ones (CJK text
        // gives a 2-gram and a 3-gram per character), so English turns have more of them.
        let (more, sentences) = match lang {
            Lang::En => ([0, 1, 1, 1, 2, 2, 2, 2, 2, 2][rng.below(10)], rng.between(3, 6)),
            Lang::Zh => ([0, 0, 0, 0, 1, 1, 1, 1, 1, 2][rng.below(10)], rng.between(2, 4)),
        };
        let mut used: Vec<&str> = Vec::new();
        while user.sentences < 1 + more {
            let lang = sentence_lang(lang, mixed, rng);
            let pool = if lang == Lang::En { USER_MORE_EN } else { USER_MORE_ZH };
            let template = *rng.pick(pool);
            if !used.contains(&template) {
                used.push(template);
                user.push(&fill(template, data, rng));
            }
        }

        let mut assistant = Text::default();
        used.clear();
        while assistant.sentences < sentences {
            let lang = sentence_lang(lang, mixed, rng);
            let pool = if lang == Lang::En { ASSISTANT_EN } else { ASSISTANT_ZH };
            let template = *rng.pick(pool);
            if used.contains(&template) {
                continue; // a reply does not repeat itself
            }
            used.push(template);
            assistant.push(&fill(template, data, rng));
        }
        Turn { topic: TopicId(self.topic as u8), user: user.text, assistant: assistant.text }
    }
}

/// Sentences joined the way each language writes them: a space after Latin punctuation, none
/// after a CJK sentence end.
#[derive(Default)]
struct Text {
    text: String,
    sentences: u32,
}

impl Text {
    fn push(&mut self, sentence: &str) {
        if let Some(last) = self.text.chars().last()
            && !matches!(last, '。' | '？' | '！' | '：')
        {
            self.text.push(' ');
        }
        self.text.push_str(sentence);
        self.sentences += 1;
    }
}

/// Topic runs: mostly short, sometimes long (a whole afternoon on one bug).
fn run_length(rng: &mut Rng) -> u32 {
    match rng.below(100) {
        0..=54 => rng.between(2, 8),
        55..=89 => rng.between(8, 25),
        _ => rng.between(25, 60),
    }
}

fn other(lang: Lang) -> Lang {
    match lang {
        Lang::En => Lang::Zh,
        Lang::Zh => Lang::En,
    }
}

fn turn_lang(style: Style, native: Lang, rng: &mut Rng) -> Lang {
    let zh_percent = match (style, native) {
        (Style::English, Lang::En) => 0,
        (Style::English, Lang::Zh) => 40,
        (Style::Chinese, Lang::En) => 85,
        (Style::Chinese, Lang::Zh) => 100,
        (Style::Mixed, Lang::En) => 50,
        (Style::Mixed, Lang::Zh) => 70,
    };
    if rng.percent(zh_percent) { Lang::Zh } else { Lang::En }
}

fn sentence_lang(turn: Lang, mixed: bool, rng: &mut Rng) -> Lang {
    if mixed && rng.percent(25) { other(turn) } else { turn }
}

/// Replaces every `{slot}` of `template` with a random value of that slot of `topic`.
fn fill(template: &str, topic: &TopicData, rng: &mut Rng) -> String {
    let mut out = String::with_capacity(template.len() * 2);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').map(|c| open + c).expect("templates close every slot");
        out.push_str(rng.pick::<&str>(slot(topic, &rest[open + 1..close])));
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

fn slot(topic: &TopicData, name: &str) -> &'static [&'static str] {
    match name {
        "kw" => topic.kw,
        "zkw" => topic.zkw,
        "id" => topic.id,
        "err" => topic.err,
        "path" => topic.path,
        "ver" => topic.ver,
        "cmd" => topic.cmd,
        "code" => topic.code,
        "sym" => topic.sym,
        "zsym" => topic.zsym,
        "cause" => topic.cause,
        "zcause" => topic.zcause,
        "fix" => topic.fix,
        "zfix" => topic.zfix,
        "n" => NUMBERS,
        other => panic!("unknown template slot {{{other}}}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, HashSet};

    fn anchors(text: &str) -> u32 {
        ctxgate::anchor::extract(text).total()
    }

    #[test]
    fn same_seed_same_text() {
        let a: Vec<_> = Corpus::new(42).spread(300, 3).collect();
        let b: Vec<_> = Corpus::new(42).spread(300, 3).collect();
        assert_eq!(a, b);
        let q: Vec<_> = TopicId::all().map(|t| Corpus::new(42).query_for(t, 3)).collect();
        let r: Vec<_> = TopicId::all().map(|t| Corpus::new(42).query_for(t, 3)).collect();
        assert_eq!(q, r);
    }

    #[test]
    fn different_seeds_differ() {
        let a: Vec<_> = Corpus::new(1).session(0).take(50).collect();
        let b: Vec<_> = Corpus::new(2).session(0).take(50).collect();
        let same = a.iter().zip(&b).filter(|(x, y)| x == y).count();
        assert!(same < 5, "{same} of 50 turns are equal across seeds");
        let c: Vec<_> = Corpus::new(1).session(1).take(50).collect();
        assert_ne!(a, c, "sessions of one seed differ");
    }

    #[test]
    fn anchors_per_turn_in_range() {
        let turns: Vec<_> = Corpus::new(42).spread(4000, 40).collect();
        let total: u64 =
            turns.iter().map(|t| u64::from(anchors(&t.content.user) + anchors(&t.content.assistant))).sum();
        let average = total as f64 / turns.len() as f64;
        assert!((100.0..=150.0).contains(&average), "average anchors per turn is {average:.1}");
    }

    #[test]
    fn shapes_and_topics() {
        let corpus = Corpus::new(7);
        let mut topics = HashSet::new();
        let mut runs = BTreeMap::<u32, u32>::new();
        let mut run = 0;
        let mut previous = None;
        for turn in corpus.session(0).take(3000) {
            assert!(!turn.user.trim().is_empty() && !turn.assistant.trim().is_empty());
            assert!(!turn.user.contains('{') || turn.user.contains('`'), "unfilled slot: {}", turn.user);
            topics.insert(turn.topic);
            if previous.is_some_and(|p| p != turn.topic) {
                *runs.entry(run).or_default() += 1;
                run = 0;
            }
            run += 1;
            previous = Some(turn.topic);
        }
        assert_eq!(topics.len(), TOPICS.len(), "3000 turns visit every topic");
        assert!(TOPICS.len() >= 16);
        assert!(runs.len() > 10, "topic runs vary in length: {runs:?}");
        let placed: Vec<_> = corpus.spread(3000, 30).collect();
        let chinese =
            placed.iter().filter(|p| p.content.assistant.chars().any(ctxgate::text::is_cjk)).count();
        let share = chinese as f64 / placed.len() as f64;
        assert!((0.2..=0.8).contains(&share), "{share:.2} of replies have Chinese text");
        let styles: HashSet<_> = (0..30).map(|s| corpus.session(s).style).collect();
        assert_eq!(styles.len(), 3, "sessions come in every language style");
    }

    #[test]
    fn identifiers_are_appended_deterministically() {
        let corpus = Corpus::new(9);
        let plain: Vec<PlacedTurn> = corpus.spread(40, 2).collect();
        let wide: Vec<PlacedTurn> = corpus.spread(40, 2).map(|t| corpus.with_identifiers(t)).collect();
        let again: Vec<PlacedTurn> = corpus.spread(40, 2).map(|t| corpus.with_identifiers(t)).collect();
        assert_eq!(wide, again);
        let mut ids = std::collections::HashSet::new();
        for (p, w) in plain.iter().zip(&wide) {
            assert!(w.content.user.starts_with(&p.content.user) && w.content.user.contains(" ticket_"));
            assert!(
                w.content.assistant.starts_with(&p.content.assistant)
                    && w.content.assistant.contains("commit_")
            );
            ids.extend(
                w.content.assistant.split(' ').filter(|w| w.starts_with("commit_")).map(str::to_string),
            );
        }
        // Drawn from a pool far larger than the turns: nearly every one is new.
        assert!(ids.len() > 100, "{}", ids.len());
    }

    #[test]
    fn spread_places_every_turn_once() {
        let placed: Vec<_> = Corpus::new(3).spread(10, 3).collect();
        let shape: Vec<(u32, u32)> = placed.iter().map(|p| (p.session, p.turn)).collect();
        assert_eq!(shape, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]);
        assert_eq!(placed[4].content, Corpus::new(3).session(1).next().unwrap());
    }

    #[test]
    fn every_slot_of_every_topic_has_values() {
        for topic in TOPICS {
            for name in [
                "kw", "zkw", "id", "err", "path", "ver", "cmd", "code", "sym", "zsym", "cause", "zcause",
                "fix", "zfix",
            ] {
                assert!(!slot(topic, name).is_empty(), "topic {} has no {name}", topic.name);
            }
        }
        let names: HashSet<_> = TOPICS.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), TOPICS.len(), "topic names are unique");
        assert_eq!(TopicId::from_name("redis-lock").map(TopicId::name), Some("redis-lock"));
    }

    #[test]
    fn queries_are_on_topic() {
        let corpus = Corpus::new(42);
        for topic in TopicId::all() {
            let q = corpus.query_for(topic, 0);
            assert!(anchors(&q) >= 2, "query {q:?} of {} has anchors", topic.name());
            assert!(!q.contains('{'), "unfilled slot in {q:?}");
        }
    }
}
