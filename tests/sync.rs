//! `ctxgate sync` against a real PostgreSQL server (tests/common/postgres.rs): two indexes
//! ("machines") sharing spaces through it, with the real `ctxgate` binary. Without a server
//! each test says why and passes (`CTXGATE_REQUIRE_POSTGRES=1` makes that a failure).
#![cfg(unix)]

mod common;
#[path = "common/postgres.rs"]
mod postgres_server;

use common::{TestResult, ctxgate};
use postgres_server::{ADMIN, ADMIN_PASSWORD, Server};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// One machine: an index in its own directory.
struct Machine {
    _dir: tempfile::TempDir,
    db: PathBuf,
}

impl Machine {
    fn new() -> TestResult<Machine> {
        let dir = tempfile::tempdir()?;
        let db = dir.path().join("index.redb");
        Ok(Machine { _dir: dir, db })
    }

    fn path(&self, name: &str) -> PathBuf {
        self._dir.path().join(name)
    }

    /// `ctxgate --db DB ARGS` as `user` (password from PGPASSWORD).
    fn run_as(&self, server: &Server, user: &str, password: &str, args: &[&str]) -> TestResult<common::Run> {
        let output = self.command(server, user, password, args).output()?;
        Ok(common::Run::from_output(output))
    }

    fn command(&self, server: &Server, user: &str, password: &str, args: &[&str]) -> std::process::Command {
        let mut cmd = ctxgate();
        cmd.env_remove("CTXGATE_REMOTE")
            .env_remove("PGPASSFILE")
            .env("PGPASSWORD", password)
            .env("CTXGATE_REMOTE", server.url(user))
            .arg("--db")
            .arg(&self.db)
            .args(args);
        cmd
    }

    fn run(&self, server: &Server, args: &[&str]) -> TestResult<common::Run> {
        self.run_as(server, ADMIN, ADMIN_PASSWORD, args)
    }

    /// `sync --json` as the admin: the report.
    fn sync(&self, server: &Server) -> TestResult<Value> {
        self.run(server, &["--json", "sync"])?.ok()?.json()
    }

    fn sessions(&self) -> TestResult<Vec<(String, u64)>> {
        let run = common::run_at(&self.db, ["--json", "sessions"])?.ok()?;
        let doc: Value = run.json()?;
        let list = doc["sessions"].as_array().cloned().unwrap_or_default();
        let mut sessions: Vec<(String, u64)> = list
            .iter()
            .map(|s| (s["name"].as_str().unwrap_or("").to_string(), s["turns"].as_u64().unwrap_or(0)))
            .collect();
        sessions.sort();
        Ok(sessions)
    }

    fn export(&self, session: &str) -> TestResult<String> {
        Ok(common::run_at(&self.db, ["export", "--session", session])?.ok()?.stdout)
    }
}

/// Totals of a sync report over its spaces.
fn totals(report: &Value) -> (u64, u64, u64, u64, usize) {
    let spaces = report["spaces"].as_array().cloned().unwrap_or_default();
    let sum = |field: &str| spaces.iter().map(|s| s[field].as_u64().unwrap_or(0)).sum::<u64>();
    let refused = spaces.iter().map(|s| s["refused"].as_array().map_or(0, Vec::len)).sum();
    (sum("pushed_turns"), sum("pulled_turns"), sum("forgotten"), sum("tombstones_pushed"), refused)
}

const WORDS: [&str; 24] = [
    "redis", "lock", "ttl", "asyncio", "timeout", "postgres", "index", "vacuum", "kafka", "offset", "rust",
    "borrow", "docker", "layer", "cache", "nginx", "proxy", "header", "python", "wheel", "linker", "symbol",
    "tokio", "runtime",
];

