//! `eval`: measures ctxgate's topic gate on labelled dialogue data, and its selection's recall
//! on long conversations with annotated evidence (`--recall-dir`, see [`recall`]).
//!
//! For each set it imports the conversations into one fresh index (all sessions, like a
//! long-lived index), asks the gate every task as of its history, and compares the answers
//! with the labels, beside two baselines computed in the same run: always continue, and the
//! previous-turn overlap at its best threshold on the set. The data is read from its paths,
//! never copied.
//!
//! ```text
//! cargo run --release -p eval -- --dev-dir ../shared/eval-dev [--selection]
//! cargo run --release -p eval -- --conversations c.jsonl --tasks t.jsonl --name crosswoz --json
//! cargo run --release -p eval -- --recall-dir ../shared/eval-dev/recall [--json]
//! cargo run --release -p eval -- --contamination [--seeds 5]
//! ```

mod baseline;
mod bm25;
mod contamination;
mod data;
mod metrics;
mod precision;
mod recall;
mod recall_report;
mod report;
mod selection;
mod topic_gate;

use anyhow::{Context, Result};
use clap::{ArgGroup, Parser};
use ctxgate::{Gatekeeper, ImportOptions, Options};
use data::{Conversations, Task};
use metrics::Confusion;
use report::{MethodResult, Report, SetResult};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The sets of the dev directory, as `conversations/<set>.jsonl` and `gate/<set>.jsonl`.
const DEV_SETS: [&str; 4] = ["crosswoz", "multiwoz", "kdconv-spliced", "multiwoz-spliced"];

/// Measure ctxgate's topic gate against labelled continue/switch tasks, or its selection's
/// recall against annotated evidence (--recall-dir).
#[derive(Debug, Parser)]
#[command(name = "eval", group(ArgGroup::new("input").required(true).args(["dev_dir", "conversations", "recall_dir", "contamination"])))]
struct Args {
    /// Conversations file: one turn per line, {"session","turn","user","assistant"}.
    #[arg(long, requires = "tasks", conflicts_with = "dev_dir")]
    conversations: Option<PathBuf>,
    /// Gate tasks file: {"session","upto_turn","query","expected"} per line.
    #[arg(long, requires = "conversations", conflicts_with = "dev_dir")]
    tasks: Option<PathBuf>,
    /// Name of the set in the output (default: the tasks file's stem).
    #[arg(long, requires = "tasks")]
    name: Option<String>,
    /// Run every set of a dev directory (conversations/<set>.jsonl, gate/<set>.jsonl):
    /// crosswoz, multiwoz, kdconv-spliced, multiwoz-spliced.
    #[arg(long, conflicts_with = "recall_dir")]
    dev_dir: Option<PathBuf>,
    /// Measure recall instead, on a directory holding conversations.jsonl and tasks.jsonl
    /// (eval-dev's `recall/`): ctxgate minimal and fill at 1000, 2000 and 4000 est tokens
    /// beside bm25, bm25 over half-turns, the oracle and recency.
    #[arg(long, conflicts_with_all = ["conversations", "selection"])]
    recall_dir: Option<PathBuf>,
    /// With --recall-dir: also write every ctxgate selection to this file, one JSON line per
    /// question, policy and budget (question id, decision, anchors, blocks as handed over).
    #[arg(long, requires = "recall_dir")]
    dump: Option<PathBuf>,
    /// Also measure selection: evidence recall, tokens and (spliced sets) context taken
    /// from other dialogues, for `minimal` and `fill` beside the latest turns.
    #[arg(long)]
    selection: bool,
    /// Run the generated contamination protocol instead (`contamination.rs`): every script,
    /// layout, phase (fresh index or not), policy and budget (300, 4000), over `--seeds` seeds;
    /// prints blocks taken from another topic and known subjects left unanswered.
    #[arg(long, conflicts_with_all = ["dev_dir", "conversations", "recall_dir", "selection"])]
    contamination: bool,
    /// Seeds per combination for --contamination.
    #[arg(long, default_value_t = 5, requires = "contamination")]
    seeds: u64,
    /// Print the results as one JSON document.
    #[arg(long)]
    json: bool,
}

