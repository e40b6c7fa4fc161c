//! `measure --turns N`: latency of `select` and durable `add_turn` on an index of N turns in
//! one session, with peak RSS and build throughput. Run it in release mode:
//!
//! ```text
//! cargo run --release -p corpus --bin measure -- --turns 100000
//! ```
//!
//! The index is built once and cached under `target/ctxgate-bench/` (see `corpus::index`);
//! measurements run on a copy, so the cache stays at exactly N turns.
//!
//! Besides `select` and `add_turn` it times two parts of a selection, to show where the time
//! goes: `gate only` (open a read view, weigh the query's anchors, decide the topic) and
//! `as_of=0` (the same plus reading and decoding every posting of the query's anchors, which
//! are then dropped as too new). `select` minus `as_of=0` is scoring, reading the candidate
//! turns, pruning and choosing. The `fit` line regresses select latency on the postings read.

use anyhow::{Context, Result, bail};
use corpus::index::{self, SESSION};
use corpus::timing::{ms, report, time_each, vm_kib};
use corpus::{Corpus, TopicId};
use ctxgate::{Gatekeeper, Options};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: measure [--turns N (10000)] [--samples K (200)] [--seed X (42)] \
[--threads T (0 = all cores)] [--quick-repair | --no-quick-repair] [--rebuild]";

struct Args {
    turns: u32,
    samples: usize,
    seed: u64,
    threads: usize,
    quick_repair: bool,
    rebuild: bool,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        turns: 10_000,
        samples: 200,
        seed: 42,
        threads: 0,
        quick_repair: Options::default().quick_repair,
        rebuild: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => args.turns = value()?.parse().context("--turns")?,
            "--samples" => args.samples = value()?.parse().context("--samples")?,
            "--seed" => args.seed = value()?.parse().context("--seed")?,
            "--threads" => args.threads = value()?.parse().context("--threads")?,
            "--no-quick-repair" => args.quick_repair = false,
            "--quick-repair" => args.quick_repair = true,
            "--rebuild" => args.rebuild = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    if args.samples == 0 || args.turns == 0 {
        bail!("--turns and --samples must be at least 1");
    }
    Ok(args)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    if cfg!(debug_assertions) {
        eprintln!("warning: debug build; run with --release for meaningful numbers");
    }
    let corpus = Corpus::new(args.seed);

    eprintln!("preparing an index of {} turns (seed {})", args.turns, args.seed);
    let cached = index::cached_index(args.turns, args.seed, args.rebuild, |done| {
        if done % 10_000 == 0 {
            eprintln!("  built {done} turns");
        }
    })?;
    let build = &cached.build;
    println!("index        {}", cached.path.display());
    println!(
        "build        {} turns in {:.1} s = {:.0} turns/s (durable add_turn, quick_repair off){}",
        build.turns,
        build.seconds,
        build.turns_per_second(),
        if cached.built_now { "" } else { ", cached from an earlier run" }
    );
    println!("file         {:.1} MiB", build.file_bytes as f64 / (1024.0 * 1024.0));
    let build_hwm = vm_kib("VmHWM");
    if cached.built_now {
        println!("peak RSS     {} (build)", kib(build_hwm));
    }

    let (_dir, work) = index::working_copy(&cached.path)?;
    if !corpus::timing::reset_peak_rss() {
        eprintln!("note: cannot reset the peak RSS; it includes the build");
    }
    let options = Options { threads: args.threads, quick_repair: args.quick_repair, ..Options::default() };
    let started = Instant::now();
    let gk = Gatekeeper::open(&work, options)?;
    let open_time = started.elapsed();
    let stats = gk.stats()?;
    println!(
        "open         {} | {} turns, {} anchors, {} postings, {} pending",
        ms(open_time),
        stats.turns,
        stats.anchors,
        stats.postings,
        stats.pending_turns
    );
    let session = gk.session(SESSION)?;

    // Follow-up questions rotating over every topic.
    let queries: Vec<String> = (0..4)
        .flat_map(|n| TopicId::all().map(move |t| (t, n)))
        .map(|(t, n)| corpus.query_for(t, n))
        .collect();
    for query in queries.iter().take(10) {
        session.select(query)?; // warm the page cache and the thread pool
    }

    let mut empty = 0;
    let mut blocks = 0;
    let mut postings = Vec::with_capacity(args.samples);
    let mut found = Vec::with_capacity(args.samples);
    let select = time_each(args.samples, |i| {
        let selection = session.select(&queries[i % queries.len()])?;
        empty += usize::from(selection.blocks.is_empty());
        found.push(!selection.blocks.is_empty());
        blocks += selection.blocks.len();
        postings.push(postings_read(&selection, stats.turns));
        Ok(())
    })?;
    report("select", &select);
    let pick = |want: bool| -> Vec<Duration> {
        select.iter().zip(&found).filter(|(_, f)| **f == want).map(|(t, _)| *t).collect()
    };
    let (found_times, empty_times) = (pick(true), pick(false));
    if !empty_times.is_empty() && !found_times.is_empty() {
        report("  non-empty", &found_times);
        report("  empty", &empty_times);
    }
    println!(
        "             {:.1} blocks per selection, {empty} of {} empty",
        blocks as f64 / args.samples as f64,
        args.samples
    );
    if empty * 2 > args.samples {
        bail!("most selections were empty: the select pipeline is broken, its timing is meaningless");
    }
    breakdown(&select, &postings, &queries);
    let gate = time_each(args.samples, |i| {
        session.gate(&queries[i % queries.len()], None)?;
        Ok(())
    })?;
    report("gate only", &gate);
    // As of turn 0 every posting is read and decoded, then dropped as too new: the selection
    // without scoring, turn reads, pruning and choosing.
    let as_of_zero = ctxgate::SelectOptions { as_of: Some(0), ..Default::default() };
    let read_only = time_each(args.samples, |i| {
        let selection = session.select_with(&queries[i % queries.len()], &as_of_zero)?;
        if !selection.blocks.is_empty() {
            bail!("a selection as of turn 0 has blocks");
        }
        Ok(())
    })?;
    report("as_of=0", &read_only);
    let stats_time = time_each(args.samples.min(50), |_| {
        gk.stats()?;
        Ok(())
    })?;
    report("stats", &stats_time);

