//! The `ctxgate` binary on bad input: exit codes, error messages (text and `--json`), the index
//! left unchanged by a rejected command, and a busy index.

mod common;

use common::{AddDoc, SelectDoc, TestEnv, TestResult, add_topics, run_at};
use ctxgate::{Gatekeeper, Options};
use std::time::{Duration, Instant};

#[test]
fn unknown_session_exits_1_and_names_it() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "known")?;
    for command in ["select", "gate", "prompt"] {
        let run = env.run([command, "-s", "no-such-session", "Redis lock"])?.expect_code(1)?;
        assert!(run.stdout.is_empty(), "{command}: nothing on stdout: {}", run.stdout);
        assert!(run.stderr.contains("no-such-session"), "{command}: {}", run.stderr);

        let run = env.run(["--json", command, "-s", "no-such-session", "Redis lock"])?.expect_code(1)?;
        let doc = run.json_error()?;
        assert_eq!(doc.error.kind, "unknown_session", "{command}: {doc:#?}");
        assert!(doc.error.message.contains("no-such-session"), "{command}: {doc:#?}");
    }
    Ok(())
}

#[test]
fn blank_query_exits_1_with_bad_input() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    for command in ["select", "gate", "prompt"] {
        for query in ["", "   ", "\n\t"] {
            let run = env.run([command, "-s", "s", query])?.expect_code(1)?;
            assert!(run.stderr.contains("query"), "{command} {query:?}: {}", run.stderr);
            let run = env.run(["--json", command, "-s", "s", query])?.expect_code(1)?;
            let doc = run.json_error()?;
            assert_eq!(doc.error.kind, "bad_input", "{command} {query:?}: {doc:#?}");
            assert!(!doc.error.message.is_empty());
        }
    }
    Ok(())
}

#[test]
fn empty_turn_is_rejected_and_the_index_is_unchanged() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let before = env.stats()?;
    for (user, assistant) in [("", ""), ("   ", "\n"), ("\t", "")] {
        let run = env.run(["add", "-s", "s", "-u", user, "-a", assistant])?.expect_code(1)?;
        assert!(run.stderr.contains("empty"), "{user:?}/{assistant:?}: {}", run.stderr);
        assert!(run.stdout.is_empty(), "no turn id printed: {}", run.stdout);
        let run = env.run(["--json", "add", "-s", "s", "-u", user, "-a", assistant])?.expect_code(1)?;
        assert_eq!(run.json_error()?.error.kind, "bad_input");
    }
    // Neither side given at all.
    env.run(["add", "-s", "s"])?.expect_code(1)?;
    // A new session is not created by a rejected first turn either.
    env.run(["add", "-s", "brand-new", "-u", " "])?.expect_code(1)?;
    let after = env.stats()?;
    assert_eq!((after.sessions, after.turns), (before.sessions, before.turns), "{before:#?}\n{after:#?}");
    assert_eq!(env.add("s", "a real turn", "")?, 3, "the next turn id continues where it was");
    Ok(())
}

/// About 1 MB of varied words, with sentence ends now and then.
fn big_text(bytes: usize) -> String {
    let words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"];
    let mut big = String::with_capacity(bytes + 32);
    let mut i = 0usize;
    while big.len() < bytes {
        big.push_str(words[i % words.len()]);
        big.push_str(&(i % 997).to_string());
        big.push_str(if i % 13 == 12 { ". " } else { " " });
        i += 1;
    }
    big
}

#[test]
fn one_megabyte_turn_is_accepted_by_the_cli() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "Set a TTL: SET key token NX PX 30000.")?;
    // Linux limits one argument to 128 KiB: large texts come from a file.
    let file = env.dir.path().join("dump.txt");
    std::fs::write(&file, big_text(1 << 20))?;
    let file = file.to_string_lossy().into_owned();
    let run = env.run(["add", "-s", "s", "-u", "here is a log dump", "--assistant-file", &file])?.ok()?;
    assert_eq!(run.stdout.trim(), "1");
    let doc = env.select("s", &[], "Redis lock TTL")?;
    doc.check_invariants()?;
    assert!(doc.turn_ids().contains(&0), "{doc:#?}");
    Ok(())
}

#[test]
fn largest_argument_turn_is_accepted_and_queries_still_work() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "Set a TTL: SET key token NX PX 30000.")?;
    // Just under Linux's 128 KiB limit of one argument, on both sides.
    let big = big_text(120 * 1024);
    let run = env.run(["add", "-s", "s", "-u", &big, "-a", &big])?.ok()?;
    assert_eq!(run.stdout.trim(), "1");
    let doc = env.select("s", &[], "Redis lock TTL")?;
    doc.check_invariants()?;
    assert!(doc.turn_ids().contains(&0), "{doc:#?}");
    let doc = env.select("s", &[], "foxtrot5 golf6")?;
    doc.check_invariants()?;
    assert_eq!(env.stats()?.turns, 2);
    Ok(())
}

