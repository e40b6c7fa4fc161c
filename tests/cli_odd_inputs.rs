//! Inputs at the edges: a `--db` that is not a regular file, `--as-of 0` and `--budget 0`; logs
//! as users have them (issue 54): bytes that are not UTF-8, a damaged first line, a malformed
//! line, a ChatGPT export without `current_node`, a Claude.ai voice note.

mod common;

use common::{TestEnv, TestResult};

#[cfg(unix)]
#[test]
fn a_fifo_db_is_not_a_regular_file() -> TestResult {
    let env = TestEnv::new()?;
    let status = std::process::Command::new("mkfifo").arg(&env.db).status()?;
    assert!(status.success(), "mkfifo failed");
    for args in [&["stats"][..], &["add", "-s", "s", "-u", "hello"]] {
        let run = env.run(args)?.expect_code(1)?;
        assert!(
            run.stderr.contains(&format!("{} is not a regular file", env.db.display())),
            "{args:?}: {}",
            run.stderr
        );
        assert!(!run.stderr.contains("os error"), "{args:?}: {}", run.stderr);
    }
    let doc = env.run(["--json", "stats"])?.expect_code(1)?.json_error()?;
    assert_eq!(doc.error.kind, "not_an_index", "{doc:#?}");
    Ok(())
}

#[test]
fn as_of_0_covers_0_percent_not_minus_0() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "SET key value NX PX 30000.")?;
    let run = env.run(["select", "-s", "s", "--as-of", "0", "--", "redis lock"])?.ok()?;
    assert!(run.stdout.contains("coverage 0%"), "{}", run.stdout);
    assert!(!run.stdout.contains("-0"), "{}", run.stdout);
    let json = env.run(["--json", "select", "-s", "s", "--as-of", "0", "--", "redis lock"])?.ok()?;
    assert!(
        json.stdout.contains("\"coverage\":0.0") || json.stdout.contains("\"coverage\": 0.0"),
        "{}",
        json.stdout
    );
    Ok(())
}

/// `--budget 0` is refused naming the flag and the range it takes, not the library's option
/// field (issue 54, finding 17).
#[test]
fn budget_0_names_the_flag_and_its_range() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "SET key value NX PX 30000.")?;
    for command in ["select", "prompt"] {
        let run = env.run([command, "-s", "s", "--budget", "0", "--", "redis lock"])?.expect_code(2)?;
        assert!(run.stderr.contains("--budget"), "{command}: {}", run.stderr);
        assert!(run.stderr.contains("0 is not in 1..="), "{command}: {}", run.stderr);
        assert!(!run.stderr.contains("token_budget"), "{command}: {}", run.stderr);
        env.run([command, "-s", "s", "--budget", "500", "--", "redis lock"])?.ok()?;
    }
    Ok(())
}

/// A canonical JSONL line.
fn canonical(session: &str, user: &str, assistant: &str) -> String {
    serde_json::json!({"session": session, "user": user, "assistant": assistant}).to_string() + "\n"
}

/// An OpenAI chat messages line.
fn openai(user: &str, assistant: &str) -> String {
    serde_json::json!({"messages": [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]})
        .to_string()
        + "\n"
}

/// A file an import read: its format, new turns and skipped lines (line, reason).
type Imported = (String, u64, Vec<(u64, String)>);

/// `import --json ARGS...`'s only file.
fn imported(env: &TestEnv, args: &[&std::ffi::OsStr]) -> TestResult<Imported> {
    let run = env.run([std::ffi::OsStr::new("--json"), "import".as_ref()].iter().chain(args))?.ok()?;
    let doc: serde_json::Value = run.json()?;
    let file = &doc["files"][0];
    let skipped = file["skipped"].as_array().ok_or("no skipped")?;
    let skipped = skipped
        .iter()
        .map(|s| {
            Ok((s["line"].as_u64().ok_or("no line")?, s["reason"].as_str().ok_or("no reason")?.to_string()))
        })
        .collect::<TestResult<Vec<_>>>()?;
    Ok((
        file["format"].as_str().ok_or("no format")?.to_string(),
        file["new_turns"].as_u64().ok_or("turns")?,
        skipped,
    ))
}