    let mut upcoming = corpus.session(0).skip(args.turns as usize);
    let mut expected = args.turns;
    let mut add_next = || -> Result<()> {
        let turn = upcoming.next().context("the corpus is endless")?;
        let id = session.add_turn(&turn.user, &turn.assistant)?;
        if id != expected {
            bail!("add_turn returned {id}, expected {expected}");
        }
        expected += 1;
        Ok(())
    };
    let add = time_each(args.samples, |_| add_next())?;
    report(if args.quick_repair { "add_turn" } else { "add_turn (no quick_repair)" }, &add);
    // The call that brings the pending turns to FOLD_BATCH also folds them into postings.
    let batch = ctxgate::store::FOLD_BATCH as u64;
    let folds = |i: usize| (stats.pending_turns + i as u64 + 1).is_multiple_of(batch);
    let part = |want: bool| -> Vec<Duration> {
        add.iter().enumerate().filter(|(i, _)| folds(*i) == want).map(|(_, t)| *t).collect()
    };
    let (fold, plain) = (part(true), part(false));
    report("  no fold", &plain);
    if !fold.is_empty() {
        report("  with fold", &fold);
    }

    // Every view decodes the pending turns' anchor rows when it opens. Compare right after a
    // fold with FOLD_BATCH - 1 turns pending.
    let mut pending = gk.stats()?.pending_turns;
    while pending != 0 {
        add_next()?;
        pending = (pending + 1) % batch;
    }
    let runs = args.samples.min(100);
    let gate_at = |label: &str| -> Result<()> {
        let gate = time_each(runs, |i| {
            session.gate(&queries[i % queries.len()], None)?;
            Ok(())
        })?;
        let select = time_each(runs, |i| {
            session.select(&queries[i % queries.len()])?;
            Ok(())
        })?;
        report(&format!("gate {label}"), &gate);
        report(&format!("select {label}"), &select);
        Ok(())
    };
    gate_at("@0")?;
    for _ in 1..batch {
        add_next()?;
    }
    gate_at(&format!("@{}", batch - 1))?;

    println!("peak RSS     {} (open + measurements)", kib(vm_kib("VmHWM")));
    println!("current RSS  {}", kib(vm_kib("VmRSS")));
    Ok(())
}

/// Postings recall reads for a selection: the sum of its anchors' document frequencies,
/// recovered from their IDF (`ln((N + 1) / (df + 1)) + 1`). Exact for one session.
fn postings_read(selection: &ctxgate::Selection, blocks: u64) -> f64 {
    let n = blocks as f64 + 1.0;
    selection.anchors.iter().map(|a| (n / (a.idf - 1.0).exp() - 1.0).max(0.0)).sum()
}

/// Where select's time goes: how its latency follows the postings it reads.
fn breakdown(times: &[Duration], postings: &[f64], queries: &[String]) {
    let mean_postings = postings.iter().sum::<f64>() / postings.len() as f64;
    let mean_ms = times.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / times.len() as f64;
    // Least squares fit: time = fixed + per_posting * postings.
    let mean_t = mean_ms;
    let (mut cov, mut var) = (0.0, 0.0);
    for (t, p) in times.iter().zip(postings) {
        let dt = t.as_secs_f64() * 1e3 - mean_t;
        let dp = p - mean_postings;
        cov += dt * dp;
        var += dp * dp;
    }
    let slope = if var > 0.0 { cov / var } else { 0.0 };
    let (mut sorted_p, mut corr_t) = (postings.to_vec(), 0.0);
    sorted_p.sort_by(f64::total_cmp);
    let var_t: f64 = times.iter().map(|t| (t.as_secs_f64() * 1e3 - mean_t).powi(2)).sum();
    if var > 0.0 && var_t > 0.0 {
        corr_t = cov / (var.sqrt() * var_t.sqrt());
    }
    println!(
        "  postings   p50 {:.0} | max {:.0} per select (sum of the query anchors' df)",
        sorted_p[sorted_p.len() / 2],
        sorted_p[sorted_p.len() - 1]
    );
    println!(
        "  fit        time = {:.3} ms + {:.1} ns x postings (r = {corr_t:.2})",
        mean_ms - slope * mean_postings,
        slope * 1e6
    );
    let mut slowest: Vec<usize> = (0..times.len()).collect();
    slowest.sort_by_key(|&i| std::cmp::Reverse(times[i]));
    for &i in slowest.iter().take(3) {
        println!(
            "  slow       {} {:.0} postings {:?}",
            ms(times[i]),
            postings[i],
            queries[i % queries.len()]
        );
    }
}

fn kib(value: Option<u64>) -> String {
    value.map_or_else(|| "unknown".to_string(), |k| format!("{:.1} MiB", k as f64 / 1024.0))
}
