//! `ctxgate hook`: the real binary driven as Claude Code and Codex drive a command hook (the
//! event JSON on stdin, built to the fields of their hook references; stdout parsed as they
//! parse it), on transcripts that grow between calls; the failures that must never fail the
//! agent; and `hook install|uninstall` on settings files with other hooks in them.

mod common;

use common::{Run, TestResult, ctxgate};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const PROJECT: &str = "/home/mei/src/ledger";

/// Turns on distinct topics: the one about the Redis lock answers [`PROMPT`].
const TURNS: [(&str, &str); 5] = [
    (
        "How should the worker take the Redis lock for the nightly ledger job?",
        "Take it with SET ledger-lock <token> NX PX 45000 and renew it every 15 seconds from a heartbeat task.",
    ),
    (
        "The asyncio client times out on slow reads, what now?",
        "Wrap the read in asyncio.wait_for with a 5 second timeout and retry twice.",
    ),
    (
        "Why is the postgres table bloated after the migration?",
        "Autovacuum was off for the ledger_entries table; run VACUUM (VERBOSE, ANALYZE) and turn it back on.",
    ),
    (
        "The docker build reinstalls every dependency each time.",
        "Copy requirements.txt and install before copying the source, so the layer is cached.",
    ),
    (
        "Rename the settlement module to clearing.",
        "Done: settlement.py is clearing.py and every import is updated.",
    ),
];

const PROMPT: &str = "What expiry did we give the Redis lock of the nightly job?";

/// The text of the turn that answers [`PROMPT`].
const ANSWER: &str = "NX PX 45000";

/// A Claude Code session file, one record per line, as Claude Code writes them (the fields of
/// fixtures/import/claude-code/session.jsonl).
struct ClaudeTranscript {
    path: PathBuf,
    session: String,
    cwd: String,
    records: usize,
}

/// A transcript the tests grow a message at a time.
trait Transcript {
    /// Appends one message of `role` (`user` or `assistant`).
    fn record(&mut self, role: &str, text: &str) -> TestResult;

    /// Appends a user message and its reply.
    fn turn(&mut self, user: &str, assistant: &str) -> TestResult {
        self.record("user", user)?;
        self.record("assistant", assistant)
    }
}

/// Appends `record` to the transcript at `path` as one JSON line, as the agents write them.
fn append_line(path: &Path, record: &Value) -> TestResult {
    let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    writeln!(file, "{record}")?;
    Ok(())
}

/// `event` with the fields of `extra` added (an event's own fields, such as `prompt`).
fn with_fields(mut event: Value, extra: Value) -> Value {
    if let (Some(event), Some(extra)) = (event.as_object_mut(), extra.as_object()) {
        event.extend(extra.clone());
    }
    event
}

impl ClaudeTranscript {
    fn new(dir: &Path, session: &str, cwd: &str) -> ClaudeTranscript {
        let path = dir.join(format!("{session}.jsonl"));
        ClaudeTranscript { path, session: session.into(), cwd: cwd.into(), records: 0 }
    }

    fn event(&self, name: &str, extra: Value) -> Value {
        let event = json!({
            "session_id": self.session, "transcript_path": self.path, "cwd": self.cwd,
            "hook_event_name": name, "permission_mode": "default",
        });
        with_fields(event, extra)
    }
}

impl Transcript for ClaudeTranscript {
    fn record(&mut self, role: &str, text: &str) -> TestResult {
        self.records += 1;
        let n = self.records;
        let message = match role {
            "user" => json!({ "role": "user", "content": text }),
            _ => json!({
                "id": format!("msg_{n:08}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-20250514",
                "content": [{ "type": "text", "text": text }], "stop_reason": null, "stop_sequence": null,
                "usage": { "input_tokens": 4, "output_tokens": 7 }
            }),
        };
        let line = json!({
            "parentUuid": if n == 1 { Value::Null } else { json!(format!("00000000-0000-4000-8000-{:012}", n - 1)) },
            "isSidechain": false, "userType": "external", "cwd": self.cwd, "sessionId": self.session,
            "version": "1.0.83", "gitBranch": "main", "type": role,
            "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            "timestamp": format!("2025-06-14T09:{:02}:{:02}.000Z", n / 60, n % 60),
            "message": message,
        });
        append_line(&self.path, &line)
    }
}

/// A Codex rollout: `session_meta`, then `response_item` messages (the fields of
/// fixtures/import/codex/rollout-*.jsonl).
struct CodexRollout {
    path: PathBuf,
    session: String,
    cwd: String,
    records: usize,
}

impl CodexRollout {
    fn new(dir: &Path, session: &str, cwd: &str) -> Result<CodexRollout, Box<dyn std::error::Error>> {
        let path = dir.join(format!("rollout-2025-10-02T07-00-00-{session}.jsonl"));
        let meta = json!({
            "timestamp": "2025-10-02T07:00:00.000Z", "type": "session_meta",
            "payload": { "id": session, "timestamp": "2025-10-02T07:00:00.000Z", "cwd": cwd, "originator": "codex_cli_rs", "cli_version": "0.44.0", "source": "cli" }
        });
        std::fs::write(&path, format!("{meta}\n"))?;
        Ok(CodexRollout { path, session: session.into(), cwd: cwd.into(), records: 0 })
    }

