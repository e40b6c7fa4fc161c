//! Import rules that hold for every format, checked on real files and a real index:
//! incremental growth, conflicts, atomicity on bad input, the export round trip.

use ctxgate::{Format, Gatekeeper, ImportOptions, Options};
use std::path::{Path, PathBuf};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn open(dir: &Path) -> Result<Gatekeeper, ctxgate::Error> {
    Gatekeeper::open(dir.join("index.redb"), Options::default())
}

fn line(session: &str, user: &str, assistant: &str) -> String {
    serde_json::json!({ "session": session, "user": user, "assistant": assistant }).to_string() + "\n"
}

fn import(gk: &Gatekeeper, path: &Path) -> Result<ctxgate::ImportReport, ctxgate::Error> {
    gk.import(&[path.to_path_buf()], &ImportOptions::default())
}

/// Every stored turn of every session, as text.
fn dump(gk: &Gatekeeper) -> Result<Vec<(String, u32, String, String)>, ctxgate::Error> {
    let mut out = Vec::new();
    for info in gk.sessions()? {
        gk.session(&info.name)?.for_each_turn(|t| {
            out.push((info.name.clone(), t.turn_id, t.user, t.assistant));
            Ok(())
        })?;
    }
    Ok(out)
}

#[test]
fn a_grown_log_adds_only_its_new_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, line("a", "first question", "first answer") + &line("a", "second", "reply"))?;
    assert_eq!(import(&gk, &log)?.new_turns, 2);
    let again = import(&gk, &log)?;
    assert_eq!((again.new_turns, again.existing_turns), (0, 2), "re-import adds nothing");

    let mut grown = std::fs::read_to_string(&log)?;
    grown += &line("a", "third", "more");
    grown += &line("b", "other session", "ok");
    std::fs::write(&log, grown)?;
    let report = import(&gk, &log)?;
    assert_eq!((report.new_turns, report.existing_turns), (2, 2));
    let sessions: Vec<_> = report.files[0]
        .sessions
        .iter()
        .map(|s| (s.session.as_str(), s.new_turns, s.existing_turns))
        .collect();
    assert_eq!(sessions, [("a", 1, 2), ("b", 1, 0)]);
    assert_eq!(gk.session("a")?.turn(2)?.map(|t| t.user), Some("third".into()));
    assert_eq!(gk.stats()?.turns, 4);
    Ok(())
}

#[test]
fn a_changed_log_is_refused_and_changes_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let log = dir.path().join("log.jsonl");
    std::fs::write(&log, line("a", "first question", "first answer") + &line("a", "second", "reply"))?;
    import(&gk, &log)?;
    std::fs::write(
        &log,
        line("a", "first question", "EDITED answer")
            + &line("a", "second", "reply")
            + &line("a", "third", "x"),
    )?;
    let before = dump(&gk)?;
    let err = import(&gk, &log).err().ok_or("an edited history must be refused")?;
    assert_eq!(err.kind(), "conflict", "{err}");
    assert!(err.to_string().contains("turn 0"), "{err}");
    assert_eq!(dump(&gk)?, before);
    // Imported under another name, it is a new session.
    let other = gk.import(
        std::slice::from_ref(&log),
        &ImportOptions { session: Some("a-edited".into()), ..Default::default() },
    )?;
    assert_eq!(other.new_turns, 3);
    Ok(())
}

#[test]
fn a_bad_last_line_leaves_the_index_as_queries_saw_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let good = dir.path().join("good.jsonl");
    std::fs::write(&good, line("s", "how do I rotate the redis password", "use CONFIG SET requirepass"))?;
    import(&gk, &good)?;
    let answer = || gk.session("s").and_then(|s| s.select("redis password rotation"));
    let (stats, selection, turns) = (gk.stats()?, answer()?, dump(&gk)?);

    let bad = dir.path().join("bad.jsonl");
    let mut text = String::new();
    for i in 0..50 {
        text += &line("t", &format!("redis password question {i}"), "answer");
    }
    text += "{\"session\": \"t\", \"user\": \"no assistant\"}\n";
    std::fs::write(&bad, text)?;
    let err = import(&gk, &bad).err().ok_or("the bad line must fail the file")?;
    assert_eq!(err.to_string(), format!("{}:51: missing `assistant`", bad.display()));
    assert_eq!((gk.stats()?, answer()?, dump(&gk)?), (stats, selection, turns));

    let skipped = gk.import(&[bad], &ImportOptions { skip_invalid: true, ..Default::default() })?;
    assert_eq!((skipped.new_turns, skipped.skipped), (50, 1));
    assert_eq!(skipped.files[0].skipped[0].line, 51);
    Ok(())
}

#[test]
fn export_then_import_is_identical() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let s = gk.session("round trip")?;
    s.add_turn("中文问题：分布式锁怎么续期？🦀", "用看门狗。\n第二行\t制表符")?;
    s.add_turn("control \u{1b}[31m chars \u{0} and \u{7f}", "")?;
    s.add_turn("", "assistant only ✓")?;
    s.add_turn("quotes \"inside\" and \\ backslash", "emoji 👩‍💻 zwj")?;
    let out = dir.path().join("export.jsonl");
    let mut text = String::new();
    s.for_each_turn(|t| {
        text += &serde_json::to_string(&t.to_canonical("round trip")).expect("serializable");
        text.push('\n');
        Ok(())
    })?;
    std::fs::write(&out, &text)?;

    let other = tempfile::tempdir()?;
    let gk2 = open(other.path())?;
    let report = import(&gk2, &out)?;
    assert_eq!(report.files[0].format, Format::Jsonl);
    assert_eq!(dump(&gk2)?, dump(&gk)?);
    Ok(())
}

