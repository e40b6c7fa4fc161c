//! The seed's 100-round contamination protocol with everything generated: 4 topics × 25 turns
//! whose shared everyday phrasing is made of invented words, none of them in any list of the
//! code (stop words, framing words, CJK framing characters; checked as they are made). A
//! mechanism that passes here learnt which words identify nothing from the index, not from a
//! list written for one fixture's phrasing.
//!
//! English-like and Chinese-like text, interleaved round-robin and in runs; in runs some
//! follow-ups name no subject at all. Run **late** (the index already holds the same person's
//! earlier conversations: the same phrasing, other subjects) and **early** (a fresh index:
//! the conversation under test is all there is, so no statistic has seen the phrasing before
//! it comes back within the conversation). Each round asks the next user message `select` with
//! one policy and budget. A round whose query names a subject its topic has mentioned must get
//! a turn of that topic (when the budget can hold one), and no round may get a turn of another
//! topic.
//!
//! Shared by `tools/eval` (`eval --contamination`, every combination over more seeds) and
//! `tests/contamination_generated.rs` (which asserts zero), through a `#[path]` include: it
//! uses only ctxgate's public API.

use ctxgate::anchor::{cjk_framing_chars, is_framing_word, is_stop_word};
use ctxgate::{Gatekeeper, Options, Policy, SelectOptions};
use std::collections::HashSet;

/// Topics of the conversation under test.
pub const TOPICS: usize = 4;
/// Turns of each topic.
pub const TURNS_PER_TOPIC: usize = 25;
const SUBJECTS_PER_TOPIC: usize = 12;
/// Conversations in the index before the one under test, run late.
pub const EARLIER_SESSIONS: usize = 3;

/// A xorshift generator: the same sequence on every machine, so a failing seed replays.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// The next number.
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The script of the invented words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Script {
    /// Latin letters, words separated by spaces.
    Latin,
    /// Han characters, no spaces.
    Han,
}

/// How the topics follow each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One turn of each topic in turn: every query switches.
    RoundRobin,
    /// Each topic's 25 turns together, some follow-ups made of a frame alone.
    Runs,
}

/// Whether the index has seen the person's phrasing before the conversation under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// A fresh index: the conversation under test is the first.
    Early,
    /// After [`EARLIER_SESSIONS`] conversations of the same person.
    Late,
}

/// One combination to run.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// Script of the words.
    pub script: Script,
    /// Order of the topics.
    pub layout: Layout,
    /// Fresh index or not.
    pub phase: Phase,
    /// Selection policy.
    pub policy: Policy,
    /// Token budget of every round.
    pub budget: u32,
    /// Seed of the generator.
    pub seed: u64,
}

/// Invents words, each new and outside every list of the code.
struct Words {
    rng: Rng,
    script: Script,
    seen: HashSet<String>,
    /// Han characters already used: generic and topic words never share one, so no CJK n-gram
    /// is shared by accident.
    used_chars: HashSet<char>,
}

impl Words {
    fn new(script: Script, seed: u64) -> Self {
        Words { rng: Rng(seed | 1), script, seen: HashSet::new(), used_chars: HashSet::new() }
    }

    fn word(&mut self) -> String {
        loop {
            let word = match self.script {
                Script::Latin => {
                    const ONSETS: &[&str] = &[
                        "b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "kl",
                        "tr",
                    ];
                    const VOWELS: &[&str] = &["a", "e", "i", "o", "u"];
                    let syllables = 2 + self.rng.below(2);
                    let mut w = String::new();
                    for _ in 0..syllables {
                        w.push_str(ONSETS[self.rng.below(ONSETS.len())]);
                        w.push_str(VOWELS[self.rng.below(VOWELS.len())]);
                    }
                    w.push_str(["x", "n", "k", "m", ""][self.rng.below(5)]);
                    w
                }
                Script::Han => {
                    let len = 2 + self.rng.below(2);
                    (0..len)
                        .map(|_| {
                            char::from_u32(0x4E00 + self.rng.below(0x5000) as u32).expect("a Han code point")
                        })
                        .collect()
                }
            };
            let listed = match self.script {
                Script::Latin => is_stop_word(&word) || is_framing_word(&word) || word.len() < 4,
                Script::Han => {
                    cjk_framing_chars(&word).iter().any(|&f| f)
                        || word.chars().any(|c| self.used_chars.contains(&c))
                }
            };
            if !listed && self.seen.insert(word.clone()) {
                self.used_chars.extend(word.chars().filter(|c| !c.is_ascii()));
                return word;
            }
        }
    }