    fn event(&self, name: &str, extra: Value) -> Value {
        let event = json!({
            "session_id": self.session, "transcript_path": self.path, "cwd": self.cwd,
            "hook_event_name": name, "model": "gpt-5-codex",
        });
        with_fields(event, extra)
    }
}

impl Transcript for CodexRollout {
    fn record(&mut self, role: &str, text: &str) -> TestResult {
        self.records += 1;
        let kind = if role == "user" { "input_text" } else { "output_text" };
        let line = json!({
            "timestamp": format!("2025-10-02T07:{:02}:{:02}.000Z", self.records / 60, self.records % 60),
            "type": "response_item",
            "payload": { "type": "message", "role": role, "content": [{ "type": kind, "text": text }] }
        });
        append_line(&self.path, &line)
    }
}

/// What a hook process left, and how long it took.
struct HookRun {
    run: Run,
    elapsed: Duration,
}

/// A deadline no hook in these tests comes near, for the runs that must finish their work: the
/// 2 s default is the agent's budget, not a bound on a debug build beside other tests on a
/// loaded machine. The deadline itself is tested with short ones given explicitly.
const UNHURRIED: &str = "60000";

/// Runs `ctxgate --db DB hook AGENT ARGS` with `stdin` as the agent writes it, with the
/// [`UNHURRIED`] deadline unless `args` give one.
fn hook(db: &Path, agent: &str, stdin: &[u8], args: &[&str]) -> Result<HookRun, Box<dyn std::error::Error>> {
    let started = Instant::now();
    let given = args.iter().any(|a| a.starts_with("--deadline-ms"));
    let deadline: &[&str] = if given { &[] } else { &["--deadline-ms", UNHURRIED] };
    let mut child = ctxgate()
        .arg("--db")
        .arg(db)
        .args(["hook", agent])
        .args(args)
        .args(deadline)
        .env_remove("CTXGATE_HOOK_DEADLINE_MS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("no stdin")?.write_all(stdin)?;
    let output = child.wait_with_output()?;
    Ok(HookRun { run: Run::from_output(output), elapsed: started.elapsed() })
}

/// The context as the agent reads it: exit 0, stdout empty (no context) or one JSON object
/// whose `hookSpecificOutput` names the event and holds `additionalContext`.
fn context(run: &HookRun, event: &str) -> Result<Option<String>, Box<dyn std::error::Error>> {
    if run.run.code != Some(0) {
        return Err(format!("the hook exited {:?}: {:#?}", run.run.code, run.run).into());
    }
    if run.run.stdout.trim().is_empty() {
        return Ok(None);
    }
    let doc: Value = serde_json::from_str(&run.run.stdout)?;
    let output = &doc["hookSpecificOutput"];
    assert_eq!(output["hookEventName"], event, "{doc:#}");
    let text =
        output["additionalContext"].as_str().ok_or_else(|| format!("no additionalContext: {doc:#}"))?;
    Ok(Some(text.to_string()))
}

fn expect_context(run: &HookRun, event: &str) -> Result<String, Box<dyn std::error::Error>> {
    context(run, event)?.ok_or_else(|| format!("no context: {:#?}", run.run).into())
}

/// Turn counts per session, from `sessions --json`.
fn turn_counts(db: &Path) -> Result<Vec<(String, u64)>, Box<dyn std::error::Error>> {
    let run = common::run_at(db, ["--json", "sessions"])?.ok()?;
    let doc: Value = serde_json::from_str(&run.stdout)?;
    let sessions = doc["sessions"].as_array().ok_or("no sessions array")?;
    Ok(sessions
        .iter()
        .map(|s| {
            (s["name"].as_str().unwrap_or_default().to_string(), s["turns"].as_u64().unwrap_or_default())
        })
        .collect())
}

fn bytes(event: &Value) -> Vec<u8> {
    event.to_string().into_bytes()
}

#[test]
fn claude_code_prompt_gets_the_turn_that_answers_it_and_imports_only_new_turns() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut transcript = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-000000000001", PROJECT);
    for (user, assistant) in TURNS {
        transcript.turn(user, assistant)?;
    }
    // Claude Code has written the prompt before the hook runs; its reply is still to come.
    transcript.record("user", PROMPT)?;
    let event = transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT }));

    let run = hook(&db, "claude-code", &bytes(&event), &[])?;
    let text = expect_context(&run, "UserPromptSubmit")?;
    assert!(text.contains(ANSWER), "{text}");
    assert!(!text.contains("VACUUM"), "an unrelated turn came along:\n{text}");
    let name = format!("{PROJECT}#{}", transcript.session);
    assert_eq!(turn_counts(&db)?, [(name.clone(), 5)], "the unanswered prompt is held back");

    transcript
        .record("assistant", "The lock expires after 45 seconds (PX 45000) and is renewed every 15.")?;
    transcript.turn(
        "Make the ledger export write CSV with a header row.",
        "The export now writes a header row first.",
    )?;
    let second = "Does the CSV export quote the header row?";
    transcript.record("user", second)?;
    let run = hook(
        &db,
        "claude-code",
        &bytes(&transcript.event("UserPromptSubmit", json!({ "prompt": second }))),
        &[],
    )?;
    let text = expect_context(&run, "UserPromptSubmit")?;
    assert!(text.contains("header row first"), "{text}");
    assert_eq!(turn_counts(&db)?, [(name, 7)], "only the two new turns were added");

    // Stop after the reply: imported, nothing printed.
    transcript.record("assistant", "Yes: every field of the header row is quoted.")?;
    let run = hook(
        &db,
        "claude-code",
        &bytes(&transcript.event("Stop", json!({ "stop_hook_active": false }))),
        &[],
    )?;
    assert_eq!(context(&run, "Stop")?, None);
    assert_eq!(turn_counts(&db)?[0].1, 8);
    Ok(())
}

#[test]
fn the_hook_counts_its_budget_in_o200k_tokens_by_default() -> TestResult {
    use ctxgate::tokens::{TokenEstimator, Tokenizer};
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut transcript = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-0000000000aa", PROJECT);
    for i in 0..12 {
        transcript.turn(
            &format!("How long should the Redis lock of nightly job {i} live, and who renews it?"),
            &format!(
                "Give job {i} the lock with SET ledger-lock-{i} <token> NX PX 45000. A heartbeat task renews \
                 it every 15 seconds, and the job releases it with a compare-and-delete script when it ends."
            ),
        )?;
    }
    transcript.record("user", PROMPT)?;
    let event = bytes(&transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT })));
    let budget = 300;
    let default =
        expect_context(&hook(&db, "claude-code", &event, &["--budget", "300"])?, "UserPromptSubmit")?;
    assert!(default.contains(ANSWER), "{default}");
    assert!(Tokenizer::O200k.estimate(&default) <= budget, "{default}");
    assert!(
        Tokenizer::Chars.estimate(&default) > budget,
        "the hook counted characters x 1.5, not o200k tokens: {default}"
    );
    // Told to count characters x 1.5, the same hook keeps to that count.
    let chars_db = dir.path().join("chars.redb");
    let run = hook(&chars_db, "claude-code", &event, &["--tokenizer", "chars", "--budget", "300"])?;
    if let Some(chars) = context(&run, "UserPromptSubmit")? {
        assert!(Tokenizer::Chars.estimate(&chars) <= budget, "{chars}");
    }
    Ok(())
}