#[test]
fn one_megabyte_turn_added_by_the_library_is_queried_by_the_cli() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "Set a TTL: SET key token NX PX 30000.")?;
    {
        let gk = Gatekeeper::open(&env.db, Options::default())?;
        let id = gk.session("s")?.add_turn("here is a log dump", &big_text(1 << 20))?;
        assert_eq!(id, 1);
    }
    let doc = env.select("s", &[], "Redis lock TTL")?;
    doc.check_invariants()?;
    assert!(doc.turn_ids().contains(&0), "{doc:#?}");
    let doc = env.select("s", &[], "foxtrot5 golf6 log dump")?;
    doc.check_invariants()?;
    let run = env.run(["prompt", "-s", "s", "--budget", "2000", "foxtrot5 golf6 log dump"])?.ok()?;
    assert!(common::estimate_tokens(&run.stdout) <= 2000, "{}", run.stdout.len());
    assert_eq!(env.add("s", "after the big turn", "")?, 2);
    assert_eq!(env.stats()?.turns, 3);
    Ok(())
}

#[test]
fn control_characters_are_stored_and_not_echoed_raw() -> TestResult {
    let env = TestEnv::new()?;
    let user = "The compiler printed \x1b[31merror\x1b[0m and a bell \x07 then \r carriage return.";
    let assistant = "The compiler error means the \x1b]0;title\x07 linker flags are wrong.";
    assert_eq!(env.add("s", user, assistant)?, 0);

    let human = env.run(["select", "-s", "s", "compiler linker error"])?.ok()?;
    assert!(human.stdout.contains("── turn 0"), "the turn is selected: {}", human.stdout);
    assert!(!human.stdout_bytes.contains(&0x1b), "raw ESC in select output: {:?}", human.stdout);
    assert!(!human.stdout_bytes.contains(&0x07), "raw BEL in select output: {:?}", human.stdout);
    assert!(human.stdout.contains('\u{FFFD}'), "control characters are replaced: {:?}", human.stdout);

    // JSON keeps the text as stored (escaped by JSON).
    let doc = env.select("s", &[], "compiler linker error")?;
    let block = doc.blocks.first().ok_or("no block")?;
    assert!(block.user.contains('\x1b') || block.assistant.contains('\x1b'), "{block:#?}");

    // Errors echo the session name back; a query with ESC in an unknown session must not be raw either.
    let run = env.run(["select", "-s", "unknown", "compiler \x1b[2J error"])?.expect_code(1)?;
    assert!(!run.stderr.as_bytes().contains(&0x1b), "{:?}", run.stderr);
    Ok(())
}

#[test]
fn invalid_session_names_are_rejected() -> TestResult {
    let env = TestEnv::new()?;
    let long = "x".repeat(300);
    for name in ["", " leading", "trailing ", "bell\x07name", "esc\x1bname", "new\nline", long.as_str()] {
        let run = env.run(["add", "-s", name, "-u", "hello"])?.expect_code(1)?;
        assert!(run.stderr.contains("session name"), "{name:?}: {}", run.stderr);
        assert!(!run.stderr.as_bytes().contains(&0x1b), "{name:?}: {:?}", run.stderr);
        let run = env.run(["--json", "select", "-s", name, "hello"])?.expect_code(1)?;
        let doc = run.json_error()?;
        assert_eq!(doc.error.kind, "bad_input", "{name:?}: {doc:#?}");
        assert!(doc.error.message.contains("session name"), "{name:?}: {doc:#?}");
    }
    if env.db.exists() {
        let stats = env.stats()?;
        assert_eq!((stats.sessions, stats.turns), (0, 0), "{stats:#?}");
    }
    Ok(())
}

#[test]
fn db_in_a_missing_directory_names_the_directory() -> TestResult {
    let env = TestEnv::new()?;
    let missing = env.dir.path().join("no").join("such-dir");
    let db = missing.join("index.redb");
    // A read finds no index there (exit 6, tests/read_only.rs); a write names the directory.
    let run = run_at(&db, ["stats"])?.expect_code(6)?;
    assert!(run.stderr.contains(&missing.display().to_string()), "{}", run.stderr);
    let run = run_at(&db, ["add", "-s", "s", "-u", "hello"])?.expect_code(1)?;
    assert!(run.stderr.contains(&missing.display().to_string()), "{}", run.stderr);
    assert!(!missing.exists(), "the directory is not created behind the user's back");
    let run = run_at(&db, ["--json", "add", "-s", "s", "-u", "hello"])?.expect_code(1)?;
    let doc = run.json_error()?;
    assert!(doc.error.message.contains(&missing.display().to_string()), "{doc:#?}");
    Ok(())
}