/// A canonical JSONL log of `sessions` sessions of `turns` turns each, named `{prefix}{i}`.
fn write_log(path: &Path, prefix: &str, sessions: usize, turns: usize, seed: usize) -> TestResult {
    let mut out = String::new();
    for s in 0..sessions {
        for t in 0..turns {
            let w = |k: usize| WORDS[(s * 7 + t * 3 + k * 5 + seed) % WORDS.len()];
            let line = serde_json::json!({
                "session": format!("{prefix}{s}"),
                "user": format!("How does the {} {} interact with {} in turn {t}?", w(0), w(1), w(2)),
                "assistant": format!("The {} uses {} and {}; check the {} settings (session {s}).", w(1), w(3), w(4), w(5)),
                "time": format!("2026-01-{:02}T10:{:02}:00Z", 1 + s % 28, t % 60),
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
    }
    std::fs::write(path, out)?;
    Ok(())
}

fn init(server: &Server) -> TestResult {
    Machine::new()?.run(server, &["sync", "init"])?.ok()?;
    Ok(())
}

/// Remote rows: (sessions, turns) of `space`, and whether every session's turn count matches its rows.
fn remote_counts(server: &Server, space: &str) -> TestResult<(i64, i64, bool)> {
    let mut client = server.admin();
    let sessions: i64 =
        client.query_one("SELECT count(*) FROM ctxgate_sessions WHERE space = $1", &[&space])?.get(0);
    let turns: i64 =
        client.query_one("SELECT count(*) FROM ctxgate_turns WHERE space = $1", &[&space])?.get(0);
    let mismatched: i64 = client
        .query_one(
            "SELECT count(*) FROM ctxgate_sessions s WHERE s.space = $1 AND s.turns <> \
             (SELECT count(*) FROM ctxgate_turns t WHERE t.space = s.space AND t.session = s.session)",
            &[&space],
        )?
        .get(0);
    Ok((sessions, turns, mismatched == 0))
}

#[test]
fn two_machines_share_a_history_and_answer_as_a_direct_import() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    init(&server)?; // idempotent
    let (a, b, direct) = (Machine::new()?, Machine::new()?, Machine::new()?);
    let log = a.path("log.jsonl");
    write_log(&log, "chat-", 6, 25, 0)?;
    for m in [&a, &direct] {
        common::run_at(&m.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
    }
    for m in [&a, &b] {
        m.run(&server, &["sync", "share", "--space", "team", "--all"])?.ok()?;
    }
    let pushed = a.sync(&server)?;
    assert_eq!(totals(&pushed), (150, 0, 0, 0, 0), "{pushed}");
    assert_eq!(remote_counts(&server, "team")?, (6, 150, true));
    let pulled = b.sync(&server)?;
    assert_eq!(totals(&pulled), (0, 150, 0, 0, 0), "{pulled}");
    assert_eq!(b.sessions()?, direct.sessions()?);
    for session in ["chat-0", "chat-5"] {
        for query in ["redis lock ttl", "kafka offset timeout", "rust borrow checker"] {
            let select = |m: &Machine| -> TestResult<Value> {
                common::run_at(&m.db, ["--json", "select", "--session", session, "--", query])?.ok()?.json()
            };
            assert_eq!(select(&b)?, select(&direct)?, "{session}: {query}");
        }
        assert_eq!(b.export(session)?, direct.export(session)?);
    }
    // Twice, on either machine: nothing moves.
    for m in [&a, &b, &a, &b] {
        assert_eq!(totals(&m.sync(&server)?), (0, 0, 0, 0, 0));
    }
    // An increment travels, alone.
    common::run_at(
        &b.db,
        [
            "add",
            "--session",
            "chat-2",
            "--user",
            "and the nginx proxy header?",
            "--assistant",
            "set it in the location block",
        ],
    )?
    .ok()?;
    assert_eq!(totals(&b.sync(&server)?), (1, 0, 0, 0, 0));
    assert_eq!(totals(&a.sync(&server)?), (0, 1, 0, 0, 0));
    assert_eq!(a.export("chat-2")?, b.export("chat-2")?);
    Ok(())
}

#[test]
fn a_project_space_maps_sessions_to_each_machines_checkout() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let (a, b) = (Machine::new()?, Machine::new()?);
    common::run_at(
        &a.db,
        ["add", "--session", "/home/ann/repo#s1", "--user", "redis lock?", "--assistant", "use SET NX PX"],
    )?
    .ok()?;
    common::run_at(
        &a.db,
        ["add", "--session", "/home/ann/other#s2", "--user", "not shared", "--assistant", "private"],
    )?
    .ok()?;
    a.run(&server, &["sync", "share", "--space", "repo", "--project", "/home/ann/repo"])?.ok()?;
    b.run(&server, &["sync", "share", "--space", "repo", "--project", "/srv/bob/repo"])?.ok()?;
    assert_eq!(totals(&a.sync(&server)?), (1, 0, 0, 0, 0));
    assert_eq!(totals(&b.sync(&server)?), (0, 1, 0, 0, 0));
    assert_eq!(b.sessions()?, vec![("/srv/bob/repo#s1".to_string(), 1)]);
    let mut client = server.admin();
    let names: Vec<String> = client
        .query("SELECT session FROM ctxgate_sessions WHERE space = 'repo'", &[])?
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(names, vec!["s1"], "the remote keys sessions by id, without a machine's path");
    let private: i64 =
        client.query_one("SELECT count(*) FROM ctxgate_turns WHERE user_text = 'not shared'", &[])?.get(0);
    assert_eq!(private, 0, "an unshared project never leaves the machine");
    Ok(())
}

#[test]
fn diverging_histories_are_a_conflict_left_alone() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let (a, b) = (Machine::new()?, Machine::new()?);
    common::run_at(&a.db, ["add", "--session", "x", "--user", "redis lock", "--assistant", "SET NX"])?
        .ok()?;
    common::run_at(
        &b.db,
        ["add", "--session", "x", "--user", "kafka offsets", "--assistant", "commit them"],
    )?
    .ok()?;
    common::run_at(&b.db, ["add", "--session", "y", "--user", "docker layer", "--assistant", "cache it"])?
        .ok()?;
    for m in [&a, &b] {
        m.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    }
    assert_eq!(totals(&a.sync(&server)?), (1, 0, 0, 0, 0));
    let report = b.sync(&server)?;
    let (pushed, pulled, _, _, refused) = totals(&report);
    assert_eq!((pushed, pulled, refused), (1, 0, 1), "{report}");
    assert_eq!(report["spaces"][0]["refused"][0]["session"], "x");
    assert!(report["spaces"][0]["refused"][0]["reason"].as_str().unwrap_or("").contains("conflict"));
    // Both sides keep their own; the other session still traveled.
    assert!(b.export("x")?.contains("kafka"));
    assert!(a.export("x")?.contains("redis"));
    assert_eq!(totals(&a.sync(&server)?), (0, 1, 0, 0, 0));
    let text = b.run(&server, &["sync"])?.ok()?.stdout;
    assert!(text.contains("refused x: conflict"), "{text}");
    Ok(())
}

#[test]
fn forget_travels_to_the_remote_and_the_other_machines() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let (a, b) = (Machine::new()?, Machine::new()?);
    let log = a.path("log.jsonl");
    write_log(&log, "f", 3, 4, 1)?;
    common::run_at(&a.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
    for m in [&a, &b] {
        m.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    }
    a.sync(&server)?;
    b.sync(&server)?;
    assert_eq!(b.sessions()?.len(), 3);
    a.run(&server, &["forget", "--session", "f1"])?.ok()?;
    let report = a.sync(&server)?;
    assert_eq!(totals(&report).3, 1, "{report}");
    assert_eq!(remote_counts(&server, "s")?, (2, 8, true));
    let report = b.sync(&server)?;
    assert_eq!(totals(&report).2, 1, "{report}");
    assert_eq!(b.sessions()?.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["f0", "f2"]);
    // The forgotten session does not come back from a machine that still had it.
    let c = Machine::new()?;
    common::run_at(&c.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
    c.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    let report = c.sync(&server)?;
    assert_eq!(totals(&report).2, 1, "{report}");
    assert_eq!(remote_counts(&server, "s")?, (2, 8, true));
    assert_eq!(c.sessions()?.len(), 2);
    // `--before` too: f0 ended on 2026-01-01, f2 on 2026-01-03.
    a.run(&server, &["forget", "--before", "2026-01-02"])?.ok()?;
    assert_eq!(totals(&a.sync(&server)?).3, 1);
    assert_eq!(remote_counts(&server, "s")?, (1, 4, true));
    for m in [&b, &c] {
        assert_eq!(totals(&m.sync(&server)?).2, 1);
        assert_eq!(m.sessions()?.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["f2"]);
    }
    Ok(())
}

#[test]
fn a_role_of_one_space_cannot_read_another() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let mut admin = server.admin();
    admin.batch_execute(
        "CREATE ROLE alice LOGIN PASSWORD 'alice-pw'; CREATE ROLE bob LOGIN PASSWORD 'bob-pw';",
    )?;
    let a = Machine::new()?;
    a.run(&server, &["sync", "grant", "--space", "alpha", "--role", "alice"])?.ok()?;
    a.run(&server, &["sync", "grant", "--space", "beta", "--role", "bob"])?.ok()?;
    // Bob writes beta.
    let bob = Machine::new()?;
    common::run_at(
        &bob.db,
        ["add", "--session", "b1", "--user", "beta secret plan", "--assistant", "only bob"],
    )?
    .ok()?;
    bob.run_as(&server, "bob", "bob-pw", &["sync", "share", "--space", "beta", "--all"])?.ok()?;
    let report: Value = bob.run_as(&server, "bob", "bob-pw", &["--json", "sync"])?.ok()?.json()?;
    assert_eq!(totals(&report).0, 1, "{report}");
    // Alice shares beta too: she pulls nothing of it, and cannot write to it.
    let alice = Machine::new()?;
    alice.run_as(&server, "alice", "alice-pw", &["sync", "share", "--space", "beta", "--all"])?.ok()?;
    common::run_at(&alice.db, ["add", "--session", "a1", "--user", "alpha", "--assistant", "alice's"])?
        .ok()?;
    let run = alice.run_as(&server, "alice", "alice-pw", &["sync"])?;
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("row-level security"), "{}", run.stderr);
    assert_eq!(alice.sessions()?.iter().map(|s| s.0.as_str()).collect::<Vec<_>>(), ["a1"]);
    // Read directly as alice: beta's rows are invisible, alpha's her own.
    let mut as_alice = postgres::Client::connect(
        &format!("postgres://alice:alice-pw@127.0.0.1:{}/postgres?sslmode=disable", server.port),
        postgres::NoTls,
    )?;
    let seen: i64 = as_alice.query_one("SELECT count(*) FROM ctxgate_turns", &[])?.get(0);
    assert_eq!(seen, 0);
    let sessions: i64 =
        as_alice.query_one("SELECT count(*) FROM ctxgate_sessions WHERE space = 'beta'", &[])?.get(0);
    assert_eq!(sessions, 0);
    // ... while the rows are there.
    assert_eq!(remote_counts(&server, "beta")?, (1, 1, true));
    // A grant is not self-service.
    let err = as_alice
        .execute("INSERT INTO ctxgate_space_roles VALUES ('beta', 'alice')", &[])
        .expect_err("alice may not grant herself");
    assert!(
        err.to_string().contains("permission denied") || format!("{err:?}").contains("permission denied"),
        "{err:?}"
    );
    Ok(())
}

