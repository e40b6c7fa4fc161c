//! ctxgate's hooks in the real agents: Claude Code and Codex installed from npm at the versions
//! pinned in `tests/common/agents.rs`, each in a home of its own, pointed at a loopback
//! stand-in for its model API that records every request. Each test imports a history with
//! `ctxgate add`, installs the hooks with `ctxgate hook install` (and, for Codex, trusts them as
//! its review screen does), drives the agent's non-interactive mode, and reads the model
//! requests: ctxgate's context is in the request that follows a prompt it bears on, exactly
//! once, also after a resume that gives the same turns again; a prompt with nothing to give
//! leaves the request without any.
//!
//! Where a test cannot run (no npm, the registry out of reach, an agent that does not start)
//! it says why on stderr and passes; `CTXGATE_REQUIRE_AGENTS=1` makes that a failure.
//! `CTXGATE_RECORD_HOOK_PAYLOADS=1` also records what each agent sends its hooks, scrubbed of
//! the test's paths, into `fixtures/hooks/<agent>-<version>/` (tests/hook_fixtures.rs replays
//! them).
#![cfg(unix)]

mod common;

use common::agents::{self, AGENT_LIMIT, Api, CLAUDE_CODE, CODEX, Package, Request, Standin, Unavailable};
use common::{TestResult, ctxgate};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Returns early from a test that cannot run here (see [`Unavailable`]).
macro_rules! or_skip {
    ($result:expr) => {
        match $result {
            Ok(value) => value,
            Err(Unavailable(why)) => {
                if std::env::var_os("CTXGATE_REQUIRE_AGENTS").is_some() {
                    return Err(format!("CTXGATE_REQUIRE_AGENTS is set and {why}").into());
                }
                eprintln!("skipped: {why}");
                return Ok(());
            }
        }
    };
}

/// What only the imported history says: counted in the model requests.
const MARKER: &str = "gateway-zebra7731";
/// The imported turn, in another session of the project than the agent's.
const EARLIER_USER: &str = "How do I rotate the TLS certificates on the gateway?";
const EARLIER_ASSISTANT: &str =
    "Run certbot renew --cert-name gateway-zebra7731, then reload nginx so it serves the new certificate.";
/// A prompt the imported turn bears on.
const ROTATE: &str = "How do I rotate the gateway TLS certificates?";
/// A prompt nothing in the history bears on.
const NOTHING: &str = "Thanks, that is all.";
/// A prompt of a resumed session that the imported turn bears on too.
const RELOAD: &str = "Which command reloads nginx after the gateway certificate renewal?";

/// The first prompt of a session that is compacted: after the compaction only ctxgate's
/// recovery has it.
const COMPACT_FIRST: &str = "Where is the gateway's nginx configuration kept?";

/// The headings ctxgate's context starts its parts with (docs/hooks.md).
const RELATED: &str = "ctxgate: related turns from other sessions of this project";
const REQUESTS: &str = "ctxgate: the user's requests in this session";

/// One agent's world: a home, a project directory, an index with the history, the stand-in.
struct World {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
    db: PathBuf,
    standin: Standin,
}