/// The evidence refs of the index, from `evidence list --json`.
fn evidence_refs(db: &Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let run = common::run_at(db, ["--json", "evidence", "list"])?.ok()?;
    let doc: Value = serde_json::from_str(&run.stdout)?;
    let documents = doc["documents"].as_array().ok_or("no documents")?;
    Ok(documents.iter().filter_map(|d| d["evidence_ref"].as_str().map(str::to_string)).collect())
}

#[test]
fn tool_results_become_evidence_on_stop_not_on_the_prompt() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut transcript = ClaudeTranscript::new(dir.path(), "9999-tools", PROJECT);
    transcript.turn(TURNS[0].0, TURNS[0].1)?;
    let call = json!({ "role": "assistant", "type": "message",
        "content": [{ "type": "tool_use", "id": "toolu_01Ledger", "name": "Bash", "input": { "command": "cargo test" } }] });
    let result = json!({ "role": "user",
        "content": [{ "type": "tool_result", "tool_use_id": "toolu_01Ledger", "content": "test ledger::lock ... ok", "is_error": false }] });
    transcript.record("user", "Run the ledger tests.")?;
    for (role, message) in [("assistant", call), ("user", result)] {
        transcript.records += 1;
        let n = transcript.records;
        // Each record names its parent, as Claude Code writes them (the importer follows the chain).
        let line = json!({ "isSidechain": false, "cwd": PROJECT, "sessionId": transcript.session, "type": role,
            "parentUuid": format!("00000000-0000-4000-8000-{:012}", n - 1),
            "uuid": format!("00000000-0000-4000-8000-{n:012}"), "timestamp": "2025-06-14T10:00:00.000Z", "message": message });
        append_line(&transcript.path, &line)?;
    }
    transcript.record("assistant", "All ledger tests pass.")?;
    transcript.record("user", PROMPT)?;
    let run = hook(
        &db,
        "claude-code",
        &bytes(&transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT }))),
        &[],
    )?;
    assert!(expect_context(&run, "UserPromptSubmit")?.contains(ANSWER));
    assert_eq!(turn_counts(&db)?[0].1, 2);
    assert_eq!(evidence_refs(&db)?, Vec::<String>::new(), "the prompt hook stores no evidence");
    transcript.record("assistant", "45 seconds.")?;
    hook(&db, "claude-code", &bytes(&transcript.event("Stop", json!({}))), &[])?;
    let refs = evidence_refs(&db)?;
    assert_eq!(refs.len(), 1, "{refs:?}");
    assert!(refs[0].ends_with("toolu_01Ledger.txt"), "{refs:?}");
    Ok(())
}

#[test]
fn after_compact_the_requests_come_back_in_order() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    // One agent session each: a session is not given the same requests twice.
    for source in ["compact", "resume"] {
        let mut transcript = ClaudeTranscript::new(dir.path(), &format!("5b7c-{source}"), PROJECT);
        for (user, assistant) in TURNS {
            transcript.turn(user, assistant)?;
        }
        let event = transcript.event("SessionStart", json!({ "source": source }));
        let text = expect_context(
            &hook(&db, "claude-code", &bytes(&event), &["--budget", "4000"])?,
            "SessionStart",
        )?;
        let mut at = 0;
        for (i, (user, _)) in TURNS.iter().enumerate() {
            let found = text[at..]
                .find(user)
                .ok_or_else(|| format!("{source}: request {i} missing or out of order:\n{text}"))?;
            at += found + user.len();
        }
        // The latest request's answer comes with it.
        assert!(text.contains("every import is updated"), "{source}:\n{text}");
    }
    // A fresh start gets nothing.
    let transcript = ClaudeTranscript::new(dir.path(), "5b7c-startup", PROJECT);
    let event = transcript.event("SessionStart", json!({ "source": "startup" }));
    assert_eq!(context(&hook(&db, "claude-code", &bytes(&event), &[])?, "SessionStart")?, None);
    Ok(())
}

#[test]
fn requests_that_do_not_fit_keep_the_first_and_the_latest() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut transcript = ClaudeTranscript::new(dir.path(), "long-session", PROJECT);
    for i in 0..40 {
        transcript.turn(
            &format!("Request number {i}: adjust invoice rounding rule r{i} for the ledger."),
            &format!("Adjusted rule r{i}."),
        )?;
    }
    let event = transcript.event("SessionStart", json!({ "source": "compact" }));
    let text =
        expect_context(&hook(&db, "claude-code", &bytes(&event), &["--budget", "1500"])?, "SessionStart")?;
    assert!(text.contains("Request number 0:"), "{text}");
    assert!(text.contains("Request number 39:"), "{text}");
    assert!(text.contains("requests left out to fit"), "{text}");
    let first = text.find("Request number 0:").ok_or("first")?;
    let latest = text.find("Request number 39:").ok_or("latest")?;
    assert!(first < latest, "{text}");
    // The hooks count in o200k tokens: the whole text fits the budget.
    use ctxgate::tokens::{TokenEstimator, Tokenizer};
    assert!(Tokenizer::O200k.estimate(&text) <= 1500, "{text}");
    Ok(())
}

#[test]
fn other_sessions_of_the_project_come_labelled_and_other_projects_stay_out() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut earlier = ClaudeTranscript::new(dir.path(), "aaaa-earlier", PROJECT);
    for (user, assistant) in TURNS {
        earlier.turn(user, assistant)?;
    }
    hook(&db, "claude-code", &bytes(&earlier.event("SessionEnd", json!({ "reason": "exit" }))), &[])?;
    let mut elsewhere = ClaudeTranscript::new(dir.path(), "cccc-elsewhere", "/home/mei/src/other");
    elsewhere.turn(
        "How long should the Redis lock of the nightly job live?",
        "In the other project it is PX 99000.",
    )?;
    hook(&db, "claude-code", &bytes(&elsewhere.event("Stop", json!({}))), &[])?;

    let mut now = ClaudeTranscript::new(dir.path(), "bbbb-now", PROJECT);
    now.turn(
        "Add a --dry-run flag to the ledger CLI.",
        "Added --dry-run: it prints the entries and writes nothing.",
    )?;
    now.record("user", PROMPT)?;
    let run =
        hook(&db, "claude-code", &bytes(&now.event("UserPromptSubmit", json!({ "prompt": PROMPT }))), &[])?;
    let text = expect_context(&run, "UserPromptSubmit")?;
    let label = text
        .find("session aaaa-earlier · 2025-06-14T09:00:01.000Z · turn 0")
        .ok_or_else(|| format!("no label:\n{text}"))?;
    let answer = text.find(ANSWER).ok_or_else(|| format!("no answer:\n{text}"))?;
    assert!(label < answer, "{text}");
    assert!(!text.contains("99000"), "another project's session came along:\n{text}");
    Ok(())
}