#[test]
fn concurrent_syncs_lose_nothing_and_pullers_miss_no_change() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let machines: Vec<Machine> = (0..3).map(|_| Machine::new()).collect::<Result<_, _>>()?;
    for (i, m) in machines.iter().enumerate() {
        m.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
        let log = m.path("log.jsonl");
        write_log(&log, &format!("m{i}-"), 8, 20, i)?;
        if i < 2 {
            common::run_at(&m.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
        }
    }
    let start = Instant::now();
    let mut rounds = 0;
    // Two pushers (each twice at once) and a puller, at the same time; repeated with new turns.
    while rounds < 4 && start.elapsed() < Duration::from_secs(120) {
        let mut children: Vec<Child> = Vec::new();
        for m in [&machines[0], &machines[0], &machines[1], &machines[1], &machines[2]] {
            children.push(
                m.command(&server, ADMIN, ADMIN_PASSWORD, &["-q", "sync"]).stdout(Stdio::null()).spawn()?,
            );
        }
        for mut child in children {
            assert!(child.wait()?.success());
        }
        for (i, m) in machines.iter().take(2).enumerate() {
            let session = format!("m{i}-{rounds}");
            common::run_at(
                &m.db,
                [
                    "add",
                    "--session",
                    &session,
                    "--user",
                    "docker cache",
                    "--assistant",
                    &format!("round {rounds}"),
                ],
            )?
            .ok()?;
        }
        rounds += 1;
    }
    for m in machines.iter().chain(&machines) {
        m.sync(&server)?;
    }
    let (sessions, turns, consistent) = remote_counts(&server, "s")?;
    assert!(consistent);
    assert_eq!((sessions, turns), (16, 320 + 2 * rounds));
    let expected = machines[0].sessions()?;
    assert_eq!(expected.len(), 16);
    for m in &machines[1..] {
        assert_eq!(m.sessions()?, expected);
    }
    Ok(())
}

