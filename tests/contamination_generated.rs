//! The seed's 100-round contamination test again, with everything generated: 4 topics × 25
//! turns whose shared everyday phrasing is made of invented words, none of them in any list of
//! the code (stop words, framing words, CJK framing characters; checked). A mechanism that
//! passes here learnt which words identify nothing from the index, not from a list written
//! for the phrasing of `contamination.rs`. English-like and Chinese-like text, interleaved
//! round-robin and in runs; in runs some follow-ups name no subject at all. The index holds
//! the same person's earlier conversations (the same phrasing, other subjects) before the one
//! under test: that is where the statistics learn what phrasing is. Every round whose query
//! names a subject its topic has mentioned must select a turn of that topic, and no round may
//! select a turn of another topic: neither one whose query names a subject nor a follow-up made
//! of a frame alone (its words come back evenly all through the earlier conversations, so it
//! names nothing and follows up the latest turn).

mod common;

use common::Rng;
use ctxgate::anchor::{cjk_framing_chars, is_framing_word, is_stop_word};
use ctxgate::{Gatekeeper, Options, SelectOptions};
use std::collections::HashSet;

const TOPICS: usize = 4;
const TURNS_PER_TOPIC: usize = 25;
const SUBJECTS_PER_TOPIC: usize = 12;
/// Conversations in the index before the one under test.
const EARLIER_SESSIONS: usize = 3;

#[derive(Clone, Copy, Debug)]
enum Script {
    Latin,
    Han,
}

#[derive(Clone, Copy, Debug)]
enum Layout {
    RoundRobin,
    Runs,
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
                        .map(|_| char::from_u32(0x4E00 + self.rng.below(0x5000) as u32).unwrap())
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

    /// A phrase of `min..=max` invented words.
    fn phrase_up_to(&mut self, min: usize, max: usize) -> String {
        let n = min + self.rng.below(max - min + 1);
        let words: Vec<String> = (0..n).map(|_| self.word()).collect();
        match self.script {
            Script::Latin => words.join(" "),
            Script::Han => words.concat(),
        }
    }
}

struct Turn {
    topic: usize,
    user: String,
    assistant: String,
    /// The subjects (indices in its topic) the user's text names that are content words
    /// (DESIGN §3.3: four characters or more).
    asked: Vec<usize>,
    /// The subjects the turn holds, both sides.
    holds: Vec<usize>,
    /// A follow-up whose user text is a frame alone.
    bare: bool,
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
fn conversations(script: Script, layout: Layout, seed: u64, sessions: usize) -> Vec<Vec<Turn>> {
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

#[derive(Debug, Default)]
struct Seen {
    blocks: usize,
    rounds_with_blocks: usize,
    /// Rounds whose query names a subject (a content word) an earlier turn of its topic holds,
    /// with the default budget (a 60-token one may fit nothing).
    answerable: usize,
    /// Of those, the rounds that selected no turn of their topic.
    unanswered: usize,
    cross_topic: usize,
    first_cross: Option<String>,
    /// Blocks of another topic selected for a follow-up made of phrasing alone.
    bare_cross_topic: usize,
    /// Follow-ups made of phrasing alone.
    bare_rounds: usize,
}

fn run(script: Script, layout: Layout, seed: u64) -> Result<Seen, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    // The index already holds the person's earlier conversations: which words are their
    // phrasing is in there, and nowhere in the code.
    let mut all = conversations(script, layout, seed, EARLIER_SESSIONS + 1);
    let turns = all.pop().expect("the conversation under test");
    for (n, earlier) in all.iter().enumerate() {
        let session = gk.session(&format!("earlier-{n}"))?;
        for turn in earlier {
            session.add_turn(&turn.user, &turn.assistant)?;
        }
    }
    let session = gk.session("generated")?;
    let mut seen = Seen::default();
    for (i, turn) in turns.iter().enumerate() {
        if i > 0 {
            let budget = if i % 5 == 0 { Some(60) } else { None };
            let selection =
                session.select_with(&turn.user, &SelectOptions { budget, ..Default::default() })?;
            for block in &selection.blocks {
                let from = turns[block.turn_id as usize].topic;
                if from != turn.topic && turn.bare {
                    seen.bare_cross_topic += 1;
                } else if from != turn.topic {
                    seen.cross_topic += 1;
                    seen.first_cross.get_or_insert_with(|| {
                        format!(
                            "round {i}: query {:?} (topic {}) selected turn {} of topic {from}: {:?}",
                            turn.user, turn.topic, block.turn_id, turns[block.turn_id as usize].user
                        )
                    });
                }
            }
            let answerable = turns[..i]
                .iter()
                .any(|t| t.topic == turn.topic && t.holds.iter().any(|s| turn.asked.contains(s)));
            if answerable && budget.is_none() {
                seen.answerable += 1;
                let own = selection.blocks.iter().any(|b| turns[b.turn_id as usize].topic == turn.topic);
                seen.unanswered += usize::from(!own);
            }
            seen.bare_rounds += usize::from(turn.bare);
            seen.blocks += selection.blocks.len();
            seen.rounds_with_blocks += usize::from(!selection.blocks.is_empty());
        }
        session.add_turn(&turn.user, &turn.assistant)?;
    }
    Ok(seen)
}

fn check(script: Script, layout: Layout) -> Result<(), Box<dyn std::error::Error>> {
    for seed in [7, 1009, 65_537] {
        let seen = run(script, layout, seed)?;
        eprintln!("{script:?}/{layout:?}/seed {seed}: {seen:?}");
        assert!(seen.answerable >= 30, "too few answerable rounds to prove anything: {seen:?}");
        assert_eq!(seen.cross_topic, 0, "{script:?}/{layout:?}/seed {seed}: {seen:#?}");
        assert_eq!(seen.bare_cross_topic, 0, "{script:?}/{layout:?}/seed {seed}: {seen:#?}");
        if let Layout::Runs = layout {
            assert!(seen.bare_rounds >= 12, "too few follow-ups of a frame alone: {seen:?}");
        }
        assert_eq!(
            seen.unanswered, 0,
            "{script:?}/{layout:?}/seed {seed}: a known subject found nothing: {seen:#?}"
        );
    }
    Ok(())
}

#[test]
fn latin_round_robin() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Latin, Layout::RoundRobin)
}

#[test]
fn latin_runs() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Latin, Layout::Runs)
}

#[test]
fn han_round_robin() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Han, Layout::RoundRobin)
}

#[test]
fn han_runs() -> Result<(), Box<dyn std::error::Error>> {
    check(Script::Han, Layout::Runs)
}