    fn phrase_up_to(&mut self, min: usize, max: usize) -> String {
        let n = min + self.rng.below(max - min + 1);
        let words: Vec<String> = (0..n).map(|_| self.word()).collect();
        match self.script {
            Script::Latin => words.join(" "),
            Script::Han => words.concat(),
        }
    }
}

/// One generated turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// Its topic.
    pub topic: usize,
    /// The user's text.
    pub user: String,
    /// The reply.
    pub assistant: String,
    /// The subjects (indices in its topic) the user's text names that are content words
    /// (DESIGN §3.3: four characters or more).
    pub asked: Vec<usize>,
    /// The subjects the turn holds, both sides.
    pub holds: Vec<usize>,
    /// A follow-up whose user text is a frame alone.
    pub bare: bool,
}

/// A frame: generic words around the `{a}` and `{b}` slots, a question or a statement.
fn frame(words: &mut Words, question: bool, slots: usize) -> String {
    let sep = match words.script {
        Script::Latin => " ",
        Script::Han => "，",
    };
    let mut parts = vec![words.phrase_up_to(2, 3)];
    for slot in ["{a}", "{b}"].iter().take(slots) {
        parts.push(slot.to_string());
        parts.push(words.phrase_up_to(1, 3));
    }
    let end = match (words.script, question) {
        (Script::Latin, true) => "?",
        (Script::Latin, false) => ".",
        (Script::Han, true) => "？",
        (Script::Han, false) => "。",
    };
    format!("{}{end}", parts.join(sep))
}

/// `sessions` conversations of one person: the same phrasing in each, and subjects of their
/// own (no subject word is in two conversations).
pub fn conversations(script: Script, layout: Layout, seed: u64, sessions: usize) -> Vec<Vec<Turn>> {
    let mut words = Words::new(script, seed);
    // The shared phrasing, generated first: every topic of every conversation uses it.
    let user_frames: Vec<String> = (0..6).map(|i| frame(&mut words, i % 2 == 0, 2)).collect();
    let assistant_frames: Vec<String> = (0..4).map(|_| frame(&mut words, false, 2)).collect();
    // Follow-ups that name no subject (runs only, after the topic's first turn).
    let bare_follow_ups: Vec<String> = (0..2).map(|_| frame(&mut words, true, 0)).collect();
    let phrasing = Phrasing { user_frames, assistant_frames, bare_follow_ups };
    (0..sessions)
        .map(|_| {
            let subjects: Vec<Vec<String>> = (0..TOPICS)
                .map(|_| (0..SUBJECTS_PER_TOPIC).map(|_| words.phrase_up_to(1, 2)).collect())
                .collect();
            conversation(&phrasing, &subjects, layout)
        })
        .collect()
}

/// The frames a person asks, answers and follows up with.
struct Phrasing {
    user_frames: Vec<String>,
    assistant_frames: Vec<String>,
    bare_follow_ups: Vec<String>,
}

fn conversation(phrasing: &Phrasing, subjects: &[Vec<String>], layout: Layout) -> Vec<Turn> {
    let Phrasing { user_frames, assistant_frames, bare_follow_ups } = phrasing;
    let turn = |topic: usize, k: usize, follow_up: bool| {
        let s = &subjects[topic];
        let (ia, ib, ic) = (k % 12, (k * 5 + 3) % 12, (k * 7 + 5) % 12);
        let (a, b, c) = (&s[ia], &s[ib], &s[ic]);
        let fill = |f: &str, x: &str, y: &str| f.replace("{a}", x).replace("{b}", y);
        let user = if follow_up {
            bare_follow_ups[k % 2].clone()
        } else {
            fill(&user_frames[(k + topic) % user_frames.len()], a, b)
        };
        let assistant = fill(&assistant_frames[(k * 7 + topic) / 2 % assistant_frames.len()], b, c);
        // §3.3: on a switch a CJK subject is found by its 4-character windows only.
        let asked = if follow_up { vec![] } else { vec![ia, ib] };
        let asked = asked.into_iter().filter(|&i| s[i].chars().count() >= 4).collect();
        // A follow-up's user text names no subject: the turn holds the reply's two.
        let holds = if follow_up { vec![ib, ic] } else { vec![ia, ib, ic] };
        Turn { topic, user, assistant, asked, holds, bare: follow_up }
    };
    match layout {
        Layout::RoundRobin => (0..TURNS_PER_TOPIC)
            .flat_map(|k| (0..TOPICS).map(move |t| (t, k)))
            .map(|(t, k)| turn(t, k, false))
            .collect(),
        Layout::Runs => (0..TOPICS)
            .flat_map(|t| (0..TURNS_PER_TOPIC).map(move |k| (t, k)))
            .map(|(t, k)| turn(t, k, k > 0 && k % 6 == 5))
            .collect(),
    }
}