#[test]
fn a_puller_never_skips_a_change_committed_after_a_later_numbered_one() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let (pusher, puller) = (Machine::new()?, Machine::new()?);
    for m in [&pusher, &puller] {
        m.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    }
    common::run_at(
        &pusher.db,
        ["add", "--session", "quick", "--user", "kafka offset", "--assistant", "commit it"],
    )?
    .ok()?;
    // A slow push of another machine: it took its change number and has not committed yet.
    let mut slow = server.admin();
    let mut slow = slow.transaction()?;
    slow.execute("SELECT pg_advisory_xact_lock(hashtext('s'))", &[])?;
    let seq: i64 = slow.query_one("SELECT nextval('ctxgate_changes')", &[])?.get(0);
    let digest = ctxgate::sync::next_digest(ctxgate::sync::SEED, "redis lock", "SET NX PX") as i64;
    slow.execute(
        "INSERT INTO ctxgate_turns (space, session, turn_index, digest, user_text, assistant_text, seq) \
         VALUES ('s', 'slow', 0, $1, 'redis lock', 'SET NX PX', $2)",
        &[&digest, &seq],
    )?;
    slow.execute(
        "INSERT INTO ctxgate_sessions (space, session, turns, digest, seq) VALUES ('s', 'slow', 1, $1, $2)",
        &[&digest, &seq],
    )?;
    // A quick push meanwhile: it must wait for the slow one, else its later number commits first.
    let mut quick =
        pusher.command(&server, ADMIN, ADMIN_PASSWORD, &["-q", "sync"]).stdout(Stdio::null()).spawn()?;
    let mut watch = server.admin();
    let start = Instant::now();
    loop {
        let waiting: i64 = watch
            .query_one("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", &[])?
            .get(0);
        if waiting > 0 || quick.try_wait()?.is_some() || start.elapsed() > Duration::from_secs(30) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // A pull now sees neither or only what is safe to pass.
    puller.run(&server, &["-q", "sync"])?.ok()?;
    slow.commit()?;
    assert!(quick.wait()?.success());
    puller.sync(&server)?;
    let names: Vec<String> = puller.sessions()?.into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["quick", "slow"], "the puller's cursor passed a change committed after it");
    Ok(())
}