/// A line with a Latin-1 byte: without `--skip-invalid` the error names the line, the byte and
/// its offset, and says what to do; with it, the line is skipped and reported, the rest
/// imported, in the streamed canonical format and in a format read whole (issue 54, finding 13).
#[test]
fn a_line_that_is_not_utf8_is_named_and_skipped_with_skip_invalid() -> TestResult {
    for (name, lines, format) in [
        (
            "canonical.jsonl",
            [
                canonical("c", "redis lock ttl", "SET NX PX"),
                canonical("c", "caf\u{e9} au lait", "ok"),
                canonical("c", "nginx upstream", "proxy_pass"),
            ],
            "jsonl",
        ),
        (
            "openai.jsonl",
            [
                openai("redis lock ttl", "SET NX PX"),
                openai("caf\u{e9} au lait", "ok"),
                openai("nginx upstream", "proxy_pass"),
            ],
            "openai",
        ),
    ] {
        let env = TestEnv::new()?;
        let path = env.dir.path().join(name);
        let mut bytes = Vec::new();
        for line in &lines {
            // The é as one Latin-1 byte.
            bytes.extend(line.replace('\u{e9}', "\u{1}").bytes().map(|b| if b == 1 { 0xe9 } else { b }));
        }
        std::fs::write(&path, &bytes)?;
        let offset = bytes.iter().position(|&b| b == 0xe9).ok_or("no Latin-1 byte")?;

        let run = env.run(["import".as_ref(), path.as_os_str()])?.expect_code(1)?;
        let expected = format!("{}:2: not valid UTF-8: byte 0xE9 at byte offset {offset}", path.display());
        assert!(run.stderr.contains(&expected), "{name}: {}", run.stderr);
        assert!(run.stderr.contains("iconv -f latin1 -t utf-8"), "{name}: {}", run.stderr);
        assert!(run.stderr.contains("pass --skip-invalid"), "{name}: {}", run.stderr);

        let (found, turns, skipped) = imported(&env, &["--skip-invalid".as_ref(), path.as_os_str()])?;
        assert_eq!((found.as_str(), turns), (format, 2), "{name}");
        assert_eq!(skipped.len(), 1, "{name}: {skipped:?}");
        assert_eq!(skipped[0].0, 2, "{name}: {skipped:?}");
        assert!(
            skipped[0].1.starts_with(&format!("not valid UTF-8: byte 0xE9 at byte offset {offset}")),
            "{skipped:?}"
        );
    }
    Ok(())
}

/// A first line of garbage does not hide the format with `--skip-invalid`, which skips and
/// reports it; without it, the error says to pass `--skip-invalid` or `--format` (issue 54,
/// finding 14).
#[test]
fn a_garbage_first_line_is_looked_past_with_skip_invalid() -> TestResult {
    for (name, text, format) in [
        (
            "canonical.jsonl",
            canonical("c", "redis lock ttl", "SET NX PX") + &canonical("c", "nginx", "proxy_pass"),
            "jsonl",
        ),
        ("openai.jsonl", openai("redis lock ttl", "SET NX PX") + &openai("nginx", "proxy_pass"), "openai"),
    ] {
        let env = TestEnv::new()?;
        let path = env.dir.path().join(name);
        std::fs::write(&path, format!("\u{0}\u{0}garbage from a crashed writer\n\n{text}"))?;
        let run = env.run(["import".as_ref(), path.as_os_str()])?.expect_code(1)?;
        assert!(run.stderr.contains("cannot tell the log format; pass --format"), "{name}: {}", run.stderr);
        assert!(run.stderr.contains("pass --skip-invalid to look past them"), "{name}: {}", run.stderr);

        let (found, turns, skipped) = imported(&env, &["--skip-invalid".as_ref(), path.as_os_str()])?;
        assert_eq!((found.as_str(), turns), (format, 2), "{name}");
        assert_eq!(skipped.iter().map(|s| s.0).collect::<Vec<_>>(), [1], "{name}: {skipped:?}");
    }
    // A first line that is JSON of a format ctxgate does not read is no damage: not looked past.
    let env = TestEnv::new()?;
    let path = env.dir.path().join("history.jsonl");
    std::fs::write(&path, "{\"display\": \"fix it\"}\n".to_string() + &openai("redis", "lock"))?;
    env.run(["import", "--skip-invalid", path.to_str().ok_or("path")?])?.expect_code(1)?;
    Ok(())
}