/// A few non-index files: short and long text, and bytes that look like nothing.
fn non_index_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("notes.txt", b"these are my notes, not an index\n".to_vec()),
        ("one-byte", b"x".to_vec()),
        ("page.txt", "lorem ipsum dolor sit amet\n".repeat(400).into_bytes()),
        ("binary", (0..=255u8).cycle().take(10_000).collect()),
    ]
}

#[test]
fn db_pointing_to_a_non_index_file_fails_and_leaves_it_unchanged() -> TestResult {
    let env = TestEnv::new()?;
    for (name, bytes) in non_index_files() {
        let path = env.dir.path().join(name);
        std::fs::write(&path, &bytes)?;
        for args in [&["stats"][..], &["add", "-s", "s", "-u", "hello"], &["sessions"]] {
            let run = run_at(&path, args)?.expect_code(1)?;
            assert!(run.stderr.contains(&path.display().to_string()), "{name} {args:?}: {}", run.stderr);
            assert_eq!(std::fs::read(&path)?, bytes, "{name} {args:?}: the file must be left byte for byte");
        }
    }
    Ok(())
}

#[test]
fn db_pointing_to_a_non_index_file_says_not_a_ctxgate_index() -> TestResult {
    let env = TestEnv::new()?;
    for (name, bytes) in non_index_files() {
        let path = env.dir.path().join(name);
        std::fs::write(&path, &bytes)?;
        let run = run_at(&path, ["stats"])?.expect_code(1)?;
        assert!(run.stderr.contains("not a ctxgate index"), "{name}: {}", run.stderr);
        let run = run_at(&path, ["--json", "stats"])?.expect_code(1)?;
        let doc = run.json_error()?;
        assert_eq!(doc.error.kind, "not_an_index", "{name}: {doc:#?}");
        assert_eq!(std::fs::read(&path)?, bytes, "{name}: the file must be left byte for byte");
    }
    Ok(())
}

#[test]
fn db_pointing_to_another_programs_redb_file_is_not_an_index_and_left_unchanged() -> TestResult {
    let env = TestEnv::new()?;
    let path = env.dir.path().join("other.redb");
    {
        let db = redb::Database::create(&path)?;
        let txn = db.begin_write()?;
        {
            let table: redb::TableDefinition<&str, u64> = redb::TableDefinition::new("someone_elses");
            txn.open_table(table)?.insert("key", 42)?;
        }
        txn.commit()?;
    }
    let bytes = std::fs::read(&path)?;
    for args in [&["stats"][..], &["add", "-s", "s", "-u", "hello"]] {
        let run = run_at(&path, ["--json"].iter().chain(args))?.expect_code(1)?;
        let doc = run.json_error()?;
        assert_eq!(doc.error.kind, "not_an_index", "{args:?}: {doc:#?}");
        assert!(doc.error.message.contains("not a ctxgate index"), "{args:?}: {doc:#?}");
        assert_eq!(std::fs::read(&path)?, bytes, "{args:?}: the file must be left byte for byte");
    }
    Ok(())
}

#[test]
fn db_pointing_to_a_directory_is_not_an_index() -> TestResult {
    let env = TestEnv::new()?;
    let run = run_at(env.dir.path(), ["--json", "stats"])?.expect_code(1)?;
    let doc = run.json_error()?;
    assert_eq!(doc.error.kind, "not_an_index", "{doc:#?}");
    assert!(doc.error.message.contains("not a ctxgate index"), "{doc:#?}");
    Ok(())
}

#[test]
fn as_of_beyond_the_session_exits_1() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    // 3 is the turn count: allowed. 4 is beyond.
    let doc: SelectDoc =
        env.run(["--json", "select", "-s", "s", "--as-of", "3", "Redis lock"])?.ok()?.json()?;
    doc.check_invariants()?;
    for command in ["select", "gate"] {
        let run = env.run([command, "-s", "s", "--as-of", "4", "Redis lock"])?.expect_code(1)?;
        assert!(run.stderr.contains("--as-of"), "{command}: {}", run.stderr);
        let run =
            env.run(["--json", command, "-s", "s", "--as-of", "4000000000", "Redis lock"])?.expect_code(1)?;
        assert_eq!(run.json_error()?.error.kind, "bad_input", "{command}");
    }
    Ok(())
}