#[test]
fn directories_are_walked_and_session_can_be_forced() -> TestResult {
    let dir = tempfile::tempdir()?;
    let logs = dir.path().join("logs/nested");
    std::fs::create_dir_all(&logs)?;
    std::fs::write(logs.join("one.jsonl"), line("x", "alpha", "beta"))?;
    std::fs::write(dir.path().join("logs/two.jsonl"), line("y", "gamma", "delta"))?;
    std::fs::write(dir.path().join("logs/readme.txt"), "not a log")?;
    let gk = open(dir.path())?;
    let report = gk.import(
        &[dir.path().join("logs")],
        &ImportOptions { session: Some("all".into()), ..Default::default() },
    )?;
    let files: Vec<PathBuf> = report.files.iter().map(|f| f.path.clone()).collect();
    assert_eq!(files, [logs.join("one.jsonl"), dir.path().join("logs/two.jsonl")]);
    let names: Vec<String> = gk.sessions()?.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["all"]);
    assert_eq!(gk.session("all")?.info()?.turns, 2);
    // The same files again: nothing new, nothing in conflict.
    let again = gk.import(
        &[dir.path().join("logs")],
        &ImportOptions { session: Some("all".into()), ..Default::default() },
    )?;
    assert_eq!((again.new_turns, again.existing_turns), (0, 2));
    Ok(())
}

#[test]
fn a_live_agent_log_holds_back_its_unanswered_turn() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let log = dir.path().join("session.jsonl");
    let record = |kind: &str, uuid: &str, content: serde_json::Value| {
        serde_json::json!({
            "type": kind, "uuid": uuid, "parentUuid": null, "sessionId": "s-1",
            "timestamp": "2025-10-01T10:00:00Z", "message": { "role": kind, "content": content }
        })
        .to_string()
            + "\n"
    };
    let mut text = record("user", "u1", "Run the tests".into());
    text += &record("assistant", "a1", serde_json::json!([{ "type": "text", "text": "All 12 pass." }]));
    text += &record("user", "u2", "Now fix the lint".into());
    text += &record(
        "assistant",
        "a2",
        serde_json::json!([{ "type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "cargo clippy"} }]),
    );
    std::fs::write(&log, &text)?;
    let first = import(&gk, &log)?;
    assert_eq!(first.files[0].format, Format::ClaudeCode);
    assert_eq!((first.new_turns, first.files[0].sessions[0].held_back), (1, 1));

    text += &record(
        "user",
        "u3",
        serde_json::json!([{ "type": "tool_result", "tool_use_id": "t1", "content": "warning: unused" }]),
    );
    text += &record(
        "assistant",
        "a3",
        serde_json::json!([{ "type": "text", "text": "Fixed the unused import." }]),
    );
    std::fs::write(&log, &text)?;
    let second = import(&gk, &log)?;
    assert_eq!((second.new_turns, second.existing_turns), (1, 1));
    let turn = gk.session("s-1")?.turn(1)?.ok_or("turn 1")?;
    assert_eq!(turn.user, "Now fix the lint");
    assert!(turn.assistant.ends_with("Fixed the unused import."), "{}", turn.assistant);
    assert_eq!(turn.tools[0].name, "Bash");
    assert_eq!(turn.tools[0].result_bytes, "warning: unused".len() as u64);
    Ok(())
}

#[test]
fn an_unreadable_or_unknown_file_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    let missing = dir.path().join("nope.jsonl");
    let err = import(&gk, &missing).err().ok_or("missing file")?;
    assert_eq!(err.kind(), "io");
    assert!(err.to_string().contains("nope.jsonl"), "{err}");
    let binary = dir.path().join("blob.jsonl");
    std::fs::write(&binary, [b'{', 0xff, 0xfe, b'}'])?;
    let err = import(&gk, &binary).err().ok_or("invalid UTF-8")?;
    assert!(err.to_string().contains("blob.jsonl:1: not valid UTF-8"), "{err}");
    Ok(())
}

#[test]
fn an_import_folds_turns_added_one_at_a_time_before_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let gk = open(dir.path())?;
    // Turns added one at a time wait, unfolded, until enough of them are pending.
    let session = gk.session("a")?;
    session.add_turn("deploy the nginx proxy", "set proxy_pass to the upstream")?;
    session.add_turn("and the certificate?", "certbot renews it")?;
    assert_eq!(gk.stats()?.pending_turns, 2);
    let log = dir.path().join("log.jsonl");
    std::fs::write(
        &log,
        line("b", "nginx certificate renewal", "certbot again") + &line("b", "proxy", "upstream"),
    )?;
    assert_eq!(import(&gk, &log)?.new_turns, 2);
    let stats = gk.stats()?;
    assert_eq!((stats.turns, stats.pending_turns), (4, 0), "the import folded every pending turn");
    let report = gk.verify()?;
    assert!(report.is_ok(), "{report:?}");
    assert_eq!(report.turns, 4);
    Ok(())
}