/// What one run of the 100 rounds saw.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// Rounds asked (every turn after the first).
    pub rounds: usize,
    /// Blocks selected in all.
    pub blocks: usize,
    /// Rounds given at least one block.
    pub rounds_with_blocks: usize,
    /// Rounds whose query names a subject (a content word) an earlier turn of its topic holds.
    pub answerable: usize,
    /// Of those, the rounds that selected no turn of their topic.
    pub unanswered: usize,
    /// Blocks of another topic, for queries that name a subject.
    pub cross_topic: usize,
    /// The first of them, described.
    pub first_cross: Option<String>,
    /// The rounds that got a block of another topic (either kind).
    pub cross_rounds: Vec<usize>,
    /// Blocks of another topic selected for a follow-up made of phrasing alone.
    pub bare_cross_topic: usize,
    /// Follow-ups made of phrasing alone.
    pub bare_rounds: usize,
}

impl Seen {
    /// Adds another run's counts.
    pub fn add(&mut self, other: &Seen) {
        self.rounds += other.rounds;
        self.blocks += other.blocks;
        self.rounds_with_blocks += other.rounds_with_blocks;
        self.answerable += other.answerable;
        self.unanswered += other.unanswered;
        self.cross_topic += other.cross_topic;
        self.bare_cross_topic += other.bare_cross_topic;
        self.bare_rounds += other.bare_rounds;
        self.cross_rounds.extend_from_slice(&other.cross_rounds);
        if self.first_cross.is_none() {
            self.first_cross.clone_from(&other.first_cross);
        }
    }
}

/// Runs one case in a fresh index under a temporary directory.
pub fn run(case: &Case) -> Result<Seen, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let earlier = match case.phase {
        Phase::Early => 0,
        Phase::Late => EARLIER_SESSIONS,
    };
    // Late, the index already holds the person's earlier conversations: which words are their
    // phrasing is in there, and nowhere in the code.
    let mut all = conversations(case.script, case.layout, case.seed, earlier + 1);
    let turns = all.pop().expect("the conversation under test");
    for (n, earlier) in all.iter().enumerate() {
        let session = gk.session(&format!("earlier-{n}"))?;
        for turn in earlier {
            session.add_turn(&turn.user, &turn.assistant)?;
        }
    }
    let session = gk.session("generated")?;
    let options =
        SelectOptions { budget: Some(case.budget), policy: Some(case.policy), ..Default::default() };
    let mut seen = Seen::default();
    for (i, turn) in turns.iter().enumerate() {
        if i > 0 {
            let selection = session.select_with(&turn.user, &options)?;
            if selection.blocks.iter().any(|b| turns[b.turn_id as usize].topic != turn.topic) {
                seen.cross_rounds.push(i);
            }
            for block in &selection.blocks {
                let from = turns[block.turn_id as usize].topic;
                if from != turn.topic && turn.bare {
                    seen.bare_cross_topic += 1;
                } else if from != turn.topic {
                    seen.cross_topic += 1;
                    seen.first_cross.get_or_insert_with(|| {
                        format!(
                            "round {i}: query {:?} (topic {}, {:?}) selected turn {} of topic {from}: {:?} covering {:?}",
                            turn.user,
                            turn.topic,
                            selection.decision.topic,
                            block.turn_id,
                            turns[block.turn_id as usize].user,
                            block.covered_anchors
                        )
                    });
                }
            }
            let answerable = turns[..i]
                .iter()
                .any(|t| t.topic == turn.topic && t.holds.iter().any(|s| turn.asked.contains(s)));
            if answerable {
                seen.answerable += 1;
                let own = selection.blocks.iter().any(|b| turns[b.turn_id as usize].topic == turn.topic);
                seen.unanswered += usize::from(!own);
            }
            seen.rounds += 1;
            seen.bare_rounds += usize::from(turn.bare);
            seen.blocks += selection.blocks.len();
            seen.rounds_with_blocks += usize::from(!selection.blocks.is_empty());
        }
        session.add_turn(&turn.user, &turn.assistant)?;
    }
    Ok(seen)
}