#[test]
fn codex_prompt_and_post_compact() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut rollout = CodexRollout::new(dir.path(), "0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", PROJECT)?;
    for (user, assistant) in TURNS {
        rollout.turn(user, assistant)?;
    }
    rollout.record("user", PROMPT)?;
    let run = hook(
        &db,
        "codex",
        &bytes(&rollout.event("UserPromptSubmit", json!({ "prompt": PROMPT, "turn_id": "t1" }))),
        &[],
    )?;
    let text = expect_context(&run, "UserPromptSubmit")?;
    assert!(text.contains(ANSWER), "{text}");
    let name = format!("{PROJECT}#{}", rollout.session);
    assert_eq!(turn_counts(&db)?, [(name.clone(), 5)]);

    rollout.record("assistant", "45 seconds, renewed every 15.")?;
    let run = hook(&db, "codex", &bytes(&rollout.event("Stop", json!({ "turn_id": "t1" }))), &[])?;
    assert_eq!(context(&run, "Stop")?, None);
    assert_eq!(turn_counts(&db)?, [(name, 6)]);

    // Issue 50, item 6: Codex fails a PostCompact hook whose output has `hookSpecificOutput`
    // (its schema takes none): PostCompact imports and prints nothing; the SessionStart of
    // source `compact` that follows gives the requests back.
    let post = fixture_event("codex/post-compact.json", &rollout.session, &rollout.path)?;
    let run = hook(&db, "codex", &bytes(&post), &["--budget", "4000"])?;
    assert_eq!(run.run.code, Some(0), "{:#?}", run.run);
    assert_eq!(run.run.stdout, "", "PostCompact output must be empty for Codex");
    let start = rollout.event("SessionStart", json!({ "source": "compact" }));
    let run = hook(&db, "codex", &bytes(&start), &["--budget", "4000"])?;
    let text = expect_context(&run, "SessionStart")?;
    let mut at = 0;
    for user in TURNS.iter().map(|(u, _)| *u).chain([PROMPT]) {
        at += text[at..].find(user).ok_or_else(|| format!("{user:?} missing or out of order:\n{text}"))?
            + user.len();
    }
    Ok(())
}

/// A recorded hook payload of fixtures/hooks/ with its session and transcript replaced.
fn fixture_event(name: &str, session: &str, transcript: &Path) -> Result<Value, Box<dyn std::error::Error>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/hooks").join(name);
    let mut event: Value = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    event["session_id"] = json!(session);
    event["transcript_path"] = json!(transcript);
    event["cwd"] = json!(PROJECT);
    Ok(event)
}

/// Issue 50, item 1: Claude Code writes a new session's transcript after the first
/// `UserPromptSubmit` has run; the hook reads a missing transcript as an empty one and gives
/// the project's other sessions.
#[test]
fn r50_a_new_session_without_its_transcript_gets_other_sessions() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut earlier = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-0000000000e1", PROJECT);
    for (user, assistant) in TURNS {
        earlier.turn(user, assistant)?;
    }
    hook(&db, "claude-code", &bytes(&earlier.event("Stop", json!({}))), &[])?;
    let new_session = "3f6a2b1c-0000-4000-8000-0000000000e2";
    let missing = dir.path().join(format!("{new_session}.jsonl"));
    let event = fixture_event("claude-code/user-prompt-submit-new-session.json", new_session, &missing)?;
    assert_eq!(event["prompt"], PROMPT, "the fixture's prompt");
    let run = hook(&db, "claude-code", &bytes(&event), &[])?;
    let text = expect_context(&run, "UserPromptSubmit")?;
    assert!(text.contains(ANSWER), "{text}");
    assert!(text.contains("other sessions of this project"), "{text}");
    assert!(!run.run.stderr.contains("cannot read"), "{}", run.run.stderr);
    Ok(())
}

/// Exit 0, nothing on stdout, a message on stderr naming `what`, and no hang: the wall clock
/// only guards against one (a loaded machine can stall a process start-up for seconds); that
/// the deadline was kept is [`expect_given_up_within`]'s to check.
fn expect_quiet_failure(run: &HookRun, deadline: Duration, what: &str) -> TestResult {
    assert_eq!(run.run.code, Some(0), "{what}: {:#?}", run.run);
    assert_eq!(run.run.stdout, "", "{what}: context printed");
    assert!(run.run.stderr.contains(what), "{what}: stderr is {:?}", run.run.stderr);
    assert!(run.elapsed < deadline + Duration::from_secs(10), "{what}: took {:?}", run.elapsed);
    Ok(())
}

/// The hook, facing an index another writer holds, gave up by `deadline`, as its own message
/// says: either at the deadline itself, or busy after waiting less than it (an ignored
/// deadline shows as the 2 s default's, or a wait of 1.5 s).
fn expect_given_up_within(run: &HookRun, deadline: Duration) {
    let stderr = &run.run.stderr;
    let at_deadline = stderr.contains(&format!("the deadline of {} ms", deadline.as_millis()));
    let waited = stderr
        .split_once("(waited ")
        .and_then(|(_, rest)| rest.split_once(" s)"))
        .and_then(|(seconds, _)| seconds.parse::<f64>().ok());
    // The wait is printed to a tenth of a second.
    let busy_in_time = waited.is_some_and(|seconds| seconds < deadline.as_secs_f64() + 0.1);
    assert!(at_deadline || busy_in_time, "gave up later than {deadline:?}: {stderr:?}");
}

