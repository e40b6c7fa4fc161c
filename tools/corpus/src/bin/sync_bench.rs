//! `sync_bench`: `ctxgate sync` through a real PostgreSQL. Imports N generated turns into
//! index A, pushes them (first sync), pulls them into an empty index B, checks that B's
//! `select` answers as A's (which imported the log directly), then times incremental syncs:
//! 10 new turns in one session and in ten sessions, pushed from A and pulled into B, and a
//! sync with nothing to do. Import's own rate on the same machine is printed beside, as the
//! ratio holds on a loaded machine when absolute figures do not.
//!
//! ```text
//! cargo run --release -p corpus --bin sync_bench -- --turns 100000 --sessions 100
//! ```
//!
//! Starts a PostgreSQL of the distribution's packages in a temporary directory (as
//! `tests/sync.rs` does; as root, under the `postgres` user), or uses `--remote URL`.

use anyhow::{Context, Result, bail};
use corpus::Corpus;
use ctxgate::sync::{self, SyncOptions};
use ctxgate::{Format, Gatekeeper, ImportOptions, Options};
use std::io::{BufWriter, Write};
use std::time::Instant;

#[path = "../../../../tests/common/postgres.rs"]
#[allow(dead_code)]
mod postgres_server;

const USAGE: &str =
    "usage: sync_bench [--turns N (100000)] [--sessions S (100)] [--seed X (42)] [--remote URL]";

fn main() -> Result<()> {
    let (mut turns, mut sessions, mut seed, mut remote) = (100_000u64, 100u32, 42u64, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            return Ok(());
        }
        let value = args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--turns" => turns = value.parse().context("--turns")?,
            "--sessions" => sessions = value.parse().context("--sessions")?,
            "--seed" => seed = value.parse().context("--seed")?,
            "--remote" => remote = Some(value),
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    let server = match remote {
        Some(_) => None,
        None => Some(postgres_server::Server::start().context("no PostgreSQL server could be started")?),
    };
    let url = match (&remote, &server) {
        (Some(url), _) => url.clone(),
        (None, Some(server)) => server.admin_url(),
        (None, None) => unreachable!("a server was started"),
    };
    sync::init(&url)?;
    let dir = tempfile::tempdir()?;
    let log = dir.path().join("log.jsonl");
    let corpus = Corpus::new(seed);
    let mut out = BufWriter::new(std::fs::File::create(&log)?);
    corpus::jsonl::write(&mut out, corpus.spread(turns, sessions), corpus::session_name)?;
    out.flush()?;
    drop(out);

    let open = |name: &str| Gatekeeper::open(dir.path().join(name), Options::default());
    let a = open("a.redb")?;
    let started = Instant::now();
    let options = ImportOptions { format: Format::Jsonl, ..ImportOptions::default() };
    let imported = a.import(std::slice::from_ref(&log), &options)?;
    let import_secs = started.elapsed().as_secs_f64();
    println!(
        "import   {:>7} turns  {:>8.2} s  {:>8.0} turns/s",
        imported.new_turns,
        import_secs,
        imported.new_turns as f64 / import_secs
    );

    let space = format!("bench-{}", std::process::id());
    let only = SyncOptions { spaces: vec![space.clone()], allow_unredacted: false };
    sync::share(&a, &space, None)?;
    let (pushed, push_secs) = timed(|| sync::sync(&a, &url, &only))?;
    let pushed_turns = pushed.spaces[0].pushed_turns;
    println!(
        "push     {pushed_turns:>7} turns  {push_secs:>8.2} s  {:>8.0} turns/s",
        pushed_turns as f64 / push_secs
    );

    let b = open("b.redb")?;
    sync::share(&b, &space, None)?;
    let (pulled, pull_secs) = timed(|| sync::sync(&b, &url, &only))?;
    let pulled_turns = pulled.spaces[0].pulled_turns;
    println!(
        "pull     {pulled_turns:>7} turns  {pull_secs:>8.2} s  {:>8.0} turns/s",
        pulled_turns as f64 / pull_secs
    );
    println!(
        "ratios   push/import {:.2}, pull/import {:.2} (turns/s)",
        (pushed_turns as f64 / push_secs) / (imported.new_turns as f64 / import_secs),
        (pulled_turns as f64 / pull_secs) / (imported.new_turns as f64 / import_secs)
    );

    let mut same = 0;
    let topics: Vec<corpus::TopicId> = corpus::TopicId::all().collect();
    let queries: Vec<(String, String)> = (0..20u32)
        .map(|i| {
            (
                corpus::session_name(i % sessions),
                corpus.query_for(topics[i as usize % topics.len()], u64::from(i)),
            )
        })
        .collect();
    for (session, query) in &queries {
        let from_a = serde_json::to_value(a.session(session)?.select(query)?)?;
        let from_b = serde_json::to_value(b.session(session)?.select(query)?)?;
        same += usize::from(from_a == from_b);
    }
    println!("select   {same}/{} answers the same after the pull as after the direct import", queries.len());

    for (label, spread) in [("1 session", 1u32), ("10 sessions", 10)] {
        for i in 0..10u32 {
            let session = a.session(&corpus::session_name(i % spread))?;
            session.add_turn(
                &format!("follow-up {i} on the kafka consumer offsets"),
                "commit them after processing",
            )?;
        }
        let (push, push_secs) = timed(|| sync::sync(&a, &url, &only))?;
        let (pull, pull_secs) = timed(|| sync::sync(&b, &url, &only))?;
        println!(
            "10 turns ({label}): push {} turns in {:.1} ms, pull {} turns in {:.1} ms",
            push.spaces[0].pushed_turns,
            push_secs * 1000.0,
            pull.spaces[0].pulled_turns,
            pull_secs * 1000.0
        );
    }
    let (_, idle_secs) = timed(|| sync::sync(&b, &url, &only))?;
    println!("nothing to do: {:.1} ms", idle_secs * 1000.0);
    Ok(())
}

fn timed<T>(f: impl FnOnce() -> Result<T, sync::SyncError>) -> Result<(T, f64)> {
    let started = Instant::now();
    let value = f()?;
    Ok((value, started.elapsed().as_secs_f64()))
}
