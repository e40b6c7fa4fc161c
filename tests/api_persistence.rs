//! The library on a real index file: persistence, folding, determinism, concurrency guards.

mod common;

use ctxgate::{Error, Gatekeeper, Options, SelectOptions, Selection};
use std::path::Path;
use std::time::{Duration, Instant};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A 300-turn conversation over three topics, deterministic.
fn turns() -> Vec<(String, String)> {
    let topics = [
        ("redis", &["setnx", "ttl", "lease", "redlock", "watchdog", "sentinel"][..]),
        ("postgres", &["btree", "vacuum", "planner", "explain", "bloat", "gin"][..]),
        ("kubernetes", &["pod", "helm", "ingress", "rollout", "probe", "replica"][..]),
    ];
    (0..300)
        .map(|i| {
            let (name, words) = topics[(i / 7) % 3];
            let (a, b) = (words[i % 6], words[(i * 5 + 1) % 6]);
            (
                format!("Turn {i}: how does the {name} {a} interact with {b}? 第{i}轮 {name}问题"),
                format!("For {name}, {a} depends on {b}. Check the {a} settings first. {b} comes next."),
            )
        })
        .collect()
}

fn build(path: &Path, options: Options, count: usize) -> Result<Gatekeeper, Box<dyn std::error::Error>> {
    let gk = Gatekeeper::open(path, options)?;
    let session = gk.session("main")?;
    for (user, assistant) in turns().into_iter().take(count) {
        session.add_turn(&user, &assistant)?;
    }
    Ok(gk)
}

const QUERIES: &[&str] = &[
    "redis setnx lease expired",
    "postgres vacuum bloat after explain",
    "helm rollout of the ingress",
    "第42轮 redis问题",
    "this one again",
];

fn answers(gk: &Gatekeeper, as_of: Option<u32>) -> Result<Vec<Selection>, ctxgate::Error> {
    let session = gk.session("main")?;
    QUERIES.iter().map(|q| session.select_with(q, &SelectOptions { as_of, ..Default::default() })).collect()
}

#[test]
fn reopen_gives_identical_answers() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    let before = {
        let gk = build(&path, Options::default(), 200)?;
        answers(&gk, None)?
    };
    let gk = Gatekeeper::open(&path, Options::default())?;
    assert_eq!(answers(&gk, None)?, before);
    assert!(before.iter().any(|s| !s.blocks.is_empty()), "the queries must select something");
    Ok(())
}

#[test]
fn folding_does_not_change_answers() -> TestResult {
    let dir = tempfile::tempdir()?;
    // 200 turns: the first 128 are folded, 72 are pending.
    let gk = build(&dir.path().join("index.redb"), Options::default(), 200)?;
    let pending = gk.stats()?.pending_turns;
    assert!(pending > 0 && pending < 128, "pending {pending}");
    let unfolded: Vec<_> =
        [None, Some(150), Some(100)].iter().map(|&a| answers(&gk, a)).collect::<Result<_, _>>()?;
    gk.fold_pending()?;
    assert_eq!(gk.stats()?.pending_turns, 0);
    let folded: Vec<_> =
        [None, Some(150), Some(100)].iter().map(|&a| answers(&gk, a)).collect::<Result<_, _>>()?;
    assert_eq!(folded, unfolded, "answers must not depend on whether postings are folded");
    Ok(())
}

#[test]
fn as_of_replays_history() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = build(&dir.path().join("index.redb"), Options::default(), 150)?;
    let session = gk.session("main")?;
    let replay =
        session.select_with("redis setnx lease", &SelectOptions { as_of: Some(60), ..Default::default() })?;
    assert!(!replay.blocks.is_empty());
    assert!(replay.blocks.iter().all(|b| b.turn_id < 60), "{replay:#?}");
    assert!(matches!(
        session.select_with("x", &SelectOptions { as_of: Some(151), ..Default::default() }),
        Err(Error::InvalidInput { .. })
    ));
    Ok(())
}

#[test]
fn idf_follows_adds_after_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    {
        let gk = Gatekeeper::open(&path, Options::default())?;
        let s = gk.session("s")?;
        s.add_turn("zebra crossing", "zebra stripes")?;
        s.add_turn("horse riding", "saddle")?;
    }
    let gk = Gatekeeper::open(&path, Options::default())?;
    let s = gk.session("s")?;
    let idf = |sel: &Selection, text: &str| sel.anchors.iter().find(|a| a.text == text).map(|a| a.idf);
    // N = 2, df(zebra) = 1
    let sel = s.select("zebra")?;
    assert_eq!(idf(&sel, "zebra"), Some((3f64 / 2f64).ln() + 1.0));
    s.add_turn("zebra again", "yes")?;
    // N = 3, df(zebra) = 2
    let sel = s.select("zebra")?;
    assert_eq!(idf(&sel, "zebra"), Some((4f64 / 3f64).ln() + 1.0));
    assert_eq!(gk.stats()?.turns, 3);
    assert_eq!(gk.sessions()?[0].turns, 3);
    Ok(())
}

