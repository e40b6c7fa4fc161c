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
//! `compare --layout team --projects P --sessions-per-project S --turns-per-session T` measures
//! a team's history instead (issue 55; `corpus::team`): sessions named `<project>#<id>` as the
//! hooks name them, and for each engine, in one run: bulk import, the prompt's own session
//! (ctxgate's `select`, the peers' top-20 in the session), the project's other sessions (top 3,
//! as the hook asks), a global top-20, each query kind in a child of its own (so its peak RSS is
//! its own), and for ctxgate the `UserPromptSubmit` hook end to end (`ctxgate hook claude-code`
//! spawned per prompt; the binary beside this one). tantivy also runs on its own tokenizer
//! (`tantivy-own`). Figures are reported as ratios to tantivy (on ctxgate's anchors).
//!
//! Each engine runs in child processes of this tool (`compare child PHASE ENGINE ...`), one per
//! phase (bulk import, queries, durable adds), so peak RSS (VmHWM) is the engine's own. Every
//! child prints one JSON object of named figures; the parent prints the table and ratios.

mod commit_floor;
mod common;
mod ctxgate_engine;
mod fts5_engine;
mod hook_phase;
mod report;
mod tantivy_engine;
mod tantivy_own;

use anyhow::{Context, Result, bail};
use common::{Figures, Setup};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

const USAGE: &str = "usage: compare [--turns N (10000)] [--sessions S (1 + N/200)] [--samples K (200)] \
[--adds A (200)] [--seed X (42)] [--engines ctxgate,tantivy,fts5] [--dir DIR] [--keep] [--json FILE]
       compare --layout team --projects P --sessions-per-project S --turns-per-session T \
[--samples K (200)] [--seed X] [--engines ctxgate,tantivy,tantivy-own,fts5] [--dir DIR] [--keep] [--json FILE]";

/// The engines, in table order.
pub const ENGINES: [&str; 3] = ["ctxgate", "tantivy", "fts5"];

/// The engines of the team layout: tantivy also on its own tokenizer.
pub const TEAM_ENGINES: [&str; 4] = ["ctxgate", "tantivy", "tantivy-own", "fts5"];

/// The phases, each in its own child process.
const PHASES: [&str; 3] = ["bulk", "query", "add"];

/// The phases of the team layout (`hook`: ctxgate only).
const TEAM_PHASES: [&str; 5] = ["bulk", "session", "others", "global", "hook"];

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
    let mut engines: Option<Vec<String>> = None;
    let (mut dir, mut keep, mut json) = (None, false, None);
    let mut layout_team = false;
    let mut team: [Option<u32>; 3] = [None; 3];
    let mut it = args;
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => turns = value()?.parse().context("--turns")?,
            "--sessions" => sessions = Some(value()?.parse().context("--sessions")?),
            "--samples" => samples = value()?.parse().context("--samples")?,
            "--adds" => adds = value()?.parse().context("--adds")?,
            "--seed" => seed = value()?.parse().context("--seed")?,
            "--engines" => engines = Some(value()?.split(',').map(|e| e.trim().to_string()).collect()),
            "--layout" => match value()?.as_str() {
                "team" => layout_team = true,
                "default" => layout_team = false,
                other => bail!("unknown layout {other}: expected team or default\n{USAGE}"),
            },
            "--projects" => team[0] = Some(value()?.parse().context("--projects")?),
            "--sessions-per-project" => team[1] = Some(value()?.parse().context("--sessions-per-project")?),
            "--turns-per-session" => team[2] = Some(value()?.parse().context("--turns-per-session")?),
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
    let known: &[&str] = if layout_team { &TEAM_ENGINES } else { &ENGINES };
    let engines = engines.unwrap_or_else(|| known.iter().map(|e| e.to_string()).collect());
    if let Some(bad) = engines.iter().find(|e| !known.contains(&e.as_str())) {
        bail!("unknown engine {bad}: expected some of {}", known.join(","));
    }
    let mut setup = Setup { turns, sessions, samples, adds, seed, dir: PathBuf::new(), team: None };
    if layout_team {
        let [Some(projects), Some(sessions_per_project), Some(turns_per_session)] = team else {
            bail!("--layout team needs --projects, --sessions-per-project and --turns-per-session\n{USAGE}");
        };
        // The live session of the hook measurement is one more per project (corpus::team).
        if !(1..=65_535).contains(&projects)
            || !(2..65_535).contains(&sessions_per_project)
            || turns_per_session == 0
        {
            bail!(
                "--projects must be 1 to 65535, --sessions-per-project 2 to 65534, --turns-per-session at least 1"
            );
        }
        let shape = common::TeamShape { projects, sessions_per_project, turns_per_session };
        setup.team = Some(shape);
        setup.turns = setup.team().map_or(0, |t| t.turns());
        setup.sessions = projects * sessions_per_project;
    } else if team.iter().any(Option::is_some) {
        bail!("--projects, --sessions-per-project and --turns-per-session go with --layout team");
    }
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
    if setup.team.is_some() {
        return team_run(&args, &setup, temp);
    }
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

/// The team layout's run: each engine's phases in children, then the table of ratios to
/// tantivy.
fn team_run(args: &Args, setup: &Setup, temp: Option<tempfile::TempDir>) -> Result<()> {
    let shape = setup.team.context("a team run without a team layout")?;
    if args.engines.iter().any(|e| e == "ctxgate") {
        hook_phase::ctxgate_binary()?;
    }
    eprintln!(
        "corpus: team layout, {} projects x {} sessions x {} turns = {} turns, seed {}, in {}",
        shape.projects,
        shape.sessions_per_project,
        shape.turns_per_session,
        setup.turns,
        setup.seed,
        setup.dir.display()
    );
    let text_bytes = setup.write_corpus()?;
    let mut results: BTreeMap<String, Figures> = BTreeMap::new();
    for engine in &args.engines {
        let mut figures = Figures::new();
        figures.insert("bulk.text_bytes".into(), text_bytes as f64);
        for phase in TEAM_PHASES {
            if phase == "hook" && engine != "ctxgate" {
                continue;
            }
            eprintln!("{engine}: {phase}");
            figures.extend(run_child(setup, phase, engine)?);
        }
        results.insert(engine.clone(), figures);
    }
    print!("{}", report::team_markdown(setup, &results, &args.engines));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report::json(setup, &results))?;
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
        ("bulk", "tantivy-own") => tantivy_own::bulk(&setup)?,
        ("session" | "others" | "global", "ctxgate") => ctxgate_engine::team_query(&setup, &phase)?,
        ("session" | "others" | "global", "tantivy") => tantivy_engine::team_query(&setup, &phase)?,
        ("session" | "others" | "global", "tantivy-own") => tantivy_own::team_query(&setup, &phase)?,
        ("session" | "others" | "global", "fts5") => fts5_engine::team_query(&setup, &phase)?,
        ("hook", "ctxgate") => hook_phase::hook(&setup)?,
        ("add", "fts5") => fts5_engine::add(&setup)?,
        _ => bail!("child: unknown phase {phase} or engine {engine}"),
    };
    println!("{}", serde_json::to_string(&figures)?);
    Ok(())
}
