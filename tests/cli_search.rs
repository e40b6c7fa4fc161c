//! `ctxgate search` through the real binary: which conversation discussed something, across
//! every session, folded and pending turns alike.

mod common;

use common::{TOPICS, TestEnv, TestResult};
use serde::Deserialize;

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct SearchDoc {
    query: String,
    hits: Vec<Hit>,
    schema_version: u32,
}

#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct Hit {
    session: String,
    turn_id: u32,
    score: f64,
    matched_anchors: Vec<String>,
    user: String,
    assistant: String,
    bears: bool,
}

/// Three sessions, each holding one of [`TOPICS`] among filler turns.
fn history(env: &TestEnv) -> TestResult {
    for (s, (user, assistant)) in TOPICS.iter().enumerate() {
        let session = format!("project-{s}");
        env.add(&session, "Good morning, what should we look at today?", "Whatever is most urgent for you.")?;
        env.add(&session, user, assistant)?;
        env.add(&session, "Thanks, that helps.", "Glad to help.")?;
    }
    Ok(())
}

fn search(env: &TestEnv, args: &[&str]) -> TestResult<SearchDoc> {
    let mut all = vec!["--json", "search"];
    all.extend_from_slice(args);
    env.run(all)?.ok()?.json()
}

#[test]
fn search_finds_the_session_and_turn_that_discussed_the_query() -> TestResult {
    let env = TestEnv::new()?;
    history(&env)?;
    for (query, session) in [
        ("postgres vacuum dead tuples", "project-2"),
        ("redis lock TTL", "project-0"),
        ("ingress 502", "project-1"),
    ] {
        let doc = search(&env, &[query])?;
        assert_eq!(doc.query, query);
        let first = doc.hits.first().ok_or(format!("{query:?} finds nothing"))?;
        assert_eq!((first.session.as_str(), first.turn_id), (session, 1), "{query:?}: {doc:#?}");
        assert!(!first.matched_anchors.is_empty(), "{first:#?}");
        assert!(first.bears, "the turn that discussed it bears on it: {first:#?}");
        let (user, assistant) = TOPICS[session.trim_start_matches("project-").parse::<usize>()?];
        assert!(
            user.contains(first.user.as_str()) && assistant.contains(first.assistant.as_str()),
            "{first:#?}"
        );
        assert!(doc.hits.windows(2).all(|w| w[0].score >= w[1].score), "hits come best first: {doc:#?}");
    }
    Ok(())
}

#[test]
fn search_answers_alike_before_and_after_the_turns_are_folded() -> TestResult {
    let env = TestEnv::new()?;
    history(&env)?;
    // Added one at a time, the turns are pending; `compact` folds them into postings.
    assert!(env.stats()?.pending_turns > 0, "the turns start pending");
    let queries = ["postgres vacuum orders table", "certificate rotation", "lock worker"];
    let before: Vec<SearchDoc> = queries.iter().map(|q| search(&env, &[q])).collect::<TestResult<_>>()?;
    env.run(["compact"])?.ok()?;
    assert_eq!(env.stats()?.pending_turns, 0, "compact folds every turn");
    let after: Vec<SearchDoc> = queries.iter().map(|q| search(&env, &[q])).collect::<TestResult<_>>()?;
    assert_eq!(before, after);
    Ok(())
}

#[test]
fn search_limit_and_no_match() -> TestResult {
    let env = TestEnv::new()?;
    history(&env)?;
    let urgent = search(&env, &["urgent"])?;
    assert!(urgent.hits.len() == 3, "a word of every session matches three turns");
    // The same line in every session, once each: it bears on nothing.
    assert!(urgent.hits.iter().all(|h| !h.bears), "{urgent:?}");
    assert_eq!(search(&env, &["--limit", "1", "urgent"])?.hits.len(), 1);
    assert!(search(&env, &["zebra quokka"])?.hits.is_empty());
    let text = env.run(["search", "zebra quokka"])?.ok()?;
    assert_eq!(text.stdout, "no turn matches\n");
    let text = env.run(["search", "postgres vacuum"])?.ok()?;
    assert!(text.stdout.starts_with("── project-2 · turn 1 · score "), "{}", text.stdout);
    assert!(text.stdout.contains("user: Postgres vacuum"), "{}", text.stdout);
    let empty = env.run(["search", "  "])?;
    assert_ne!(empty.code, Some(0), "an empty query is refused");
    assert!(empty.stderr.contains("query"), "{}", empty.stderr);
    Ok(())
}

/// Two ticket turns whose identifiers share their parts: under rules that split `ticket-4242`
/// the `host-4242 ticket-6406` turn, shorter and repeating both parts, ranked first.
const TICKETS: &str = r#"{"session":"ops","user":"Good morning, the on-call rotation starts today.","assistant":"Noted, I will keep the pager handy."}
{"session":"ops","user":"Please look at ticket-4242 when you have a minute: the nightly schema migration on the staging database fails halfway through with a lock timeout.","assistant":"The migration waits on a long-running analytics query; run it after the query finishes or raise the lock timeout for that session."}
{"session":"ops","user":"host-4242 pages for ticket-6406 again.","assistant":"host-4242 is out of disk; ticket-6406 tracks it."}
{"session":"ops","user":"Thanks, that is all for now.","assistant":"Glad to help."}
"#;

/// The turn of [`TICKETS`] that holds `ticket-4242`, and the one that holds only its parts.
const TICKET_TURN: u32 = 1;
const PARTS_TURN: u32 = 2;

#[test]
fn a_hyphenated_identifier_ranks_the_turn_that_holds_it_first() -> TestResult {
    let env = TestEnv::new()?;
    let log = env.dir.path().join("tickets.jsonl");
    std::fs::write(&log, TICKETS)?;
    env.run([std::ffi::OsStr::new("import"), log.as_os_str()])?.ok()?;
    for query in ["ticket-4242", "\"ticket-4242\""] {
        let doc = search(&env, &[query])?;
        let [first, second, ..] = doc.hits.as_slice() else {
            return Err(format!("{query:?} finds fewer than two turns: {doc:#?}").into());
        };
        assert_eq!((first.turn_id, second.turn_id), (TICKET_TURN, PARTS_TURN), "{query:?}: {doc:#?}");
        assert!(first.score > second.score, "{query:?} scores the identifier's turn higher: {doc:#?}");
        assert!(first.matched_anchors.iter().any(|a| a == "ticket-4242"), "{first:#?}");
        assert!(!second.matched_anchors.iter().any(|a| a == "ticket-4242"), "{second:#?}");
        for policy in ["minimal", "fill"] {
            let selected = env.select("ops", &["--policy", policy], query)?;
            selected.check_invariants()?;
            let best = selected
                .blocks
                .iter()
                .max_by(|a, b| a.score.total_cmp(&b.score))
                .ok_or(format!("{query:?} ({policy}) selects nothing: {selected:#?}"))?;
            assert_eq!(best.turn_id, TICKET_TURN, "{query:?} ({policy}): {selected:#?}");
            assert!(
                selected.blocks.iter().all(|b| b.turn_id == TICKET_TURN || b.score < best.score),
                "{query:?} ({policy}): {selected:#?}"
            );
        }
    }
    Ok(())
}