#[test]
fn one_thread_equals_many() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    let single = {
        let gk = build(&path, Options { threads: 1, ..Options::default() }, 250)?;
        answers(&gk, None)?
    };
    let gk = Gatekeeper::open(&path, Options { threads: 4, ..Options::default() })?;
    assert_eq!(answers(&gk, None)?, single);
    Ok(())
}

#[test]
fn a_write_waits_for_another_writer_then_is_busy_and_reads_never_wait() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("index.redb");
    let writer = build(&path, Options::default(), 4)?;
    let impatient = || Options { busy_timeout: Duration::from_millis(300), ..Options::default() };
    let impatient_writer = Gatekeeper::open(&path, impatient())?;
    let held = common::WriteHold::begin(&path)?;
    // A read goes on beside the other writer's transaction, from the last commit. One that
    // waited for the writer would end busy (the hold outlasts its timeout); one that waited
    // part of the time is told apart by half of it, however loaded the machine is.
    let started = Instant::now();
    let reader = Gatekeeper::open_read_only(&path, Options::default())?;
    assert_eq!(reader.stats()?.turns, 4);
    assert!(!reader.session("main")?.select("redis setnx lease")?.blocks.is_empty());
    let bound = Options::default().busy_timeout / 2;
    assert!(started.elapsed() < bound, "a read waited {:?}", started.elapsed());
    // A write waits for the other writer, up to the busy timeout: opening for writing too.
    for attempt in 0..2 {
        let started = Instant::now();
        let err = match attempt {
            0 => impatient_writer.session("main")?.add_turn("one more", "reply").err(),
            _ => Gatekeeper::open(&path, impatient()).err(),
        };
        let err = err.ok_or("a write while another writer holds the lock")?;
        assert_eq!(err.kind(), "busy", "{err}");
        assert!(started.elapsed() >= Duration::from_millis(300), "gave up after {:?}", started.elapsed());
        // Well under the 5 s a wait that ignored the timeout would take.
        assert!(started.elapsed() < Duration::from_millis(4500), "waited {:?}", started.elapsed());
        assert!(err.to_string().contains("--busy-timeout"), "{err}");
    }
    drop(held);
    // The waits given up above take the lock once when it is freed, and let it go: a write
    // with the default timeout gets it after them.
    writer.session("main")?.add_turn("one more", "reply")?;
    assert_eq!(reader.stats()?.turns, 5, "a reader sees the next commit");
    Ok(())
}

#[test]
fn bad_input_leaves_the_index_as_it_was() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = build(&dir.path().join("index.redb"), Options::default(), 10)?;
    let before = (gk.stats()?, answers(&gk, None)?);
    let s = gk.session("main")?;
    assert!(matches!(s.add_turn("  ", "\n"), Err(Error::InvalidInput { .. })));
    let huge = "x".repeat(ctxgate::MAX_TEXT_BYTES + 1);
    assert!(matches!(s.add_turn(&huge, "ok"), Err(Error::InvalidInput { .. })));
    assert!(matches!(s.select(" \t "), Err(Error::InvalidInput { .. })));
    for name in ["", " lead", "trail ", "bell\u{7}", &"n".repeat(300)] {
        assert!(matches!(gk.session(name), Err(Error::InvalidInput { .. })), "{name:?}");
    }
    assert!(matches!(gk.session("nobody")?.select("redis"), Err(Error::UnknownSession { .. })));
    assert_eq!((gk.stats()?, answers(&gk, None)?), before);
    Ok(())
}

#[test]
fn long_and_odd_turns_are_stored_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let s = gk.session("odd")?;
    let long = "The flux capacitor overheats. ".repeat(35_000); // ~1 MB
    assert_eq!(s.add_turn(&long, "Cool it down.")?, 0);
    assert_eq!(s.add_turn("ctrl \u{1b}[31m red \u{0} nul", "emoji 🦀 and 中文")?, 1);
    let sel =
        s.select_with("flux capacitor", &SelectOptions { budget: Some(100_000), ..Default::default() })?;
    assert_eq!(sel.blocks.len(), 1);
    assert!(
        sel.blocks[0].user.len() < 200,
        "pruned to at most three sentences: {}",
        sel.blocks[0].user.len()
    );
    assert!(sel.budget.used <= sel.budget.limit);
    Ok(())
}