impl World {
    fn new(api: Api) -> Result<World, Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        // Canonical: the agents report the resolved working directory as the event's `cwd`.
        let root = dir.path().canonicalize()?;
        let (home, project) = (root.join("home"), root.join("project"));
        std::fs::create_dir_all(&home)?;
        std::fs::create_dir_all(&project)?;
        let db = root.join("index.redb");
        let world = World { _dir: dir, root, home, project, db, standin: Standin::start(api)? };
        // The history, in a session of this project (the hooks name sessions `<cwd>#<id>`), among
        // other topics so that the gateway's words are the distinctive ones.
        let session = format!("{}#earlier", world.project.display());
        for (user, assistant) in common::TOPICS.iter().copied().chain([(EARLIER_USER, EARLIER_ASSISTANT)]) {
            common::run_at(
                &world.db,
                ["add", "--session", &session, "--user", user, "--assistant", assistant],
            )?
            .ok()?;
        }
        Ok(world)
    }

    /// `ctxgate hook install AGENT` as the user would run it, in this world's home.
    fn install(&self, agent: &str) -> TestResult {
        let out = ctxgate()
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .current_dir(&self.project)
            .arg("--db")
            .arg(&self.db)
            .args(["hook", "install", agent])
            .output()?;
        assert!(out.status.success(), "install {agent}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(())
    }

    /// `ctxgate hook doctor AGENT`: whether it says the agent will run the hooks.
    fn doctor(&self, agent: &str) -> Result<(bool, String), Box<dyn std::error::Error>> {
        let out = ctxgate()
            .env("HOME", &self.home)
            .env("CODEX_HOME", self.home.join(".codex"))
            .current_dir(&self.project)
            .args(["hook", "doctor", agent])
            .output()?;
        let text =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        Ok((out.status.success(), text))
    }

    /// The agent's command with only this world in its environment.
    fn command(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .current_dir(&self.project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .env("TMPDIR", &self.root)
            // The hooks inherit it: a debug build on a busy machine may need more than the
            // default 2 s, and this test is about what is given, not how fast.
            .env("CTXGATE_HOOK_DEADLINE_MS", "9000");
        command
    }

    /// Runs the agent once, with `input` on its stdin; the requests it sent the model come
    /// back with its stdout.
    fn drive(
        &self,
        mut command: Command,
        input: Option<String>,
    ) -> Result<(String, Vec<Request>), Box<dyn std::error::Error>> {
        let before = self.standin.requests().len();
        let output = agents::run_with_input(&mut command, input.map(String::into_bytes), AGENT_LIMIT)?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            return Err(format!(
                "{:?} failed ({}):\n{stdout}\n{}",
                command.get_args().collect::<Vec<_>>(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
            .into());
        }
        Ok((stdout, self.standin.requests().split_off(before)))
    }

    /// What the hooks logged (`hook.log` beside the index): for the messages of failures.
    fn hook_log(&self) -> String {
        std::fs::read_to_string(self.root.join("hook.log")).unwrap_or_default()
    }

    /// With `CTXGATE_RECORD_HOOK_PAYLOADS` set, makes each installed hook command also append
    /// its stdin to `payloads.jsonl` here.
    fn record_payloads(&self, settings: &Path) -> TestResult<bool> {
        if std::env::var_os("CTXGATE_RECORD_HOOK_PAYLOADS").is_none() {
            return Ok(false);
        }
        let log = self.root.join("payloads.jsonl");
        let text = std::fs::read_to_string(settings)?;
        let mut doc: Value = serde_json::from_str(&text)?;
        for groups in doc["hooks"].as_object_mut().into_iter().flat_map(|h| h.values_mut()) {
            for handler in groups
                .as_array_mut()
                .into_iter()
                .flatten()
                .flat_map(|g| g.get_mut("hooks").and_then(Value::as_array_mut).into_iter().flatten())
            {
                let command = handler["command"].as_str().unwrap_or_default().to_string();
                handler["command"] = Value::String(format!("tee -a '{}' | {command}", log.display()));
            }
        }
        std::fs::write(settings, serde_json::to_string_pretty(&doc)?)?;
        Ok(true)
    }

    /// Writes the recorded payloads to `fixtures/hooks/<agent>-<version>/`, a file each, with
    /// this world's paths replaced by `$HOME` and `$PROJECT`.
    fn save_payloads(&self, agent: &str, package: Package) -> TestResult {
        let text = std::fs::read_to_string(self.root.join("payloads.jsonl"))?;
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures")
            .join("hooks")
            .join(format!("{agent}-{}", package.version));
        std::fs::create_dir_all(&dir)?;
        let (home, project) = (self.home.display().to_string(), self.project.display().to_string());
        // Claude Code's directory of the project's transcripts: the path, every other
        // character than a letter or digit a `-`.
        let encoded: String =
            project.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '-' }).collect();
        for (i, payload) in serde_json::Deserializer::from_str(&text).into_iter::<Value>().enumerate() {
            let payload = payload?;
            let event = payload["hook_event_name"].as_str().unwrap_or("unknown").to_string();
            let source = payload["source"].as_str().map(|s| format!("-{s}")).unwrap_or_default();
            let scrubbed = serde_json::to_string_pretty(&payload)?
                .replace(&home, "$HOME")
                .replace(&project, "$PROJECT")
                .replace(&encoded, "$PROJECT_DIR");
            std::fs::write(dir.join(format!("{i:02}-{event}{source}.json")), format!("{scrubbed}\n"))?;
        }
        Ok(())
    }
}

