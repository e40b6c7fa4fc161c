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
    assert!(search(&env, &["urgent"])?.hits.len() == 3, "a word of every session matches three turns");
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
