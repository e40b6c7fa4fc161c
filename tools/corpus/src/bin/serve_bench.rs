//! `serve_bench`: `ctxgate serve` over stdio on a large session, as agents use it. Builds (or
//! reuses) an index of N turns in one session by importing generated canonical JSONL, starts
//! several real `ctxgate serve` processes on one copy of it, and drives each with an MCP client
//! (rmcp) calling `select_context` one call after another, all servers at once. Prints
//! requests/s, latency percentiles, and each server's peak and current RSS (VmHWM, VmRSS)
//! after the first `--rss-early` calls, after ten times as many, and after all of them. Run it
//! in release mode:
//!
//! ```text
//! cargo build --release --bin ctxgate && \
//! cargo run --release -p corpus --bin serve_bench -- --turns 100000 --requests 10000
//! ```
//!
//! The server binary is `target/release/ctxgate` beside this one unless `--ctxgate PATH` is given.

use anyhow::{Context, Result, bail};
use corpus::index::{self, SESSION};
use corpus::timing::{process_vm_kib, report};
use corpus::{Corpus, TopicId};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: serve_bench [--turns N (100000)] [--requests R per server (10000)] \
[--servers S (2)] [--rss-early K (100)] [--seed X (42)] [--busy-timeout SECS (30)] \
[--ctxgate PATH] [--rebuild]";

struct Args {
    turns: u32,
    requests: usize,
    servers: usize,
    rss_early: usize,
    seed: u64,
    busy_timeout: f64,
    ctxgate: PathBuf,
    rebuild: bool,
}

fn parse_args() -> Result<Args> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut args = Args {
        turns: 100_000,
        requests: 10_000,
        servers: 2,
        rss_early: 100,
        seed: 42,
        busy_timeout: 30.0,
        ctxgate: exe.with_file_name("ctxgate"),
        rebuild: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => args.turns = value()?.parse().context("--turns")?,
            "--requests" => args.requests = value()?.parse().context("--requests")?,
            "--servers" => args.servers = value()?.parse().context("--servers")?,
            "--rss-early" => args.rss_early = value()?.parse().context("--rss-early")?,
            "--seed" => args.seed = value()?.parse().context("--seed")?,
            "--busy-timeout" => args.busy_timeout = value()?.parse().context("--busy-timeout")?,
            "--ctxgate" => args.ctxgate = value()?.into(),
            "--rebuild" => args.rebuild = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    if args.turns == 0 || args.requests == 0 || args.servers == 0 {
        bail!("--turns, --requests and --servers must be at least 1");
    }
    if !args.ctxgate.is_file() {
        bail!("no ctxgate binary at {} (build it, or give --ctxgate PATH)", args.ctxgate.display());
    }
    Ok(args)
}

type Client = RunningService<RoleClient, ()>;

/// One server process and the client driving it.
struct Server {
    client: Client,
    pid: u32,
}

async fn start(ctxgate: &Path, db: &Path, busy_timeout: f64) -> Result<Server> {
    let mut command = tokio::process::Command::new(ctxgate);
    command.arg("serve").arg("--db").arg(db).arg("--busy-timeout").arg(busy_timeout.to_string()).arg("-q");
    let transport = TokioChildProcess::new(command).context("cannot start ctxgate serve")?;
    let pid = transport.id().context("the server has no pid")?;
    let client = ().serve(transport).await.context("MCP initialization failed")?;
    Ok(Server { client, pid })
}

/// What one server's driver measured.
struct Run {
    latencies: Vec<Duration>,
    empty: usize,
    /// (calls so far, VmHWM, VmRSS) after `--rss-early` calls, after 10 times as many, and at the end.
    memory: Vec<(usize, Option<u64>, Option<u64>)>,
}