/// The request a run sent for `prompt`: the last one whose text has it and that offers tools
/// (Claude Code also asks the model for a session title, with the prompt but no tools).
fn request_for<'a>(requests: &'a [Request], prompt: &str) -> Result<&'a Request, Box<dyn std::error::Error>> {
    requests
        .iter()
        .rev()
        .find(|r| r.text().contains(prompt) && r.body.get("tools").is_some())
        .ok_or_else(|| format!("no model request for {prompt:?} among {} requests", requests.len()).into())
}

fn count(request: &Request, needle: &str) -> usize {
    request.text().matches(needle).count()
}

/// Fails unless `request` has `needle` exactly `times` times; the message has the request's
/// messages and the hooks' log.
fn expect_count(world: &World, request: &Request, needle: &str, times: usize) -> TestResult {
    let found = count(request, needle);
    if found != times {
        let messages =
            request.body.get("messages").or_else(|| request.body.get("input")).unwrap_or(&request.body);
        return Err(format!(
            "{needle:?} {found} times in the model request, expected {times}:\n{}\nhook.log:\n{}",
            serde_json::to_string_pretty(messages)?,
            world.hook_log()
        )
        .into());
    }
    Ok(())
}

/// Claude Code: a prompt in a new session (whose transcript does not exist yet), a prompt with
/// nothing to give, `--continue` of the latest session and `--resume` of the first.
#[test]
fn claude_code_gets_the_context_once_in_the_model_request() -> TestResult {
    let claude = or_skip!(agents::install(CLAUDE_CODE));
    let world = World::new(Api::AnthropicMessages)?;
    world.install("claude-code")?;
    let (ready, doctor) = world.doctor("claude-code")?;
    assert!(ready, "{doctor}");
    let recording = world.record_payloads(&world.home.join(".claude").join("settings.json"))?;
    let claude_run = |args: &[&str]| {
        let mut command = world.command(&claude);
        command
            .env("ANTHROPIC_BASE_URL", &world.standin.base_url)
            .env("ANTHROPIC_API_KEY", "sk-ant-loopback")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .args(args)
            .args(["--output-format", "json"]);
        let (stdout, requests) = world.drive(command, None)?;
        let result: Value = serde_json::from_str(stdout.trim())
            .map_err(|e| format!("claude's JSON result does not parse ({e}): {stdout}"))?;
        assert_eq!(result["result"], agents::CANNED_REPLY, "{result}");
        let session = result["session_id"].as_str().unwrap_or_default().to_string();
        Ok::<_, Box<dyn std::error::Error>>((session, requests))
    };

    // The first prompt of a new session: the turn from the other session, once.
    let (first, requests) = claude_run(&["-p", ROTATE])?;
    let request = request_for(&requests, ROTATE)?;
    expect_count(&world, request, MARKER, 1)?;
    expect_count(&world, request, RELATED, 1)?;

    // Nothing bears on it: no ctxgate context at all.
    let (second, requests) = claude_run(&["-p", NOTHING])?;
    assert_ne!(first, second);
    let request = request_for(&requests, NOTHING)?;
    expect_count(&world, request, "ctxgate:", 0)?;

    // `--continue` resumes the latest session: its requests come back once, and the prompt
    // gets the other session's turn once.
    let (continued, requests) = claude_run(&["--continue", "-p", RELOAD])?;
    assert_eq!(continued, second, "--continue goes on with the latest session");
    let request = request_for(&requests, RELOAD)?;
    expect_count(&world, request, REQUESTS, 1)?;
    expect_count(&world, request, MARKER, 1)?;

    // `--resume` of the first session, whose first prompt was given the turn already: the turn
    // is in the request once, whether it comes from the session's history or from a hook.
    let (resumed, requests) = claude_run(&["--resume", &first, "-p", RELOAD])?;
    assert_eq!(resumed, first);
    let request = request_for(&requests, RELOAD)?;
    expect_count(&world, request, REQUESTS, 1)?;
    expect_count(&world, request, MARKER, 1)?;

    // `/compact` in a session of two prompts (one process reading its prompts from stdin, the
    // way `-p` takes slash commands): the model's window is now the stand-in's summary, and the
    // `SessionStart` of source `compact` gives the requests back, once, in the request that
    // follows.
    let prompts = [COMPACT_FIRST, "Which ports does the gateway listen on?", "/compact", ROTATE];
    let input: String = prompts
        .iter()
        .map(|p| {
            format!("{}\n", serde_json::json!({"type": "user", "message": {"role": "user", "content": p}}))
        })
        .collect();
    let mut command = world.command(&claude);
    command
        .env("ANTHROPIC_BASE_URL", &world.standin.base_url)
        .env("ANTHROPIC_API_KEY", "sk-ant-loopback")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .args(["-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose"]);
    let (stdout, requests) = world.drive(command, Some(input))?;
    assert!(stdout.contains("compact_boundary"), "no compaction happened:\n{stdout}");
    let request = request_for(&requests, ROTATE)?;
    expect_count(&world, request, REQUESTS, 1)?;
    expect_count(&world, request, COMPACT_FIRST, 1)?;

    if recording {
        world.save_payloads("claude-code", CLAUDE_CODE)?;
    }
    Ok(())
}