#[test]
fn failures_give_no_context_exit_0_and_a_message() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = ClaudeTranscript::new(dir.path(), "ffff-fail", PROJECT);
    for (user, assistant) in TURNS {
        transcript.turn(user, assistant)?;
    }
    let prompt = bytes(&transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT })));
    let deadline = Duration::from_millis(800);
    let args = ["--deadline-ms", "800"];

    let db = dir.path().join("index.redb");
    for (stdin, what) in [
        (&b"{not json"[..], "invalid hook event"),
        (&b""[..], "invalid hook event"),
        (&b"[1,2]"[..], "invalid hook event"),
    ] {
        expect_quiet_failure(&hook(&db, "claude-code", stdin, &args)?, deadline, what)?;
    }
    let log = std::fs::read_to_string(dir.path().join("hook.log"))?;
    assert_eq!(log.lines().filter(|l| l.contains("invalid hook event")).count(), 3, "{log}");

    // A missing transcript is an empty one (r50_a_new_session_without_its_transcript_gets_other_sessions);
    // one that is not a transcript fails quietly.
    let mut bad = transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT }));
    std::fs::write(dir.path().join("bad.jsonl"), "{not a transcript\n")?;
    bad["transcript_path"] = json!(dir.path().join("bad.jsonl"));
    expect_quiet_failure(&hook(&db, "claude-code", &bytes(&bad), &args)?, deadline, "bad.jsonl")?;

    let broken = dir.path().join("broken.redb");
    std::fs::write(&broken, vec![0xA5u8; 64 * 1024])?;
    expect_quiet_failure(&hook(&broken, "claude-code", &prompt, &args)?, deadline, "broken.redb")?;

    // A busy index: another writer is in the middle of a transaction past the deadline.
    let busy = dir.path().join("busy.redb");
    let holder = common::WriteHold::begin(&busy)?;
    let run = hook(&busy, "claude-code", &prompt, &args)?;
    expect_quiet_failure(&run, deadline, "no context given")?;
    expect_given_up_within(&run, deadline);
    drop(holder);
    // Released, the same event gets its context.
    assert!(expect_context(&hook(&busy, "claude-code", &prompt, &[])?, "UserPromptSubmit")?.contains(ANSWER));
    Ok(())
}

#[test]
fn a_clear_brings_back_the_previous_session_of_the_project() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut before = ClaudeTranscript::new(dir.path(), "dddd-before-clear", PROJECT);
    for (user, assistant) in TURNS {
        before.turn(user, assistant)?;
    }
    hook(&db, "claude-code", &bytes(&before.event("Stop", json!({}))), &[])?;
    // `/clear` starts a new session id whose transcript has nothing yet.
    let mut after = ClaudeTranscript::new(dir.path(), "dddd-after-clear", PROJECT);
    after.record("user", "<command-name>/clear</command-name>")?;
    let event = after.event("SessionStart", json!({ "source": "clear" }));
    let text =
        expect_context(&hook(&db, "claude-code", &bytes(&event), &["--budget", "4000"])?, "SessionStart")?;
    assert!(text.contains("previous session of this project (dddd-before-clear"), "{text}");
    let mut at = 0;
    for (user, _) in TURNS {
        at += text[at..].find(user).ok_or_else(|| format!("{user:?} missing or out of order:\n{text}"))?
            + user.len();
    }
    Ok(())
}

#[test]
fn the_deadline_comes_from_the_environment_too() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let event = json!({ "session_id": "s", "transcript_path": null, "cwd": PROJECT, "hook_event_name": "UserPromptSubmit", "prompt": PROMPT });
    let holder = common::WriteHold::begin(&db)?;
    let started = Instant::now();
    let mut child = ctxgate()
        .arg("--db")
        .arg(&db)
        .args(["hook", "codex"])
        .env("CTXGATE_HOOK_DEADLINE_MS", "300")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().ok_or("stdin")?.write_all(&bytes(&event))?;
    let run = HookRun { run: Run::from_output(child.wait_with_output()?), elapsed: started.elapsed() };
    expect_quiet_failure(&run, Duration::from_millis(300), "no context given")?;
    expect_given_up_within(&run, Duration::from_millis(300));
    drop(holder);

    let mut child = ctxgate()
        .arg("--db")
        .arg(&db)
        .args(["hook", "codex"])
        .env("CTXGATE_HOOK_DEADLINE_MS", "-5")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("stdin")?
        .write_all(&bytes(&json!({ "session_id": "s", "hook_event_name": "Stop" })))?;
    let run = Run::from_output(child.wait_with_output()?);
    assert_eq!(run.code, Some(0), "{run:#?}");
    assert!(run.stderr.contains("CTXGATE_HOOK_DEADLINE_MS \"-5\""), "{}", run.stderr);
    Ok(())
}

#[test]
fn a_bad_deadline_is_reported_not_fatal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let event =
        json!({ "session_id": "s", "transcript_path": null, "cwd": PROJECT, "hook_event_name": "Stop" });
    let run = hook(&db, "codex", &bytes(&event), &["--deadline-ms", "soon"])?;
    assert_eq!(run.run.code, Some(0), "{:#?}", run.run);
    assert_eq!(run.run.stdout, "");
    assert!(run.run.stderr.contains("--deadline-ms \"soon\""), "{}", run.run.stderr);
    Ok(())
}

/// `ctxgate hook install|uninstall ...` with HOME and the working directory given.
fn settings_cmd(
    db: &Path,
    home: &Path,
    project: &Path,
    args: &[&str],
) -> Result<Run, Box<dyn std::error::Error>> {
    let output = ctxgate()
        .arg("--db")
        .arg(db)
        .arg("hook")
        .args(args)
        .env("HOME", home)
        .current_dir(project)
        .output()?;
    Ok(Run::from_output(output))
}

fn backups(dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.file_name().is_some_and(|n| n.to_string_lossy().contains(".ctxgate-backup")) {
            found.push(path);
        }
    }
    Ok(found)
}