async fn drive(server: Server, queries: Arc<Vec<String>>, offset: usize, args: Arc<Args>) -> Result<Run> {
    let mut run = Run { latencies: Vec::with_capacity(args.requests), empty: 0, memory: Vec::new() };
    for i in 0..args.requests {
        let query = &queries[(offset + i) % queries.len()];
        let mut arguments = serde_json::Map::new();
        arguments.insert("session".into(), SESSION.into());
        arguments.insert("query".into(), query.as_str().into());
        let params = CallToolRequestParams::new("select_context").with_arguments(arguments);
        let started = Instant::now();
        let result = server.client.call_tool(params).await.context("select_context")?;
        run.latencies.push(started.elapsed());
        if result.is_error == Some(true) {
            bail!("select_context failed: {:?}", result.structured_content);
        }
        let blocks = result.structured_content.as_ref().and_then(|c| c["blocks"].as_array().map(Vec::len));
        run.empty += usize::from(blocks.unwrap_or(0) == 0);
        let done = i + 1;
        if done == args.requests || done == args.rss_early || done == args.rss_early * 10 {
            run.memory.push((done, process_vm_kib(server.pid, "VmHWM"), process_vm_kib(server.pid, "VmRSS")));
        }
    }
    server.client.cancel().await.context("cannot stop the client")?;
    Ok(run)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    let args = Arc::new(parse_args()?);
    eprintln!(
        "preparing an index of {} turns (seed {}) with {}",
        args.turns,
        args.seed,
        args.ctxgate.display()
    );
    let (ctxgate, turns, seed, rebuild) = (args.ctxgate.clone(), args.turns, args.seed, args.rebuild);
    let cached =
        tokio::task::spawn_blocking(move || index::cached_imported_index(turns, seed, &ctxgate, rebuild))
            .await??;
    println!("index        {}", cached.path.display());
    println!(
        "build        {} turns in {:.1} s by ctxgate import{}",
        cached.build.turns,
        cached.build.seconds,
        if cached.built_now { "" } else { ", cached from an earlier run" }
    );
    println!("file         {:.1} MiB", cached.build.file_bytes as f64 / (1024.0 * 1024.0));
    let (_dir, work) = index::working_copy(&cached.path)?;

    let corpus = Corpus::new(args.seed);
    let queries: Arc<Vec<String>> = Arc::new(
        (0..8)
            .flat_map(|n| TopicId::all().map(move |t| (t, n)))
            .map(|(t, n)| corpus.query_for(t, n))
            .collect(),
    );
    let mut servers = Vec::with_capacity(args.servers);
    for _ in 0..args.servers {
        servers.push(start(&args.ctxgate, &work, args.busy_timeout).await?);
    }
    println!(
        "servers      {} x `ctxgate serve` (pids {}), one client each, one call in flight per client",
        args.servers,
        servers.iter().map(|s| s.pid.to_string()).collect::<Vec<_>>().join(", ")
    );
    let started = Instant::now();
    let drivers: Vec<_> = servers
        .into_iter()
        .enumerate()
        .map(|(s, server)| tokio::spawn(drive(server, Arc::clone(&queries), s * 7, Arc::clone(&args))))
        .collect();
    let mut runs = Vec::with_capacity(drivers.len());
    for driver in drivers {
        runs.push(driver.await??);
    }
    let wall = started.elapsed();

    let all: Vec<Duration> = runs.iter().flat_map(|r| r.latencies.iter().copied()).collect();
    let calls = all.len();
    let empty: usize = runs.iter().map(|r| r.empty).sum();
    println!(
        "throughput   {:.0} requests/s ({calls} select_context calls in {:.1} s, all servers together)",
        calls as f64 / wall.as_secs_f64(),
        wall.as_secs_f64()
    );
    report("latency", &all);
    for (s, run) in runs.iter_mut().enumerate() {
        report(&format!("  server {s}"), &run.latencies);
    }
    println!("             {empty} of {calls} selections empty");
    for (s, run) in runs.iter().enumerate() {
        let points: Vec<String> = run
            .memory
            .iter()
            .map(|(calls, hwm, rss)| format!("{calls} calls: peak {} (now {})", kib(*hwm), kib(*rss)))
            .collect();
        println!("RSS          server {s}: {}", points.join(" | "));
    }
    if empty * 2 > calls {
        bail!("most selections were empty: the figures are meaningless");
    }
    Ok(())
}

fn kib(value: Option<u64>) -> String {
    value.map_or_else(|| "unknown".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}