/// Codex: `codex exec` runs no hook until the user trusts it; trusted as its review screen
/// does, a prompt gets the context once, a prompt with nothing to give none, and `codex exec
/// resume` gets the session's requests and the other session's turn once.
#[test]
fn codex_gets_the_context_once_in_the_model_request_once_trusted() -> TestResult {
    let codex = or_skip!(agents::install(CODEX));
    let world = World::new(Api::OpenAiResponses)?;
    let codex_home = world.home.join(".codex");
    std::fs::create_dir_all(&codex_home)?;
    let config = format!(
        "model = \"gpt-5.1-codex\"\nmodel_provider = \"standin\"\n\n[model_providers.standin]\n\
         name = \"Loopback stand-in\"\nbase_url = \"{}/v1\"\nwire_api = \"responses\"\n",
        world.standin.base_url
    );
    std::fs::write(codex_home.join("config.toml"), config)?;
    world.install("codex")?;
    let recording = world.record_payloads(&codex_home.join("hooks.json"))?;
    let codex_run = |args: &[&str]| {
        let mut command = world.command(&codex);
        command.env("CODEX_HOME", &codex_home).args(["exec", "--json", "--skip-git-repo-check"]).args(args);
        let (stdout, requests) = world.drive(command, None)?;
        let thread = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|e| e["thread_id"].as_str().map(str::to_string))
            .ok_or_else(|| format!("no thread id in codex's events:\n{stdout}"))?;
        Ok::<_, Box<dyn std::error::Error>>((thread, requests))
    };

    // Installed but not trusted: the doctor says so, and Codex runs the prompt without them.
    if !recording {
        let (ready, doctor) = world.doctor("codex")?;
        assert!(!ready && doctor.contains("not trusted"), "{doctor}");
    }
    let (_, requests) = codex_run(&[ROTATE])?;
    assert_eq!(count(request_for(&requests, ROTATE)?, MARKER), 0, "an untrusted hook ran");

    let env = [("HOME", world.home.as_path()), ("CODEX_HOME", codex_home.as_path())];
    let trusted = agents::trust_codex_hooks(&codex, &env, &world.project)?;
    assert_eq!(trusted.len(), 4, "{trusted:?}");
    if !recording {
        let (ready, doctor) = world.doctor("codex")?;
        assert!(ready, "{doctor}");
    }

    let (first, requests) = codex_run(&[ROTATE])?;
    let request = request_for(&requests, ROTATE)?;
    expect_count(&world, request, MARKER, 1)?;
    expect_count(&world, request, RELATED, 1)?;

    let (_, requests) = codex_run(&[NOTHING])?;
    let request = request_for(&requests, NOTHING)?;
    expect_count(&world, request, "ctxgate:", 0)?;

    // Resuming the first session: its requests come back once, and the turn its first prompt
    // was given is in the request once (the session's history has it).
    let (resumed, requests) = codex_run(&["resume", &first, RELOAD])?;
    assert_eq!(resumed, first);
    let request = request_for(&requests, RELOAD)?;
    expect_count(&world, request, REQUESTS, 1)?;
    expect_count(&world, request, MARKER, 1)?;

    if recording {
        world.save_payloads("codex", CODEX)?;
    }
    Ok(())
}