/// A set to evaluate.
struct SetPaths {
    name: String,
    conversations: PathBuf,
    tasks: PathBuf,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.contamination {
        return contamination_table(args.seeds);
    }
    if let Some(dir) = &args.recall_dir {
        eprintln!("eval: recall ...");
        let report =
            recall::run(&dir.join("conversations.jsonl"), &dir.join("tasks.jsonl"), args.dump.as_deref())
                .with_context(|| format!("recall on {}", dir.display()))?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            print!("{}", report.to_text());
        }
        return Ok(());
    }
    let started = Instant::now();
    let sets = match (&args.dev_dir, &args.conversations, &args.tasks) {
        (Some(dir), _, _) => DEV_SETS
            .iter()
            .map(|name| SetPaths {
                name: name.to_string(),
                conversations: dir.join("conversations").join(format!("{name}.jsonl")),
                tasks: dir.join("gate").join(format!("{name}.jsonl")),
            })
            .collect(),
        (None, Some(conversations), Some(tasks)) => vec![SetPaths {
            name: args.name.clone().unwrap_or_else(|| stem(tasks)),
            conversations: conversations.clone(),
            tasks: tasks.clone(),
        }],
        _ => unreachable!("clap requires --dev-dir, --recall-dir or both --conversations and --tasks"),
    };
    let mut results = Vec::new();
    for set in &sets {
        eprintln!("eval: {} ...", set.name);
        results.push(evaluate(set, args.selection).with_context(|| format!("set {}", set.name))?);
    }
    let report = Report { sets: results, total_seconds: started.elapsed().as_secs_f64() };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    Ok(())
}

/// Prints the contamination protocol's counts, one row per combination, summed over seeds.
fn contamination_table(seeds: u64) -> Result<()> {
    use contamination::{Case, Layout, Phase, Script, Seen};
    use ctxgate::Policy;
    println!(
        "script layout      phase policy  budget  rounds given blocks cross bare_cross answerable unanswered  rounds_crossed (median round)"
    );
    let mut total = Seen::default();
    for script in [Script::Latin, Script::Han] {
        for layout in [Layout::RoundRobin, Layout::Runs] {
            for phase in [Phase::Early, Phase::Late] {
                for policy in [Policy::Minimal, Policy::Fill] {
                    for budget in [300, 4000] {
                        let mut seen = Seen::default();
                        for n in 0..seeds {
                            let case = Case { script, layout, phase, policy, budget, seed: 7 + 1000 * n };
                            seen.add(
                                &contamination::run(&case).map_err(|e| anyhow::anyhow!("{case:?}: {e}"))?,
                            );
                        }
                        seen.cross_rounds.sort_unstable();
                        let median = seen.cross_rounds.get(seen.cross_rounds.len() / 2).copied().unwrap_or(0);
                        println!(
                            "{:<6} {:<11} {:<5} {:<7} {:>6} {:>7} {:>5} {:>6} {:>5} {:>10} {:>10} {:>10} {:>8} ({median})",
                            format!("{script:?}"),
                            format!("{layout:?}"),
                            format!("{phase:?}"),
                            format!("{policy:?}"),
                            budget,
                            seen.rounds,
                            seen.rounds_with_blocks,
                            seen.blocks,
                            seen.cross_topic,
                            seen.bare_cross_topic,
                            seen.answerable,
                            seen.unanswered,
                            seen.cross_rounds.len()
                        );
                        if let Some(first) = &seen.first_cross {
                            eprintln!("  first: {first}");
                        }
                        total.add(&seen);
                    }
                }
            }
        }
    }
    println!(
        "total: {} rounds, {} blocks, {} from another topic ({} for bare follow-ups), {} of {} answerable rounds unanswered",
        total.rounds,
        total.blocks,
        total.cross_topic,
        total.bare_cross_topic,
        total.unanswered,
        total.answerable
    );
    Ok(())
}

fn stem(path: &Path) -> String {
    path.file_stem().map_or_else(|| path.display().to_string(), |s| s.to_string_lossy().into_owned())
}