/// A malformed line's error says that `--skip-invalid` skips it, alone and in a list (issue 54,
/// finding 15).
#[test]
fn a_malformed_line_error_mentions_skip_invalid() -> TestResult {
    let env = TestEnv::new()?;
    let broken = env.dir.path().join("broken.jsonl");
    std::fs::write(
        &broken,
        canonical("c", "redis lock ttl", "SET NX PX") + "{\"session\": \"c\", \"user\":\n",
    )?;
    let run = env.run(["import".as_ref(), broken.as_os_str()])?.expect_code(1)?;
    assert!(run.stderr.contains(&format!("{}:2: invalid JSON", broken.display())), "{}", run.stderr);
    assert!(
        run.stderr.contains("pass --skip-invalid to skip the records that cannot be read"),
        "{}",
        run.stderr
    );
    let doc =
        env.run(["--json".as_ref(), "import".as_ref(), broken.as_os_str()])?.expect_code(1)?.json_error()?;
    assert_eq!(doc.error.kind, "bad_log", "{doc:#?}");

    let good = env.dir.path().join("good.jsonl");
    std::fs::write(&good, canonical("g", "nginx upstream", "proxy_pass"))?;
    let run = env.run(["import".as_ref(), broken.as_os_str(), good.as_os_str()])?.expect_code(7)?;
    assert!(run.stderr.contains("or pass --skip-invalid"), "{}", run.stderr);
    // Given, the flag is not suggested again.
    let run = env.run(["import".as_ref(), "--skip-invalid".as_ref(), broken.as_os_str()])?.ok()?;
    assert!(!run.stderr.contains("--skip-invalid"), "{}", run.stderr);
    Ok(())
}

/// What `export --session` writes of a session's turns: (user, assistant) each.
fn exported(env: &TestEnv, session: &str) -> TestResult<Vec<(String, String)>> {
    let run = env.run(["export", "--session", session])?.ok()?;
    run.stdout
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line)?;
            Ok((
                v["user"].as_str().unwrap_or_default().to_string(),
                v["assistant"].as_str().unwrap_or_default().to_string(),
            ))
        })
        .collect()
}

/// A ChatGPT export with `current_node: null` (nodes linked by `parent` only) keeps the newest
/// branch, not the root alone; a Claude.ai voice note is read as its transcript (issue 54,
/// finding 18).
#[test]
fn chatgpt_without_current_node_and_claude_voice_notes_keep_their_turns() -> TestResult {
    let env = TestEnv::new()?;
    let message = |role: &str, time: f64, text: &str| {
        serde_json::json!({"author": {"role": role}, "create_time": time,
                           "content": {"content_type": "text", "parts": [text]}})
    };
    let chatgpt = serde_json::json!([{
        "id": "gpt-1", "title": "redis", "current_node": null,
        "mapping": {
            "root": {"id": "root", "parent": null, "message": null},
            "u1": {"id": "u1", "parent": "root", "message": message("user", 1.0, "how do I expire a redis lock")},
            "a1": {"id": "a1", "parent": "u1", "message": message("assistant", 2.0, "SET key value NX PX 30000")},
            "u2": {"id": "u2", "parent": "a1", "message": message("user", 3.0, "and renew it")},
            "a2-old": {"id": "a2-old", "parent": "u2", "message": message("assistant", 4.0, "an older reply")},
            "a2": {"id": "a2", "parent": "u2", "message": message("assistant", 5.0, "PEXPIRE with a Lua check")}
        }
    }]);
    let path = env.dir.path().join("conversations.json");
    std::fs::write(&path, chatgpt.to_string())?;
    env.run(["import".as_ref(), path.as_os_str()])?.ok()?;
    let expected = [
        ("how do I expire a redis lock", "SET key value NX PX 30000"),
        ("and renew it", "PEXPIRE with a Lua check"),
    ];
    let expected: Vec<(String, String)> =
        expected.iter().map(|(u, a)| (u.to_string(), a.to_string())).collect();
    assert_eq!(exported(&env, "gpt-1")?, expected);

    let claude = serde_json::json!([{
        "uuid": "claude-voice", "name": "voice", "chat_messages": [
            {"uuid": "m1", "sender": "human", "text": "", "created_at": "2025-05-01T10:00:00Z",
             "content": [{"type": "voice_note", "title": "Voice note", "transcript": "remind me how to rotate the redis password"}]},
            {"uuid": "m2", "sender": "assistant", "text": "CONFIG SET requirepass", "created_at": "2025-05-01T10:00:05Z",
             "content": [{"type": "text", "text": "CONFIG SET requirepass"}]}
        ]
    }]);
    let path = env.dir.path().join("claude.json");
    std::fs::write(&path, claude.to_string())?;
    env.run(["import".as_ref(), path.as_os_str()])?.ok()?;
    let expected = vec![(
        "remind me how to rotate the redis password".to_string(),
        "CONFIG SET requirepass".to_string(),
    )];
    assert_eq!(exported(&env, "claude-voice")?, expected);
    Ok(())
}