#[test]
fn options_are_validated() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.redb");
    let err = Gatekeeper::open(&path, Options { token_budget: 0, ..Options::default() }).err().unwrap();
    assert_eq!(err.kind(), "invalid_option");
    let err = Gatekeeper::open(&path, Options { cache_bytes: 10, ..Options::default() }).err().unwrap();
    assert_eq!(err.kind(), "invalid_option");
    assert!(!path.exists(), "a rejected open must not create the file");
}

#[test]
fn the_recorded_gate_decision_is_what_gate_said_before_the_add() -> TestResult {
    // In the agent loop the gate is asked about the next message, then the turn is added: the
    // decision stored with the turn (computed from hashed anchors) must be the same to the bit.
    let dir = tempfile::tempdir()?;
    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
    let session = gk.session("main")?;
    let mut switches = 0;
    for (i, (user, assistant)) in turns().iter().enumerate().take(180) {
        let asked = if i == 0 { None } else { Some(session.gate(user, None)?) };
        let id = session.add_turn(user, assistant)?;
        let recorded = session.turn(id)?.ok_or("stored turn")?.gate;
        if let Some(asked) = asked {
            assert_eq!(recorded.topic, asked.topic, "turn {i}: {user:?}");
            assert_eq!(recorded.overlap, asked.overlap as f32, "turn {i}");
            assert_eq!(recorded.new_ratio, asked.new_ratio as f32, "turn {i}");
            assert_eq!(recorded.deictic.as_deref(), asked.deictic, "turn {i}");
        }
        switches += usize::from(recorded.topic == ctxgate::Topic::Switch);
    }
    assert!(switches > 1 && switches < 180, "the conversation must exercise both decisions: {switches}");
    Ok(())
}

#[test]
fn a_reply_to_a_question_continues_alike_when_added_imported_and_replayed() -> TestResult {
    use ctxgate::gate::REPLY_TO_QUESTION;
    use ctxgate::{ImportOptions, Topic};
    // Turn 1 answers turn 0's question with none of its words; turn 2 opens a new topic after
    // an open offer ("anything else?"), which ties nothing.
    let conversation = [
        (
            "I need a hotel in the north with free parking",
            "The Acorn Guest House fits. Would you like me to book a room?",
        ),
        (
            "Yes please, for 5 people and 4 nights starting Friday",
            "Booked, reference 7GAWK763. Is there anything else I can help you with?",
        ),
        ("I also need a train to Cambridge on Monday", "TR1234 leaves at 9:15 and arrives at 10:05."),
    ];
    let expected = [(Topic::Continue, Some(REPLY_TO_QUESTION)), (Topic::Switch, None)];

    let dir = tempfile::tempdir()?;
    let added = Gatekeeper::open(dir.path().join("added.redb"), Options::default())?;
    let session = added.session("trip")?;
    for (i, (user, assistant)) in conversation.iter().enumerate() {
        let asked = (i > 0).then(|| session.gate(user, None)).transpose()?;
        let id = session.add_turn(user, assistant)?;
        let Some(asked) = asked else { continue };
        assert_eq!((asked.topic, asked.deictic), expected[i - 1], "turn {i}: {user:?}");
        let recorded = session.turn(id)?.ok_or("stored turn")?.gate;
        assert_eq!((recorded.topic, recorded.deictic.as_deref()), expected[i - 1], "stored turn {i}");
        let replayed = session.gate(user, Some(id))?;
        assert_eq!((replayed.topic, replayed.deictic), expected[i - 1], "replayed turn {i}");
    }

    // The bulk import decides each turn inside its own write transaction: the same answers.
    let log = dir.path().join("trip.jsonl");
    let lines: Vec<String> = conversation
        .iter()
        .map(|(user, assistant)| {
            serde_json::json!({"session": "trip", "user": user, "assistant": assistant}).to_string()
        })
        .collect();
    std::fs::write(&log, lines.join("\n") + "\n")?;
    let imported = Gatekeeper::open(dir.path().join("imported.redb"), Options::default())?;
    imported.import(&[log], &ImportOptions::default())?;
    for id in 1..3u32 {
        let gate = imported.session("trip")?.turn(id)?.ok_or("imported turn")?.gate;
        assert_eq!((gate.topic, gate.deictic.as_deref()), expected[id as usize - 1], "imported turn {id}");
    }
    Ok(())
}