/// The commands of every handler of `event`.
fn commands(settings: &Value, event: &str) -> Vec<String> {
    settings["hooks"][event]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["hooks"].as_array().into_iter().flatten())
        .filter_map(|h| h["command"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn install_merges_once_keeps_other_hooks_backs_up_and_uninstalls_only_ours() -> TestResult {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    let project = dir.path().join("project");
    std::fs::create_dir_all(project.join(".claude"))?;
    std::fs::create_dir_all(&home)?;
    let db = dir.path().join("index.redb");
    let settings_path = project.join(".claude").join("settings.json");
    let original = json!({
        "permissions": { "allow": ["Bash(cargo test:*)"] },
        "hooks": {
            "PreToolUse": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": "./check-bash.sh" }] }],
            "UserPromptSubmit": [{ "hooks": [{ "type": "command", "command": "date +%F" }] }]
        }
    });
    let original_text = serde_json::to_string_pretty(&original)?;
    std::fs::write(&settings_path, &original_text)?;

    let dry =
        settings_cmd(&db, &home, &project, &["install", "claude-code", "--project", "--dry-run"])?.ok()?;
    assert!(dry.stdout.contains("added UserPromptSubmit"), "{}", dry.stdout);
    assert_eq!(std::fs::read_to_string(&settings_path)?, original_text, "--dry-run wrote");
    assert!(backups(&project.join(".claude"))?.is_empty());

    settings_cmd(&db, &home, &project, &["install", "claude-code", "--project"])?.ok()?;
    let again = settings_cmd(&db, &home, &project, &["install", "claude-code", "--project"])?.ok()?;
    assert!(again.stdout.contains("already"), "{}", again.stdout);
    let installed: Value = serde_json::from_str(&std::fs::read_to_string(&settings_path)?)?;
    assert_eq!(installed["permissions"], original["permissions"]);
    assert_eq!(commands(&installed, "PreToolUse"), ["./check-bash.sh"]);
    for event in ["UserPromptSubmit", "SessionStart", "Stop", "SessionEnd"] {
        let ours: Vec<String> =
            commands(&installed, event).into_iter().filter(|c| c.ends_with("hook claude-code")).collect();
        assert_eq!(ours.len(), 1, "{event}: {installed:#}");
    }
    assert_eq!(commands(&installed, "UserPromptSubmit")[0], "date +%F", "the other hook stays first");
    assert_eq!(installed["hooks"]["SessionStart"][0]["matcher"], "resume|clear|compact");
    let backups_now = backups(&project.join(".claude"))?;
    assert_eq!(backups_now.len(), 1, "one backup: the second install changed nothing");
    assert_eq!(std::fs::read_to_string(&backups_now[0])?, original_text);

    // The installed command is the hook: run it as Claude Code would, through a shell.
    let mut transcript = ClaudeTranscript::new(dir.path(), "eeee-installed", PROJECT);
    for (user, assistant) in TURNS {
        transcript.turn(user, assistant)?;
    }
    let command = commands(&installed, "UserPromptSubmit").pop().ok_or("no command")?;
    let mut child = std::process::Command::new("sh")
        .args(["-c", &command])
        .env("CTXGATE_HOOK_DEADLINE_MS", UNHURRIED)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child
        .stdin
        .take()
        .ok_or("stdin")?
        .write_all(&bytes(&transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT }))))?;
    let run = HookRun { run: Run::from_output(child.wait_with_output()?), elapsed: Duration::ZERO };
    assert!(expect_context(&run, "UserPromptSubmit")?.contains(ANSWER));

    settings_cmd(&db, &home, &project, &["uninstall", "claude-code", "--project"])?.ok()?;
    let after: Value = serde_json::from_str(&std::fs::read_to_string(&settings_path)?)?;
    assert_eq!(after, original, "uninstall left exactly the other hooks");
    assert_eq!(backups(&project.join(".claude"))?.len(), 2, "uninstall backed up the file too");
    let none = settings_cmd(&db, &home, &project, &["uninstall", "claude-code", "--project"])?.ok()?;
    assert!(none.stdout.contains("nothing written"), "{}", none.stdout);
    Ok(())
}

#[test]
fn install_for_the_user_and_for_codex() -> TestResult {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let db = dir.path().join("index.redb");
    settings_cmd(&db, &home, dir.path(), &["install", "claude-code"])?.ok()?;
    let claude: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".claude/settings.json"))?)?;
    assert_eq!(commands(&claude, "UserPromptSubmit").len(), 1);
    assert!(backups(&home.join(".claude"))?.is_empty(), "no file before: nothing to back up");

    settings_cmd(&db, &home, dir.path(), &["install", "codex", "--user"])?.ok()?;
    let codex: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json"))?)?;
    for event in ["UserPromptSubmit", "SessionStart", "PostCompact", "Stop"] {
        let ours = commands(&codex, event);
        assert_eq!(ours.len(), 1, "{event}: {codex:#}");
        assert!(ours[0].ends_with("hook codex"), "{ours:?}");
    }
    // A settings file that is not JSON is refused, and left as it was.
    std::fs::write(home.join(".codex/hooks.json"), "{ broken")?;
    let run = settings_cmd(&db, &home, dir.path(), &["install", "codex"])?;
    assert_eq!(run.code, Some(1), "{run:#?}");
    assert!(run.stderr.contains("not valid JSON"), "{}", run.stderr);
    assert_eq!(std::fs::read_to_string(home.join(".codex/hooks.json"))?, "{ broken");
    Ok(())
}

/// Issue 50, item 10: installed from a binary under another name (a copy, a hard link), the
/// install adds its handlers once and the uninstall finds them.
#[test]
fn r50_install_from_a_binary_under_another_name() -> TestResult {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR"))?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let renamed = dir.path().join("ctxg-dev");
    let original = Path::new(env!("CARGO_BIN_EXE_ctxgate"));
    if std::fs::hard_link(original, &renamed).is_err() {
        std::fs::copy(original, &renamed)?;
    }
    let db = dir.path().join("index.redb");
    let run = |args: &[&str]| -> Result<Run, Box<dyn std::error::Error>> {
        let output = std::process::Command::new(&renamed)
            .arg("--db")
            .arg(&db)
            .arg("hook")
            .args(args)
            .env("HOME", &home)
            .current_dir(dir.path())
            .output()?;
        Ok(Run::from_output(output))
    };
    run(&["install", "codex"])?.ok()?;
    let again = run(&["install", "codex"])?.ok()?;
    assert!(again.stdout.contains("already"), "{}", again.stdout);
    let codex: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json"))?)?;
    for event in ["UserPromptSubmit", "SessionStart", "PostCompact", "Stop"] {
        assert_eq!(commands(&codex, event).len(), 1, "{event}: {codex:#}");
    }
    let removed = run(&["uninstall", "codex"])?.ok()?;
    assert!(removed.stdout.contains("removed UserPromptSubmit"), "{}", removed.stdout);
    let after: Value = serde_json::from_str(&std::fs::read_to_string(home.join(".codex/hooks.json"))?)?;
    assert_eq!(after, json!({}), "{after:#}");
    Ok(())
}

