//! `hook_bench`: the prompt hook end to end, as Claude Code runs it. Builds an index of N
//! generated turns (sessions of 2,000 turns, all of one project, so the cross-session search
//! sees every one of them), writes a Claude Code transcript of T turns in that project and
//! imports it, then R times: the transcript gains one turn (the last prompt's reply and a new
//! prompt), and a `ctxgate hook claude-code` process gets the `UserPromptSubmit` event on stdin.
//! Each call is timed from spawn to exit; prints p50, p95, p99 and max. Run it in release mode:
//!
//! ```text
//! cargo build --release --bin ctxgate && \
//! cargo run --release -p corpus --bin hook_bench -- --turns 100000 --transcript 2000 --calls 50
//! ```
//!
//! The hook binary is `target/release/ctxgate` beside this one unless `--ctxgate PATH` is given.

use anyhow::{Context, Result, bail};
use corpus::timing::{ms, quantile};
use corpus::{Corpus, TopicId};
use ctxgate::{Format, Gatekeeper, ImportOptions, Options};
use serde_json::json;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const USAGE: &str = "usage: hook_bench [--turns N (100000)] [--transcript T (2000)] [--calls R (50)] \
[--seed X (42)] [--tool-calls] [--tokenizer NAME (the hook's default)] [--ctxgate PATH] \
[--keep DIR (leave the index and transcript there)]";

const PROJECT: &str = "/home/dev/src/bench-project";
const SESSION_ID: &str = "0b5e7c1d-0000-4000-8000-00000000beef";
const TURNS_PER_SESSION: u64 = 2_000;

struct Args {
    turns: u64,
    transcript: u32,
    calls: usize,
    seed: u64,
    /// Each transcript turn runs a tool (a call and its result before the reply), as real
    /// sessions do: the import looks at every tool result of the file on each call.
    tool_calls: bool,
    /// `--tokenizer` for the hook; `None`, its default.
    tokenizer: Option<String>,
    ctxgate: PathBuf,
    /// Where to build the index and transcript and leave them, for a look afterwards.
    keep: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut args = Args {
        turns: 100_000,
        transcript: 2_000,
        calls: 50,
        seed: 42,
        tool_calls: false,
        tokenizer: None,
        ctxgate: exe.with_file_name("ctxgate"),
        keep: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => args.turns = value()?.parse().context("--turns")?,
            "--transcript" => args.transcript = value()?.parse().context("--transcript")?,
            "--calls" => args.calls = value()?.parse().context("--calls")?,
            "--seed" => args.seed = value()?.parse().context("--seed")?,
            "--ctxgate" => args.ctxgate = PathBuf::from(value()?),
            "--tokenizer" => args.tokenizer = Some(value()?),
            "--tool-calls" => args.tool_calls = true,
            "--keep" => args.keep = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if !args.ctxgate.exists() {
        bail!(
            "no ctxgate binary at {}: build it (cargo build --release) or pass --ctxgate",
            args.ctxgate.display()
        );
    }
    Ok(args)
}

/// A Claude Code session file being appended to, as Claude Code writes it.
struct Transcript {
    file: BufWriter<std::fs::File>,
    records: u64,
}

impl Transcript {
    fn record(&mut self, role: &str, text: &str) -> Result<()> {
        let message = match role {
            "user" => json!({ "role": "user", "content": text }),
            _ => {
                json!({ "role": "assistant", "type": "message", "content": [{ "type": "text", "text": text }] })
            }
        };
        self.write(role, message)
    }

    /// A tool call and its result (a `Bash` run printing `text`).
    fn tool(&mut self, text: &str) -> Result<()> {
        let id = format!("toolu_{:08}", self.records);
        let call = json!({ "role": "assistant", "type": "message",
            "content": [{ "type": "tool_use", "id": id, "name": "Bash", "input": { "command": "cargo test" } }] });
        self.write("assistant", call)?;
        let result = json!({ "role": "user",
            "content": [{ "type": "tool_result", "tool_use_id": id, "content": text, "is_error": false }] });
        self.write("user", result)
    }