#[test]
fn usage_errors_exit_2() -> TestResult {
    let env = TestEnv::new()?;
    for args in [
        &["--no-such-flag", "stats"][..],
        &["no-such-command"],
        &["select", "-s", "s"],
        &["select", "Redis"],
        &["select", "-s", "s", "--budget", "lots", "q"],
        &["select", "-s", "s", "--policy", "maximal", "q"],
        &["--threads", "-1", "stats"],
        &[],
    ] {
        let run = env.run(args)?.expect_code(2)?;
        assert!(run.stdout.is_empty(), "{args:?}: usage goes to stderr: {}", run.stdout);
        assert!(run.stderr.starts_with("error:"), "{args:?}: {}", run.stderr);
    }
    assert!(!env.db.exists(), "a usage error does not create the index");
    // --help and --version are not errors.
    let help = env.run(["--help"])?.ok()?;
    assert!(help.stdout.contains("Exit codes"), "{}", help.stdout);
    env.run(["--version"])?.ok()?;
    Ok(())
}

#[test]
fn bad_busy_timeout_is_an_error() -> TestResult {
    let env = TestEnv::new()?;
    for value in ["-1", "NaN", "inf"] {
        let run = env.run(["--busy-timeout", value, "stats"])?;
        assert!(matches!(run.code, Some(1 | 2)), "--busy-timeout {value}: {run:#?}");
    }
    Ok(())
}

#[test]
fn huge_busy_timeout_is_an_error_not_a_panic() -> TestResult {
    let env = TestEnv::new()?;
    for value in ["1e300", "18446744073709551616"] {
        let run = env.run(["--busy-timeout", value, "stats"])?;
        assert!(matches!(run.code, Some(1 | 2)), "--busy-timeout {value}: {run:#?}");
        assert!(!run.stderr.contains("panicked"), "--busy-timeout {value}: {}", run.stderr);
    }
    Ok(())
}

#[test]
fn busy_index_exits_4_without_hanging() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "hello", "hi")?;
    let args = ["--busy-timeout", "0.3", "--json", "add", "-s", "s", "-u", "while busy"];
    // Another writer in the middle of a transaction (an import's batch, say).
    let holder = common::WriteHold::begin(&env.db)?;

    let started = Instant::now();
    let run = env.run(args)?;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "the CLI waited {elapsed:?} with --busy-timeout 0.3");
    let run = run.expect_code(4)?;
    let doc = run.json_error()?;
    assert_eq!(doc.error.kind, "busy", "{doc:#?}");
    assert!(doc.error.message.contains("--busy-timeout"), "says how to wait longer: {doc:#?}");

    let started = Instant::now();
    let human = env.run(["--busy-timeout", "0.3", "add", "-s", "s", "-u", "while busy"])?;
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    let human = human.expect_code(4)?;
    assert!(human.stderr.contains("busy"), "{}", human.stderr);
    assert!(human.stderr.contains(&env.db.display().to_string()), "{}", human.stderr);
    // Reads do not wait for the writer: they read the last commit.
    let stats: common::StatsDoc = env.run(["--busy-timeout", "0.3", "--json", "stats"])?.ok()?.json()?;
    assert_eq!(stats.turns, 1);

    drop(holder);
    let doc: AddDoc = env.run(args)?.ok()?.json()?;
    assert_eq!(doc.turn_id, 1, "the busy attempt added nothing; this one is turn 1");
    Ok(())
}

#[test]
fn prompt_budget_smaller_than_the_question_is_an_error() -> TestResult {
    let env = TestEnv::new()?;
    env.add("s", "How do I expire a Redis lock?", "Set a TTL.")?;
    let run = env
        .run(["prompt", "-s", "s", "--budget", "5", "what TTL should the redis lock use?"])?
        .expect_code(1)?;
    assert!(run.stderr.contains("over the budget of 5"), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "no partial prompt on stdout: {}", run.stdout);
    Ok(())
}

#[test]
fn absurd_thread_counts_are_refused_quickly() -> TestResult {
    let env = TestEnv::new()?;
    let started = Instant::now();
    let run = env.run(["--threads", "100000", "stats"])?.expect_code(1)?;
    assert!(run.stderr.contains("threads"), "{}", run.stderr);
    assert!(started.elapsed() < Duration::from_secs(5));
    Ok(())
}

#[cfg(unix)]
#[test]
fn import_json_reports_a_file_name_that_is_not_utf8() -> TestResult {
    use std::os::unix::ffi::OsStrExt;
    let env = TestEnv::new()?;
    let logs = env.dir.path().join("logs");
    std::fs::create_dir(&logs)?;
    let name = std::ffi::OsStr::from_bytes(b"bad\xff.jsonl");
    std::fs::write(
        logs.join(name),
        "{\"session\": \"s\", \"user\": \"hello there\", \"assistant\": \"hi\"}\n",
    )?;
    let run = env.run(["--json", "import", logs.to_str().ok_or("utf-8 dir")?])?.ok()?;
    let report: serde_json::Value = serde_json::from_str(&run.stdout)?;
    assert_eq!(report["new_turns"], 1);
    assert!(
        report["files"][0]["path"].as_str().is_some_and(|p| p.ends_with("bad\u{FFFD}.jsonl")),
        "{report}"
    );
    Ok(())
}
