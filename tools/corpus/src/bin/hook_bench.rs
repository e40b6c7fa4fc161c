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
//! `--baseline PATH` runs another build on a copy of the same index, each call right after (or
//! before, every other call) the one of `--ctxgate`, and prints its figures and the ratios: on
//! a shared, noisy machine the ratio holds when the absolute figures do not. Each build's CPU
//! time per call (user + system, of the hook processes) is printed beside its wall times.

use anyhow::{Context, Result, bail};
use corpus::timing::{ms, quantile};
use corpus::transcript::{Transcript, event, run_hook};
use corpus::{Corpus, TopicId};
use ctxgate::{Format, Gatekeeper, ImportOptions, Options};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: hook_bench [--turns N (100000)] [--transcript T (2000)] [--calls R (50)] \
[--seed X (42)] [--tool-calls] [--tokenizer NAME (the hook's default)] [--ctxgate PATH] \
[--baseline PATH (another build to compare, call by call)] [--keep DIR (leave the index and transcript there)]";

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
    /// Another build, run beside `ctxgate` on a copy of the index.
    baseline: Option<PathBuf>,
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
        baseline: None,
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
            "--baseline" => args.baseline = Some(PathBuf::from(value()?)),
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
    let mut transcript = Transcript::create(&path, PROJECT, SESSION_ID)?;
    let mut live = corpus.session(u32::MAX);
    for _ in 0..args.transcript {
        let turn = live.next().context("the corpus ends")?;
        transcript.record("user", &turn.user)?;
        if args.tool_calls {
            transcript.tool(&turn.assistant)?;
        }
        transcript.record("assistant", &turn.assistant)?;
    }
    transcript.flush()?;
    let event = |name: &str, prompt: Option<&str>| event(name, SESSION_ID, &path, PROJECT, prompt);
    // The builds measured, each with its own copy of the index (the first is `--ctxgate`).
    let mut builds = vec![Build::new(&args.ctxgate, db.clone())];
    if let Some(baseline) = &args.baseline {
        let copy = dir.join("baseline");
        std::fs::create_dir_all(&copy)?;
        std::fs::copy(&db, copy.join("index.redb"))?;
        builds.push(Build::new(baseline, copy.join("index.redb")));
    }
    for build in &builds {
        let started = Instant::now();
        run_hook(&build.ctxgate, &build.db, args.tokenizer.as_deref(), &event("Stop", None))?;
        println!(
            "transcript: {} turns imported by the Stop hook of {} in {}",
            args.transcript,
            build.ctxgate.display(),
            ms(started.elapsed())
        );
    }

    let topics: Vec<TopicId> = TopicId::all().collect();
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
        transcript.flush()?;
        pending = Some(prompt.clone());
        let event = event("UserPromptSubmit", Some(&prompt));
        // Every other call the other build goes first: neither always finds the page cache
        // warmed by the other.
        let n = builds.len();
        for k in 0..n {
            let build = &mut builds[(k + i) % n];
            let cpu = children_cpu();
            let started = Instant::now();
            let stdout = run_hook(&build.ctxgate, &build.db, args.tokenizer.as_deref(), &event)?;
            build.times.push(started.elapsed());
            let spent = children_cpu().zip(cpu).map(|(after, before)| after.saturating_sub(before));
            build.cpu = build.cpu.zip(spent).map(|(sum, spent)| sum + spent);
            build.with_context += usize::from(!stdout.trim().is_empty());
        }
    }
    let calls = u32::try_from(args.calls.max(1))?;
    for build in &builds {
        let quantiles: Vec<String> =
            [0.5, 0.95, 0.99, 1.0].iter().map(|&q| ms(quantile(&build.times, q))).collect();
        println!(
            "prompt hook of {}, {} turns + a {}-turn transcript that gained one turn: p50 {} | p95 {} | p99 {} | max {} | CPU {} per call ({} calls, {} with context)",
            build.ctxgate.display(),
            report.new_turns,
            args.transcript,
            quantiles[0],
            quantiles[1],
            quantiles[2],
            quantiles[3],
            build.cpu.map_or_else(|| "unknown".to_string(), |cpu| ms(cpu / calls)),
            build.times.len(),
            build.with_context
        );
    }
    if let [now, before] = &builds[..] {
        let ratio = |q: f64| quantile(&now.times, q).as_secs_f64() / quantile(&before.times, q).as_secs_f64();
        let cpu = now.cpu.zip(before.cpu).map(|(a, b)| a.as_secs_f64() / b.as_secs_f64());
        println!(
            "ratio --ctxgate / --baseline: p50 {:.2} | p95 {:.2} | CPU {}",
            ratio(0.5),
            ratio(0.95),
            cpu.map_or_else(|| "unknown".to_string(), |c| format!("{c:.2}"))
        );
    }
    Ok(())
}

/// One build of the hook and what its calls took.
struct Build {
    ctxgate: PathBuf,
    db: PathBuf,
    times: Vec<Duration>,
    /// CPU time of its hook processes (`None` where the platform does not say).
    cpu: Option<Duration>,
    with_context: usize,
}

impl Build {
    fn new(ctxgate: &Path, db: PathBuf) -> Build {
        Build {
            ctxgate: ctxgate.to_path_buf(),
            db,
            times: Vec::new(),
            cpu: Some(Duration::ZERO),
            with_context: 0,
        }
    }
}

/// User + system CPU time of this process's waited-for children (Linux: `cutime` and `cstime`
/// of `/proc/self/stat`, in clock ticks of 10 ms; summed over many calls, that is precise
/// enough). `None` elsewhere.
fn children_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    // cutime and cstime are fields 16 and 17 of the whole line, 14 and 15 after the name.
    let ticks: u64 = fields.get(13)?.parse::<u64>().ok()? + fields.get(14)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}
