//! The bulk import path (anchors folded straight into the postings, no `pending` rows) builds
//! the same index as adding the turns one at a time: the same stored turns and recorded gate
//! decisions, the same answers, and `verify` finds nothing wrong.

use ctxgate::{Gatekeeper, ImportOptions, Options};
use std::path::Path;

type TestResult = Result<(), Box<dyn std::error::Error>>;

const SESSIONS: u32 = 3;
const TURNS: u64 = 360;

fn open(path: &Path) -> Result<Gatekeeper, ctxgate::Error> {
    Gatekeeper::open(path, Options::default())
}

fn lines(turns: &[corpus::PlacedTurn]) -> String {
    turns
        .iter()
        .map(|t| {
            let session = corpus::session_name(t.session);
            let line = serde_json::json!({
                "session": session,
                "user": t.content.user,
                "assistant": t.content.assistant,
            });
            line.to_string() + "\n"
        })
        .collect()
}

#[test]
fn bulk_import_builds_the_index_add_turn_builds() -> TestResult {
    let dir = tempfile::tempdir()?;
    let turns: Vec<corpus::PlacedTurn> = corpus::Corpus::new(7).spread(TURNS, SESSIONS).collect();

    // Imported in two steps: the first part of every session, then the whole file again, so
    // the second import appends to posting lists that already have chunks.
    let imported = open(&dir.path().join("imported.redb"))?;
    let log = dir.path().join("log.jsonl");
    let (first, rest): (Vec<corpus::PlacedTurn>, Vec<corpus::PlacedTurn>) =
        turns.iter().cloned().partition(|t| u64::from(t.turn) < TURNS / u64::from(SESSIONS) / 3);
    std::fs::write(&log, lines(&first))?;
    assert_eq!(
        imported.import(std::slice::from_ref(&log), &ImportOptions::default())?.new_turns,
        first.len() as u64
    );
    std::fs::write(&log, lines(&turns))?;
    let report = imported.import(&[log], &ImportOptions::default())?;
    assert_eq!(report.new_turns, TURNS - first.len() as u64);

    // The same turns added one at a time, in the order the imports added them (IDF, and so
    // the gate, depends on what the index held at each turn).
    let added = open(&dir.path().join("added.redb"))?;
    for t in first.iter().chain(&rest) {
        added.session(&corpus::session_name(t.session))?.add_turn(&t.content.user, &t.content.assistant)?;
    }

    for s in 0..SESSIONS {
        let name = corpus::session_name(s);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        added.session(&name)?.for_each_turn(|t| {
            a.push(t);
            Ok(())
        })?;
        imported.session(&name)?.for_each_turn(|t| {
            b.push(t);
            Ok(())
        })?;
        assert_eq!(a.len(), b.len(), "{name}");
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{name} turn {}: text and recorded gate decision", x.turn_id);
        }
        let switches = a.iter().filter(|t| t.gate.topic == ctxgate::Topic::Switch).count();
        assert!(switches > 0 && switches < a.len(), "{name}: the gate decided both ways ({switches})");
        for query in
            ["分布式锁怎么续期？", "how do I fix the redis timeout", "这个怎么配置", "tokio spawn lifetime"]
        {
            assert_eq!(
                added.session(&name)?.select(query)?,
                imported.session(&name)?.select(query)?,
                "{name}: {query:?}"
            );
        }
    }
    let (sa, sb) = (added.stats()?, imported.stats()?);
    assert_eq!(
        (sa.sessions, sa.turns, sa.anchors, sa.postings),
        (sb.sessions, sb.turns, sb.anchors, sb.postings)
    );
    assert_eq!(sb.pending_turns, 0, "an import leaves nothing pending");
    let (va, vb) = (added.verify()?, imported.verify()?);
    assert!(va.is_ok(), "{va:?}");
    assert!(vb.is_ok(), "{vb:?}");
    Ok(())
}