/// Issue 50, items 3, 4 and 7: a resume gives back the request that was never answered; what
/// the resume gave is not given again by the prompt after it. A compaction rebuilds the model's
/// window without it, so its recovery gives the requests back (even those the resume gave), and
/// the prompt after the compaction repeats nothing the recovery gave.
#[test]
fn r50_a_resume_gives_the_unanswered_request_and_nothing_twice() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut transcript = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-0000000000f1", PROJECT);
    for (user, assistant) in TURNS {
        transcript.turn(user, assistant)?;
    }
    hook(&db, "claude-code", &bytes(&transcript.event("Stop", json!({}))), &[])?;
    // The session ended before this request had its reply.
    let unanswered =
        "Should the heartbeat that renews the Redis lock of the nightly job run every 10 seconds?";
    transcript.record("user", unanswered)?;
    let resume = transcript.event("SessionStart", json!({ "source": "resume" }));
    let start = expect_context(&hook(&db, "claude-code", &bytes(&resume), &[])?, "SessionStart")?;
    let mut at = 0;
    for user in TURNS.iter().map(|(u, _)| *u).chain([unanswered]) {
        at += start[at..].find(user).ok_or_else(|| format!("{user:?} missing or out of order:\n{start}"))?
            + user.len();
    }
    assert!(start.contains("not answered yet"), "{start}");
    assert!(start.contains(ANSWER), "the turn that bears on the latest request:\n{start}");

    // The first prompt after the resume: the Redis turn went into this session already.
    transcript.record("user", PROMPT)?;
    let prompt = transcript.event("UserPromptSubmit", json!({ "prompt": PROMPT }));
    let run = hook(&db, "claude-code", &bytes(&prompt), &[])?;
    if let Some(text) = context(&run, "UserPromptSubmit")? {
        assert!(!text.contains(ANSWER), "a turn given on resume was given again:\n{text}");
    }
    // A compaction after that: what the resume gave is gone from the window, and the recovery
    // gives the requests back, in order, with the turn that bears on them.
    transcript.record("assistant", "Every 15 seconds is enough: the lock lives 45.")?;
    let compact = transcript.event("SessionStart", json!({ "source": "compact" }));
    let recovered = expect_context(&hook(&db, "claude-code", &bytes(&compact), &[])?, "SessionStart")?;
    let mut at = 0;
    for user in TURNS.iter().map(|(u, _)| *u).chain([unanswered]) {
        at += recovered[at..]
            .find(user)
            .ok_or_else(|| format!("{user:?} missing or out of order after the compaction:\n{recovered}"))?
            + user.len();
    }
    assert!(!recovered.contains("given earlier"), "nothing is held back as given:\n{recovered}");
    assert_eq!(recovered.matches("the user's requests").count(), 1, "{recovered}");
    let replies: Vec<&str> = recovered.lines().filter(|l| l.starts_with("Assistant: ")).collect();
    assert!(!replies.is_empty(), "the turns that bear on the latest request:\n{recovered}");
    // The prompt after the compaction, in the same window: neither the requests list nor the
    // turn the recovery gave comes again.
    let again = "And the Redis lock of the nightly job: which expiry did we settle on?";
    transcript.record("user", again)?;
    let prompt = transcript.event("UserPromptSubmit", json!({ "prompt": again }));
    let run = hook(&db, "claude-code", &bytes(&prompt), &[])?;
    if let Some(text) = context(&run, "UserPromptSubmit")? {
        assert!(!text.contains("the user's requests"), "the requests list came twice:\n{text}");
        for reply in &replies {
            assert!(!text.contains(reply), "a turn the recovery gave was given again:\n{text}");
        }
    }
    // What held them back is the record: without it, the same prompt is given the turn again.
    std::fs::remove_dir_all(dir.path().join("hook-given"))?;
    let text = expect_context(&hook(&db, "claude-code", &bytes(&prompt), &[])?, "UserPromptSubmit")?;
    assert!(replies.iter().any(|r| text.contains(r)), "{replies:?} not in:\n{text}");
    // Another agent session (a clear starts one) is given what it needs afresh.
    let mut cleared = transcript.event("SessionStart", json!({ "source": "clear" }));
    cleared["session_id"] = json!("3f6a2b1c-0000-4000-8000-0000000000f2");
    cleared["transcript_path"] = json!(dir.path().join("3f6a2b1c-0000-4000-8000-0000000000f2.jsonl"));
    let text = expect_context(&hook(&db, "claude-code", &bytes(&cleared), &[])?, "SessionStart")?;
    assert!(text.contains(TURNS[0].0), "{text}");
    Ok(())
}

/// Issue 50, item 5: `hook install codex` says what Codex needs before a hook runs, and `hook
/// doctor` tells whether the hooks are installed and trusted.
#[test]
fn r50_doctor_tells_whether_the_hooks_will_run() -> TestResult {
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let db = dir.path().join("index.redb");
    let doctor = |agent: &str| -> Result<Run, Box<dyn std::error::Error>> {
        let output = ctxgate()
            .arg("--db")
            .arg(&db)
            .args(["hook", "doctor", agent])
            .env("HOME", &home)
            .env_remove("CODEX_HOME")
            .current_dir(dir.path())
            .output()?;
        Ok(Run::from_output(output))
    };
    let none = doctor("claude-code")?;
    assert_eq!(none.code, Some(1), "{none:#?}");
    assert!(none.stdout.contains("UserPromptSubmit: not installed"), "{}", none.stdout);

    let installed = settings_cmd(&db, &home, dir.path(), &["install", "codex"])?.ok()?;
    let notes: Vec<&str> = installed.stdout.lines().filter(|l| l.contains("Hooks need review")).collect();
    assert_eq!(notes.len(), 1, "one line on trust: {}", installed.stdout);
    assert!(notes[0].contains("codex exec"), "{}", notes[0]);

    let untrusted = doctor("codex")?;
    assert_eq!(untrusted.code, Some(1), "{untrusted:#?}");
    assert_eq!(untrusted.stdout.matches("not trusted").count(), 4, "{}", untrusted.stdout);

    // Trusted the way Codex records it: a `trusted_hash` per hook in ~/.codex/config.toml.
    let hooks_file = home.join(".codex/hooks.json");
    let mut config = String::from("model = \"gpt-5.1-codex\"\n");
    for event in ["user_prompt_submit", "session_start", "post_compact", "stop"] {
        config.push_str(&format!(
            "\n[hooks.state.\"{}:{event}:0:0\"]\ntrusted_hash = \"sha256:0123\"\n",
            hooks_file.display()
        ));
    }
    std::fs::write(home.join(".codex/config.toml"), &config)?;
    let trusted = doctor("codex")?;
    assert_eq!(trusted.code, Some(0), "{trusted:#?}");
    assert!(trusted.stdout.contains("Codex will run them"), "{}", trusted.stdout);
    assert!(!trusted.stdout.contains("not trusted"), "{}", trusted.stdout);
    Ok(())
}

