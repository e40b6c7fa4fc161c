//! `compare --turns N`: ctxgate beside tantivy (BM25) and SQLite FTS5 on the same generated
//! corpus, in one run (issue 5). Run it in release mode:
//!
//! ```text
//! cargo run --release -p compare -- --turns 100000
//! ```
//!
//! The corpus (`corpus::Corpus`, seed 42) is written once as canonical JSONL; every engine
//! indexes that file. Half the turns go to one long session (where session-scoped queries
//! run), the other half are spread over many short sessions. All engines index the same
//! anchors: ctxgate extracts them itself; tantivy gets them as pre-tokenized text and SQLite
//! FTS5 as the anchors joined by spaces, both from `ctxgate::anchor::extract`. Each peer is fed
//! as fast as it takes it: tantivy's documents are built and added from the rayon pool (its
//! writer indexes on threads of its own), FTS5's anchors are made on the pool ahead of its one
//! writing connection. The extraction alone (read, parse, extract on the pool, nothing indexed)
//! is measured first, as the floor under every bulk import; redb's own durable commit of one
//! turn's text, the floor under ctxgate's durable add, next.
//!
//! Each engine runs in child processes of this tool (`compare child PHASE ENGINE ...`), one per
//! phase (bulk import, queries, durable adds), so peak RSS (VmHWM) is the engine's own. Every
//! child prints one JSON object of named figures; the parent prints the table and ratios.

mod commit_floor;
mod common;
mod ctxgate_engine;
mod fts5_engine;
mod report;
mod tantivy_engine;

use anyhow::{Context, Result, bail};
use common::{Figures, Setup};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const USAGE: &str = "usage: compare [--turns N (10000)] [--sessions S (1 + N/200)] [--samples K (200)] \
[--adds A (200)] [--seed X (42)] [--engines ctxgate,tantivy,fts5] [--dir DIR] [--keep] [--json FILE]";

/// The engines, in table order.
pub const ENGINES: [&str; 3] = ["ctxgate", "tantivy", "fts5"];

/// The phases, each in its own child process.
const PHASES: [&str; 3] = ["bulk", "query", "add"];

struct Args {
    setup: Setup,
    engines: Vec<String>,
    dir: Option<PathBuf>,
    keep: bool,
    /// Also write the figures as JSON to this file.
    json: Option<PathBuf>,
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args> {
    let mut turns = 10_000u64;
    let mut sessions = None;
    let (mut samples, mut adds, mut seed) = (200usize, 200usize, 42u64);
    let mut engines: Vec<String> = ENGINES.iter().map(|e| e.to_string()).collect();
    let (mut dir, mut keep, mut json) = (None, false, None);
    let mut it = args;
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => turns = value()?.parse().context("--turns")?,
            "--sessions" => sessions = Some(value()?.parse().context("--sessions")?),
            "--samples" => samples = value()?.parse().context("--samples")?,
            "--adds" => adds = value()?.parse().context("--adds")?,
            "--seed" => seed = value()?.parse().context("--seed")?,
            "--engines" => engines = value()?.split(',').map(|e| e.trim().to_string()).collect(),
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--keep" => keep = true,
            "--json" => json = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    if turns < 2 || samples == 0 || adds == 0 {
        bail!("--turns must be at least 2, --samples and --adds at least 1");
    }
    let sessions = sessions.unwrap_or(1 + (turns / 200) as u32).max(2);
    if let Some(bad) = engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
        bail!("unknown engine {bad}: expected some of {}", ENGINES.join(","));
    }
    let setup = Setup { turns, sessions, samples, adds, seed, dir: PathBuf::new() };
    Ok(Args { setup, engines, dir, keep, json })
}

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("child") {
        args.next();
        return child(args);
    }
    let args = parse_args(args)?;
    if cfg!(debug_assertions) {
        eprintln!("warning: debug build; run with --release for meaningful numbers");
    }
    // A temporary directory (removed when dropped, unless --keep), or the one given.
    let mut temp = None;
    let dir = match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            dir.clone()
        }
        None => {
            let made = tempfile::Builder::new().prefix("compare-").tempdir_in(corpus::index::cache_dir()?)?;
            let path = made.path().to_path_buf();
            temp = Some(made);
            path
        }
    };
    let setup = Setup { dir: dir.clone(), ..args.setup };
    eprintln!(
        "corpus: {} turns, {} sessions (the long one has {}), seed {}, in {}",
        setup.turns,
        setup.sessions,
        setup.long_turns(),
        setup.seed,
        dir.display()
    );
    let text_bytes = setup.write_corpus()?;
    let mut results: BTreeMap<String, Figures> = BTreeMap::new();
    eprintln!("anchors: extract");
    results.insert(report::EXTRACT.into(), run_child(&setup, "extract", "anchors")?);
    eprintln!("redb: durable commit floor");
    results.insert(report::FLOOR.into(), run_child(&setup, "floor", "redb")?);
    for engine in &args.engines {
        let mut figures = Figures::new();
        figures.insert("bulk.text_bytes".into(), text_bytes as f64);
        for phase in PHASES {
            eprintln!("{engine}: {phase}");
            figures.extend(run_child(&setup, phase, engine)?);
        }
        results.insert(engine.clone(), figures);
    }
    print!("{}", report::markdown(&setup, &results));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report::json(&setup, &results))?;
        std::fs::write(path, json + "\n").with_context(|| format!("cannot write {}", path.display()))?;
    }
    if let Some(temp) = temp
        && args.keep
    {
        eprintln!("kept {}", temp.keep().display());
    }
    Ok(())
}

/// Runs one phase of one engine in a child process and reads its figures.
fn run_child(setup: &Setup, phase: &str, engine: &str) -> Result<Figures> {
    let exe = std::env::current_exe().context("cannot find this program")?;
    let output = Command::new(exe)
        .arg("child")
        .arg(phase)
        .arg(engine)
        .args(setup.to_args())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run the {phase} child for {engine}"))?;
    if !output.status.success() {
        bail!("the {phase} child for {engine} failed: {}", output.status);
    }
    serde_json::from_slice(&output.stdout)
        .with_context(|| format!("the {phase} child for {engine} printed no figures"))
}

/// `compare child PHASE ENGINE <setup args>`: one phase, figures as JSON on stdout.
fn child(mut args: impl Iterator<Item = String>) -> Result<()> {
    let phase = args.next().context("child: phase missing")?;
    let engine = args.next().context("child: engine missing")?;
    let setup = Setup::from_args(args)?;
    let figures = match (phase.as_str(), engine.as_str()) {
        ("bulk", "ctxgate") => ctxgate_engine::bulk(&setup)?,
        ("query", "ctxgate") => ctxgate_engine::query(&setup)?,
        ("add", "ctxgate") => ctxgate_engine::add(&setup)?,
        ("bulk", "tantivy") => tantivy_engine::bulk(&setup)?,
        ("query", "tantivy") => tantivy_engine::query(&setup)?,
        ("add", "tantivy") => tantivy_engine::add(&setup)?,
        ("bulk", "fts5") => fts5_engine::bulk(&setup)?,
        ("extract", "anchors") => common::extract_only(&setup)?,
        ("floor", "redb") => commit_floor::floor(&setup)?,
        ("query", "fts5") => fts5_engine::query(&setup)?,
        ("add", "fts5") => fts5_engine::add(&setup)?,
        _ => bail!("child: unknown phase {phase} or engine {engine}"),
    };
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}