    fn write(&mut self, role: &str, message: serde_json::Value) -> Result<()> {
        self.records += 1;
        let n = self.records;
        let line = json!({
            "isSidechain": false, "userType": "external", "cwd": PROJECT, "sessionId": SESSION_ID,
            "version": "1.0.83", "type": role, "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            // Each record the child of the one before, as Claude Code links them.
            "parentUuid": (n > 1).then(|| format!("00000000-0000-4000-8000-{:012}", n - 1)),
            "timestamp": format!("2025-06-14T{:02}:{:02}:{:02}.000Z", (n / 3600) % 24, (n / 60) % 60, n % 60),
            "message": message,
        });
        writeln!(self.file, "{line}")?;
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let temp = tempfile::tempdir()?;
    let dir = match &args.keep {
        Some(keep) => {
            std::fs::create_dir_all(keep)?;
            keep.clone()
        }
        None => temp.path().to_path_buf(),
    };
    let db = dir.join("index.redb");
    let corpus = Corpus::new(args.seed);

    let started = Instant::now();
    let history = dir.join("history.jsonl");
    {
        let mut out = BufWriter::new(std::fs::File::create(&history)?);
        let sessions = u32::try_from(args.turns.div_ceil(TURNS_PER_SESSION).max(1))?;
        corpus::jsonl::write(&mut out, corpus.spread(args.turns, sessions), |i| {
            format!("{PROJECT}#bench-{i:04}")
        })?;
        out.flush()?;
    }
    let gatekeeper = Gatekeeper::open(&db, Options::default())?;
    let options = ImportOptions { format: Format::Jsonl, ..ImportOptions::default() };
    let report = gatekeeper.import(std::slice::from_ref(&history), &options)?;
    gatekeeper.fold_pending()?;
    drop(gatekeeper);
    println!("index: {} turns imported in {:.1} s", report.new_turns, started.elapsed().as_secs_f64());

    // The live session: a transcript of `--transcript` turns from a session of its own.
    let path = dir.join(format!("{SESSION_ID}.jsonl"));
    let mut transcript = Transcript { file: BufWriter::new(std::fs::File::create(&path)?), records: 0 };
    let mut live = corpus.session(u32::MAX);
    for _ in 0..args.transcript {
        let turn = live.next().context("the corpus ends")?;
        transcript.record("user", &turn.user)?;
        if args.tool_calls {
            transcript.tool(&turn.assistant)?;
        }
        transcript.record("assistant", &turn.assistant)?;
    }
    transcript.file.flush()?;
    let event = |name: &str, prompt: Option<&str>| {
        let mut e = json!({ "session_id": SESSION_ID, "transcript_path": path, "cwd": PROJECT, "hook_event_name": name });
        if let Some(prompt) = prompt {
            e["prompt"] = json!(prompt);
        }
        e.to_string()
    };
    let started = Instant::now();
    run_hook(&args.ctxgate, &db, args.tokenizer.as_deref(), &event("Stop", None))?;
    println!("transcript: {} turns imported by the Stop hook in {}", args.transcript, ms(started.elapsed()));

    let topics: Vec<TopicId> = TopicId::all().collect();
    let mut times = Vec::with_capacity(args.calls);
    let mut with_context = 0;
    let mut pending: Option<String> = None;
    for i in 0..args.calls {
        let turn = live.next().context("the corpus ends")?;
        if pending.take().is_some() {
            if args.tool_calls {
                transcript.tool(&turn.assistant)?;
            }
            transcript.record("assistant", &turn.assistant)?;
        }
        let prompt = corpus.query_for(topics[i % topics.len()], i as u64);
        transcript.record("user", &prompt)?;
        transcript.file.flush()?;
        pending = Some(prompt.clone());
        let started = Instant::now();
        let stdout = run_hook(
            &args.ctxgate,
            &db,
            args.tokenizer.as_deref(),
            &event("UserPromptSubmit", Some(&prompt)),
        )?;
        times.push(started.elapsed());
        with_context += usize::from(!stdout.trim().is_empty());
    }
    let quantiles: Vec<String> =
        [0.5, 0.95, 0.99, 1.0].iter().map(|&q| ms(quantile(&times, q))).collect::<Vec<_>>();
    println!(
        "prompt hook, {} turns + a {}-turn transcript that gained one turn: p50 {} | p95 {} | p99 {} | max {} ({} calls, {} with context)",
        report.new_turns,
        args.transcript,
        quantiles[0],
        quantiles[1],
        quantiles[2],
        quantiles[3],
        times.len(),
        with_context
    );
    Ok(())
}

/// Runs the hook with `event` on stdin; fails on a non-zero exit or anything on stderr (the
/// hook reports its problems there and gives no context).
fn run_hook(ctxgate: &Path, db: &Path, tokenizer: Option<&str>, event: &str) -> Result<String> {
    let mut child = Command::new(ctxgate)
        .arg("--db")
        .arg(db)
        .args(tokenizer.map(|t| ["--tokenizer", t]).into_iter().flatten())
        .args(["hook", "claude-code", "--deadline-ms", "10000"])
        .env_remove("CTXGATE_HOOK_DEADLINE_MS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    child.stdin.take().context("no stdin")?.write_all(event.as_bytes())?;
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stderr.trim().is_empty() {
        bail!("the hook failed ({}): {stderr}", output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