/// A long push, started in the background.
fn big_machine(server: &Server, sessions: usize, turns: usize) -> TestResult<Machine> {
    let m = Machine::new()?;
    let log = m.path("log.jsonl");
    write_log(&log, "big", sessions, turns, 3)?;
    common::run_at(&m.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
    m.run(server, &["sync", "share", "--space", "big", "--all"])?.ok()?;
    Ok(m)
}

#[test]
fn a_killed_sync_leaves_both_sides_consistent_and_the_next_completes() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let a = big_machine(&server, 40, 200)?; // 8000 turns: four batches
    let start = Instant::now();
    let mut delay = Duration::from_millis(50);
    let mut hit = false;
    // Kill it ever later until a kill lands mid-push (some batches committed, not all).
    while !hit && start.elapsed() < Duration::from_secs(120) {
        let mut child = a
            .command(&server, ADMIN, ADMIN_PASSWORD, &["-q", "sync"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        std::thread::sleep(delay);
        let finished = child.try_wait()?.is_some();
        child.kill()?;
        child.wait()?;
        let (sessions, turns, consistent) = remote_counts(&server, "big")?;
        assert!(consistent, "a session row disagrees with its turns");
        assert_eq!(turns % 200, 0, "only whole sessions are committed");
        if finished || sessions == 40 {
            // Too late: start again from an empty remote.
            server.admin().batch_execute("DELETE FROM ctxgate_turns; DELETE FROM ctxgate_sessions;")?;
            common::run_at(&a.db, ["sync", "unshare", "--space", "big"])?.ok()?;
            a.run(&server, &["sync", "share", "--space", "big", "--all"])?.ok()?;
            delay /= 2;
        } else if sessions > 0 {
            hit = true;
        } else {
            delay += delay / 2;
        }
    }
    assert!(hit, "no kill landed mid-push in 120 s");
    let report = a.sync(&server)?;
    assert_eq!(totals(&report).4, 0, "{report}");
    assert_eq!(remote_counts(&server, "big")?, (40, 8000, true));
    let b = Machine::new()?;
    b.run(&server, &["sync", "share", "--space", "big", "--all"])?.ok()?;
    assert_eq!(totals(&b.sync(&server)?).1, 8000);
    assert_eq!(b.sessions()?, a.sessions()?);
    Ok(())
}

#[test]
fn a_server_stopped_mid_push_fails_the_sync_and_the_next_completes() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let a = big_machine(&server, 40, 200)?;
    let start = Instant::now();
    let mut delay = Duration::from_millis(100);
    let mut hit = false;
    while !hit && start.elapsed() < Duration::from_secs(150) {
        let child = a
            .command(&server, ADMIN, ADMIN_PASSWORD, &["sync"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()?;
        std::thread::sleep(delay);
        server.stop();
        let output = child.wait_with_output()?;
        server.restart()?;
        let (sessions, _, consistent) = remote_counts(&server, "big")?;
        assert!(consistent);
        if output.status.success() {
            server.admin().batch_execute("DELETE FROM ctxgate_turns; DELETE FROM ctxgate_sessions;")?;
            common::run_at(&a.db, ["sync", "unshare", "--space", "big"])?.ok()?;
            a.run(&server, &["sync", "share", "--space", "big", "--all"])?.ok()?;
            delay /= 2;
        } else {
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(stderr.contains("run sync again") || stderr.contains("cannot connect"), "{stderr}");
            hit = sessions > 0 || stderr.contains("run sync again");
            delay += delay / 2;
        }
    }
    assert!(hit, "the server never stopped mid-push in 150 s");
    a.sync(&server)?;
    assert_eq!(remote_counts(&server, "big")?, (40, 8000, true));
    assert_eq!(totals(&a.sync(&server)?), (0, 0, 0, 0, 0));
    Ok(())
}

#[test]
fn an_unredacted_index_is_not_pushed_unless_told_so() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let a = Machine::new()?;
    common::run_at(&a.db, ["--no-redact", "add", "--session", "x", "--user", "raw", "--assistant", "text"])?
        .ok()?;
    a.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    let run = a.run(&server, &["sync"])?.expect_code(1)?;
    assert!(run.stderr.contains("--allow-unredacted"), "{}", run.stderr);
    assert_eq!(remote_counts(&server, "s")?, (0, 0, true));
    a.run(&server, &["sync", "--allow-unredacted"])?.ok()?;
    assert_eq!(remote_counts(&server, "s")?, (1, 1, true));
    Ok(())
}

#[test]
fn the_remote_url_and_its_password_are_never_stored_or_printed() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    let a = Machine::new()?;
    common::run_at(&a.db, ["add", "--session", "x", "--user", "u", "--assistant", "a"])?.ok()?;
    let mut cmd = ctxgate();
    let run = common::Run::from_output(
        cmd.env_remove("PGPASSWORD")
            .arg("--db")
            .arg(&a.db)
            .args(["sync", "init", "--remote", &server.admin_url()])
            .output()?,
    );
    run.ok()?;
    // A wrong password: the error names the URL without it.
    let bad = server.admin_url().replace(ADMIN_PASSWORD, "wrong-pw-123");
    let run = common::Run::from_output(
        ctxgate().env_remove("PGPASSWORD").args(["sync", "init", "--remote", &bad]).output()?,
    );
    assert_eq!(run.code, Some(1));
    assert!(!run.stderr.contains("wrong-pw-123") && run.stderr.contains("***"), "{}", run.stderr);
    a.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    a.sync(&server)?;
    let bytes = std::fs::read(&a.db)?;
    let needle = ADMIN_PASSWORD.as_bytes();
    assert!(!bytes.windows(needle.len()).any(|w| w == needle), "the password is in the index file");
    // The help shows no value of CTXGATE_REMOTE.
    let help = ctxgate().env("CTXGATE_REMOTE", server.admin_url()).args(["sync", "--help"]).output()?;
    assert!(!String::from_utf8_lossy(&help.stdout).contains(ADMIN_PASSWORD));
    Ok(())
}

#[test]
fn rebuild_and_redact_keep_the_shared_spaces_and_pending_tombstones() -> TestResult {
    let a = Machine::new()?;
    common::run_at(&a.db, ["add", "--session", "x", "--user", "redis lock", "--assistant", "SET NX"])?
        .ok()?;
    common::run_at(&a.db, ["add", "--session", "y", "--user", "kafka", "--assistant", "offsets"])?.ok()?;
    common::run_at(&a.db, ["sync", "share", "--space", "s", "--all"])?.ok()?;
    common::run_at(&a.db, ["forget", "--session", "y"])?.ok()?;
    for job in ["rebuild", "redact"] {
        common::run_at(&a.db, [job])?.ok()?;
        let status: Value = common::run_at(&a.db, ["--json", "sync", "status"])?.ok()?.json()?;
        assert!(status["spaces"]["s"].is_object(), "{job}: {status}");
        assert_eq!(status["tombstones"][0]["session"], "y", "{job}: {status}");
    }
    Ok(())
}

#[test]
fn a_hook_stop_event_pushes_in_the_background() -> TestResult {
    use std::io::Write;
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let a = Machine::new()?;
    let cwd = "/home/ann/repo";
    a.run(&server, &["sync", "share", "--space", "repo", "--project", cwd])?.ok()?;
    // A Claude Code transcript of one turn, as tests/hooks.rs writes them.
    let transcript = a.path("s1.jsonl");
    let mut lines = String::new();
    for (n, (role, message)) in [
        ("user", serde_json::json!({ "role": "user", "content": "how do I expire a redis lock?" })),
        ("assistant", serde_json::json!({
            "id": "msg_00000002", "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
            "content": [{ "type": "text", "text": "SET key value NX PX 30000" }], "stop_reason": null,
            "stop_sequence": null, "usage": { "input_tokens": 4, "output_tokens": 7 }
        })),
    ]
    .into_iter()
    .enumerate()
    {
        let n = n + 1;
        let line = serde_json::json!({
            "parentUuid": if n == 1 { Value::Null } else { serde_json::json!(format!("00000000-0000-4000-8000-{:012}", n - 1)) },
            "isSidechain": false, "userType": "external", "cwd": cwd, "sessionId": "s1", "version": "1.0.83",
            "gitBranch": "main", "type": role, "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            "timestamp": format!("2025-06-14T09:00:{n:02}.000Z"), "message": message,
        });
        lines.push_str(&format!("{line}\n"));
    }
    std::fs::write(&transcript, lines)?;
    let event = serde_json::json!({
        "session_id": "s1", "transcript_path": transcript, "cwd": cwd, "hook_event_name": "Stop",
        "permission_mode": "default", "stop_hook_active": false,
    });
    let mut child = a
        .command(&server, ADMIN, ADMIN_PASSWORD, &["hook", "claude-code"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("stdin")?.write_all(event.to_string().as_bytes())?;
    let output = child.wait_with_output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let start = Instant::now();
    while remote_counts(&server, "repo")?.1 == 0 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut client = server.admin();
    let row = client.query_one("SELECT session, user_text FROM ctxgate_turns WHERE space = 'repo'", &[])?;
    assert_eq!(
        (row.get::<_, String>(0), row.get::<_, String>(1)),
        ("s1".into(), "how do I expire a redis lock?".into())
    );
    Ok(())
}

#[test]
fn a_tampered_remote_turn_is_refused_and_the_turns_before_it_are_pulled() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    init(&server)?;
    let (a, b) = (Machine::new()?, Machine::new()?);
    let log = a.path("log.jsonl");
    write_log(&log, "t", 1, 5, 2)?;
    common::run_at(&a.db, ["import", log.to_str().ok_or("path")?])?.ok()?;
    for m in [&a, &b] {
        m.run(&server, &["sync", "share", "--space", "s", "--all"])?.ok()?;
    }
    a.sync(&server)?;
    server
        .admin()
        .execute("UPDATE ctxgate_turns SET user_text = 'changed behind ctxgate' WHERE turn_index = 3", &[])?;
    let report = b.sync(&server)?;
    let refused = &report["spaces"][0]["refused"][0];
    assert_eq!(refused["session"], "t0", "{report}");
    assert!(refused["reason"].as_str().unwrap_or("").contains("turn 3 does not chain"), "{report}");
    assert_eq!(b.sessions()?, vec![("t0".to_string(), 3)]);
    Ok(())
}

#[test]
fn tls_is_required_unless_the_url_says_otherwise() -> TestResult {
    let Some(server) = Server::start() else { return Ok(()) };
    // The test server has no TLS: a URL without sslmode is refused, not sent in plain text.
    let url = format!("postgres://{ADMIN}@127.0.0.1:{}/postgres", server.port);
    let run = common::Run::from_output(
        ctxgate().env("PGPASSWORD", ADMIN_PASSWORD).args(["sync", "init", "--remote", &url]).output()?,
    );
    assert_eq!(run.code, Some(1), "{run:?}");
    assert!(run.stderr.contains("cannot connect"), "{}", run.stderr);
    let mut admin = server.admin();
    let tables: i64 =
        admin.query_one("SELECT count(*) FROM pg_tables WHERE tablename = 'ctxgate_turns'", &[])?.get(0);
    assert_eq!(tables, 0, "nothing was created over the refused connection");
    let url = format!("{url}?sslmode=prefer");
    let run = common::Run::from_output(
        ctxgate().env("PGPASSWORD", ADMIN_PASSWORD).args(["sync", "init", "--remote", &url]).output()?,
    );
    run.ok()?;
    Ok(())
}