/// A session's turns as (user, assistant), from `show --json`.
fn stored_turns(db: &Path, session: &str) -> Result<Vec<(String, String)>, Box<dyn std::error::Error>> {
    let run = common::run_at(db, ["--json", "show", "-s", session])?.ok()?;
    let doc: Value = serde_json::from_str(&run.stdout)?;
    let turns = doc["turns"].as_array().ok_or("no turns array")?;
    Ok(turns
        .iter()
        .map(|t| {
            let side = |k: &str| t[k].as_str().unwrap_or_default().to_string();
            (side("user"), side("assistant"))
        })
        .collect())
}

/// Issue 50, item 2, through the hooks: Claude Code writes a reply before the prompt it
/// answers; the imports in between (each resumed from the last) store the turns the
/// `parentUuid` chain says, the same as one import of the finished file.
#[test]
fn r50_a_reply_written_before_its_prompt_is_paired_with_it() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let session = "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f";
    let path = dir.path().join(format!("{session}.jsonl"));
    let line = |n: u32, parent: Option<u32>, role: &str, text: &str| {
        let message = match role {
            "user" => json!({ "role": "user", "content": text }),
            _ => {
                json!({ "role": "assistant", "model": "claude-sonnet-4-5", "content": [{ "type": "text", "text": text }] })
            }
        };
        json!({
            "parentUuid": parent.map(|p| format!("00000000-0000-4000-8000-{p:012}")),
            "isSidechain": false, "userType": "external", "cwd": PROJECT, "sessionId": session,
            "version": "2.1.197", "type": role, "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            "timestamp": format!("2026-11-20T09:00:{n:02}.000Z"), "message": message,
        })
    };
    let stop = json!({
        "session_id": session, "transcript_path": path, "cwd": PROJECT, "hook_event_name": "Stop",
    });
    let name = format!("{PROJECT}#{session}");
    let steps: [&[Value]; 4] = [
        &[line(1, None, "user", TURNS[0].0), line(2, Some(1), "assistant", TURNS[0].1)],
        // The reply comes first; its prompt (record 3) is not in the file yet.
        &[line(4, Some(3), "assistant", TURNS[1].1)],
        &[line(3, Some(2), "user", TURNS[1].0)],
        &[line(5, Some(4), "user", TURNS[2].0), line(6, Some(5), "assistant", TURNS[2].1)],
    ];
    let expected: Vec<(String, String)> =
        TURNS[..3].iter().map(|(u, a)| (u.to_string(), a.to_string())).collect();
    let stored_after = [1, 1, 2, 3];
    for (records, count) in steps.iter().zip(stored_after) {
        for record in *records {
            append_line(&path, record)?;
        }
        let run = hook(&db, "claude-code", &bytes(&stop), &[])?;
        assert_eq!(run.run.code, Some(0), "{:#?}", run.run);
        assert!(run.run.stderr.is_empty(), "{}", run.run.stderr);
        assert_eq!(stored_turns(&db, &name)?, expected[..count], "after {count} turns");
    }
    let whole = dir.path().join("whole.redb");
    common::run_at(
        &whole,
        [Path::new("import").as_os_str(), "--format".as_ref(), "claude-code".as_ref(), path.as_os_str()],
    )?
    .ok()?;
    assert_eq!(stored_turns(&whole, session)?, expected, "one import of the finished file");
    Ok(())
}

/// A fake GitHub token in gitleaks' shape (`fixtures/secrets/samples.tsv`), in a turn the
/// hook imports and then finds, in this session and from another session of the project: the
/// context holds the marker, never the token, and neither does the index file.
#[test]
fn the_hook_gives_no_secret_back_from_this_session_or_another() -> TestResult {
    let token = "ghp_FMJ8dtoLxfz60Hq1jT9bGsHm2ohs2yJSFSCn";
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("index.redb");
    let mut earlier = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-00000000005e", PROJECT);
    earlier.turn(
        &format!("The deploy bot failed. Its github_api_token = \"{token}\" was set in the workflow."),
        "The workflow reads the deploy bot token from the repository secrets instead now.",
    )?;
    for (user, assistant) in TURNS {
        earlier.turn(user, assistant)?;
    }
    let prompt = "Which token did the deploy bot workflow use?";
    earlier.record("user", prompt)?;
    let own = expect_context(
        &hook(
            &db,
            "claude-code",
            &bytes(&earlier.event("UserPromptSubmit", json!({ "prompt": prompt }))),
            &[],
        )?,
        "UserPromptSubmit",
    )?;
    assert!(own.contains("deploy bot") && own.contains("[REDACTED:github-pat]"), "{own}");
    assert!(!own.contains(token), "the session's own part gave the token back:\n{own}");

    // A new session of the same project asks again: the other-sessions part.
    let mut later = ClaudeTranscript::new(dir.path(), "3f6a2b1c-0000-4000-8000-00000000005f", PROJECT);
    later.record("user", prompt)?;
    let run =
        hook(&db, "claude-code", &bytes(&later.event("UserPromptSubmit", json!({ "prompt": prompt }))), &[])?;
    let other = expect_context(&run, "UserPromptSubmit")?;
    assert!(other.contains("deploy bot"), "{other}");
    assert!(!other.contains(token), "the other-sessions part gave the token back:\n{other}");
    let stored = std::fs::read(&db)?;
    assert!(memchr::memmem::find(&stored, token.as_bytes()).is_none(), "the index file holds the token");
    Ok(())
}