fn evaluate(set: &SetPaths, with_selection: bool) -> Result<SetResult> {
    let conversations = Conversations::read(&set.conversations)?;
    let tasks = Task::read_all(&set.tasks, &conversations)?;
    let mismatched = tasks
        .iter()
        .filter(|t| conversations.turn(&t.session, t.upto_turn).is_some_and(|turn| turn.user != t.query))
        .count();
    if mismatched > 0 {
        eprintln!(
            "eval: {}: {mismatched} tasks whose query is not the user text of turn upto_turn",
            set.name
        );
    }

    let dir = tempfile::tempdir().context("cannot create a temporary directory for the index")?;
    let gatekeeper = Gatekeeper::open(dir.path().join("eval.redb"), Options::default())?;
    let gate = topic_gate::run(&gatekeeper, &set.conversations, &tasks)?;
    if gate.imported_turns != conversations.turn_count() as u64 {
        eprintln!(
            "eval: {}: imported {} turns but the file has {}",
            set.name,
            gate.imported_turns,
            conversations.turn_count()
        );
    }

    let started = Instant::now();
    let mut always_continue = Confusion::default();
    for task in &tasks {
        always_continue.record(task.expected == data::Expected::Switch, false);
    }
    let scored = baseline::score(&conversations, &tasks);
    let (threshold, overlap) = baseline::best_threshold(&scored);
    let baseline_seconds = started.elapsed().as_secs_f64();

    let methods = vec![
        MethodResult { method: "ctxgate", threshold: None, summary: gate.confusion.summary() },
        MethodResult { method: "always-continue", threshold: None, summary: always_continue.summary() },
        MethodResult {
            method: "previous-turn-overlap",
            threshold: Some(threshold),
            summary: overlap.summary(),
        },
    ];
    // A spliced set chains dialogues: its switches are where the next one starts.
    let spliced = set.name.ends_with("spliced");
    let dialogues = spliced.then(|| selection::Dialogues::from_switches(&tasks));
    let selection = if with_selection {
        Some(selection::run(&gatekeeper, &conversations, &tasks, dialogues.as_ref())?)
    } else {
        None
    };
    let long_selection =
        if with_selection { Some(long_history_selection(&conversations, &tasks, spliced)?) } else { None };
    Ok(SetResult {
        name: set.name.clone(),
        conversations: set.conversations.clone(),
        tasks_file: set.tasks.clone(),
        imported_turns: gate.imported_turns,
        tasks: gate.confusion.tasks(),
        switches: gate.confusion.expected_switches(),
        methods,
        branches: gate.branches,
        branch_mismatches: gate.branch_mismatches,
        import_seconds: gate.import_seconds,
        gate_seconds: gate.gate_seconds,
        baseline_seconds,
        selection,
        long_selection,
    })
}

/// Selection with every session of the set chained into one long history (in a second,
/// fresh index): the query's own dialogue must win over thousands of turns of others. Every
/// source session is a dialogue of its own (and, in a spliced set, every switch starts one).
fn long_history_selection(
    conversations: &Conversations,
    tasks: &[Task],
    spliced: bool,
) -> Result<selection::SelectionRun> {
    const NAME: &str = "long";
    let (chained, tasks, session_starts) = conversations.chained(tasks, NAME);
    let name = NAME.to_string();
    let switches =
        tasks.iter().filter(|t| spliced && t.expected == data::Expected::Switch).map(|t| t.upto_turn);
    let dialogues = selection::Dialogues::from_starts(
        session_starts.into_iter().chain(switches).map(|turn| (&name, turn)),
    );
    let dir = tempfile::tempdir().context("cannot create a temporary directory for the index")?;
    let path = dir.path().join("long.jsonl");
    chained.write_jsonl(&path)?;
    let gatekeeper = Gatekeeper::open(dir.path().join("long.redb"), Options::default())?;
    gatekeeper
        .import(std::slice::from_ref(&path), &ImportOptions::default())
        .with_context(|| format!("cannot import {}", path.display()))?;
    selection::run(&gatekeeper, &chained, &tasks, Some(&dialogues))
}
