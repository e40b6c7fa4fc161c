//! `concurrency_bench`: many processes on one index, as agents on one machine use it. Every
//! call is a real `ctxgate` process, timed from spawn to exit:
//!
//! 1. Import throughput: the same generated file of N turns into a fresh index, per binary.
//! 2. Durable `add` on an index of 100k turns, per binary, calls alternating between them.
//! 3. Readers on an idle index (20k turns): 4 processes loop `select`; the file's bytes are
//!    compared before and after.
//! 4. Two readers side by side against one alone, the same calls each: the ratio of their
//!    wall times (1.0 = they never wait for each other), per binary.
//! 5. The stress run: an import of N turns while 4 readers loop `select` and 2 writers loop
//!    `add`; then `verify`, and every acknowledged turn counted back.
//!
//! `--baseline PATH` runs phases 1, 2 and 4 with another build too, in the same run (these
//! machines are shared and noisy: compare within a run). Run it in release mode:
//!
//! ```text
//! cargo build --release --bin ctxgate && \
//! cargo run --release -p corpus --bin concurrency_bench -- --turns 200000 --baseline OLD/ctxgate
//! ```

use anyhow::{Context, Result, bail};
use corpus::timing::{ms, quantile};
use corpus::{Corpus, TopicId};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: concurrency_bench [--turns N (200000)] [--seconds S (10)] [--adds K (200)] \
[--seed X (42)] [--ctxgate PATH] [--baseline PATH]";

const READERS: usize = 4;
const WRITERS: usize = 2;
const SEED_TURNS: u64 = 20_000;
const SEED_SESSIONS: u32 = 10;
const ADD_INDEX_TURNS: u64 = 100_000;

struct Args {
    turns: u64,
    seconds: u64,
    adds: usize,
    seed: u64,
    ctxgate: PathBuf,
    baseline: Option<PathBuf>,
}

fn parse_args() -> Result<Args> {
    let exe = std::env::current_exe().context("cannot find this executable")?;
    let mut args = Args {
        turns: 200_000,
        seconds: 10,
        adds: 200,
        seed: 42,
        ctxgate: exe.with_file_name("ctxgate"),
        baseline: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--turns" => args.turns = value()?.parse().context("--turns")?,
            "--seconds" => args.seconds = value()?.parse().context("--seconds")?,
            "--adds" => args.adds = value()?.parse().context("--adds")?,
            "--seed" => args.seed = value()?.parse().context("--seed")?,
            "--ctxgate" => args.ctxgate = PathBuf::from(value()?),
            "--baseline" => args.baseline = Some(PathBuf::from(value()?)),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    for binary in std::iter::once(&args.ctxgate).chain(&args.baseline) {
        if !binary.exists() {
            bail!(
                "no ctxgate binary at {}: build it (cargo build --release) or pass its path",
                binary.display()
            );
        }
    }
    Ok(args)
}

/// A binary under test, with the label its figures carry.
struct Binary {
    label: &'static str,
    path: PathBuf,
}

impl Binary {
    fn run(&self, db: &Path, args: &[&str]) -> Result<Output> {
        Command::new(&self.path)
            .arg("--db")
            .arg(db)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.path.display()))
    }

    /// Runs `args`, failing on a non-zero exit with its stderr.
    fn ok(&self, db: &Path, args: &[&str]) -> Result<Output> {
        let out = self.run(db, args)?;
        if !out.status.success() {
            bail!(
                "ctxgate {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(out)
    }
}

fn write_jsonl(path: &Path, corpus: &Corpus, turns: u64, sessions: u32, prefix: &str) -> Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    corpus::jsonl::write(&mut out, corpus.spread(turns, sessions), |i| format!("{prefix}-{i:04}"))?;
    out.flush()?;
    Ok(())
}

/// Latency line: p50, p99, max and the number of calls.
fn figures(times: &[Duration]) -> String {
    format!(
        "p50 {} | p99 {} | max {} ({} calls)",
        ms(quantile(times, 0.5)),
        ms(quantile(times, 0.99)),
        ms(quantile(times, 1.0)),
        times.len()
    )
}

/// What a looping process recorded.
#[derive(Default)]
struct Loop {
    times: Vec<Duration>,
    /// Calls that exited non-zero, with the first line of their stderr.
    failures: Vec<String>,
}

/// Calls `call(i)` for i = 0, 1, ... until `stop` is set (or `limit` calls), timing each.
fn looping(stop: &AtomicBool, limit: usize, mut call: impl FnMut(usize) -> Result<Output>) -> Result<Loop> {
    let mut out = Loop::default();
    for i in 0..limit {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let started = Instant::now();
        let result = call(i)?;
        let elapsed = started.elapsed();
        if result.status.success() {
            out.times.push(elapsed);
        } else {
            let stderr = String::from_utf8_lossy(&result.stderr);
            out.failures.push(stderr.lines().next().unwrap_or("").to_string());
        }
    }
    Ok(out)
}

fn reader_call(binary: &Binary, db: &Path, corpus: &Corpus, reader: usize, i: usize) -> Result<Output> {
    let topics: Vec<TopicId> = TopicId::all().collect();
    let query = corpus.query_for(topics[(reader + i) % topics.len()], i as u64);
    let session = format!("seed-{:04}", (reader + i) % SEED_SESSIONS as usize);
    binary.run(db, &["select", "--session", &session, &query])
}

/// `READERS` processes looping `select` for `duration` (or until `stop`).
fn readers(
    binary: &Arc<Binary>,
    db: &Path,
    corpus: &Arc<Corpus>,
    stop: &Arc<AtomicBool>,
) -> Vec<std::thread::JoinHandle<Result<Loop>>> {
    (0..READERS)
        .map(|reader| {
            let (binary, db, corpus, stop) =
                (Arc::clone(binary), db.to_path_buf(), Arc::clone(corpus), Arc::clone(stop));
            std::thread::spawn(move || {
                looping(&stop, usize::MAX, |i| reader_call(&binary, &db, &corpus, reader, i))
            })
        })
        .collect()
}

fn join_all(handles: Vec<std::thread::JoinHandle<Result<Loop>>>) -> Result<Loop> {
    let mut all = Loop::default();
    for handle in handles {
        let one = handle.join().map_err(|_| anyhow::anyhow!("a looping thread panicked"))??;
        all.times.extend(one.times);
        all.failures.extend(one.failures);
    }
    Ok(all)
}

fn main() -> Result<()> {
    let args = parse_args()?;
    let dir = tempfile::tempdir()?;
    let corpus = Arc::new(Corpus::new(args.seed));
    let new = Arc::new(Binary { label: "this build", path: args.ctxgate.clone() });
    let baseline = args.baseline.clone().map(|path| Arc::new(Binary { label: "baseline", path }));
    let binaries: Vec<Arc<Binary>> = std::iter::once(Arc::clone(&new)).chain(baseline.clone()).collect();

    let seed_file = dir.path().join("seed.jsonl");
    let bulk_file = dir.path().join("bulk.jsonl");
    let add_file = dir.path().join("add.jsonl");
    write_jsonl(&seed_file, &corpus, SEED_TURNS, SEED_SESSIONS, "seed")?;
    write_jsonl(&bulk_file, &Corpus::new(args.seed + 1), args.turns, 100, "bulk")?;
    write_jsonl(&add_file, &Corpus::new(args.seed + 2), ADD_INDEX_TURNS, 50, "hist")?;
    let seed_db = dir.path().join("seed.redb");
    new.ok(&seed_db, &["import", seed_file.to_str().context("path")?])?;
    let bulk = bulk_file.to_str().context("path")?;

    println!("# 1. import of {} turns into a fresh index", args.turns);
    for round in 0..2 {
        for binary in &binaries {
            let db = dir.path().join(format!("import-{round}-{}.redb", binary.label.replace(' ', "-")));
            let started = Instant::now();
            binary.ok(&db, &["import", bulk])?;
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{:<10} round {round}: {secs:.2} s, {:.0} turns/s",
                binary.label,
                args.turns as f64 / secs
            );
            std::fs::remove_file(&db).ok();
        }
    }

    println!("# 2. durable add, one process per call, on an index of {ADD_INDEX_TURNS} turns");
    let add_db = dir.path().join("add.redb");
    new.ok(&add_db, &["import", add_file.to_str().context("path")?])?;
    let mut add_times: Vec<Vec<Duration>> = vec![Vec::new(); binaries.len()];
    for i in 0..args.adds {
        for (b, binary) in binaries.iter().enumerate() {
            let user = format!("After the upgrade the probe {i} of {} fails with status 503.", binary.label);
            let started = Instant::now();
            binary.ok(
                &add_db,
                &["add", "--session", "adder", "--user", &user, "--assistant", "Check the readiness gate."],
            )?;
            add_times[b].push(started.elapsed());
        }
    }
    for (binary, times) in binaries.iter().zip(&add_times) {
        println!("{:<10} add {}", binary.label, figures(times));
    }

    println!("# 3. {READERS} readers on an idle index of {SEED_TURNS} turns, {} s", args.seconds);
    let before = std::fs::read(&seed_db)?;
    let stop = Arc::new(AtomicBool::new(false));
    let handles = readers(&new, &seed_db, &corpus, &stop);
    std::thread::sleep(Duration::from_secs(args.seconds));
    stop.store(true, Ordering::Relaxed);
    let idle = join_all(handles)?;
    let unchanged = std::fs::read(&seed_db)? == before;
    println!("readers    select {} | failures {}", figures(&idle.times), idle.failures.len());
    println!("file bytes unchanged by the readers: {unchanged}");

    println!("# 4. two readers side by side against one alone, 100 calls each");
    for binary in &binaries {
        let alone = Instant::now();
        for i in 0..100 {
            reader_call(binary, &seed_db, &corpus, 0, i)?;
        }
        let alone = alone.elapsed();
        let together = Instant::now();
        let handles: Vec<_> = (0..2)
            .map(|reader| {
                let (binary, db, corpus) = (Arc::clone(binary), seed_db.clone(), Arc::clone(&corpus));
                std::thread::spawn(move || -> Result<()> {
                    for i in 0..100 {
                        reader_call(&binary, &db, &corpus, reader, i)?;
                    }
                    Ok(())
                })
            })
            .collect();
        for handle in handles {
            handle.join().map_err(|_| anyhow::anyhow!("a reader panicked"))??;
        }
        let together = together.elapsed();
        println!(
            "{:<10} one reader {:.2} s, two readers {:.2} s: ratio {:.2}",
            binary.label,
            alone.as_secs_f64(),
            together.as_secs_f64(),
            together.as_secs_f64() / alone.as_secs_f64()
        );
    }

    println!(
        "# 5. import of {} turns while {READERS} readers loop select and {WRITERS} writers loop add",
        args.turns
    );
    for binary in &binaries {
        println!("{}:", binary.label);
        let stress_db = dir.path().join(format!("stress-{}.redb", binary.label.replace(' ', "-")));
        std::fs::copy(&seed_db, &stress_db)?;
        let stop = Arc::new(AtomicBool::new(false));
        let reader_handles = readers(binary, &stress_db, &corpus, &stop);
        let writer_handles: Vec<_> = (0..WRITERS)
            .map(|writer| {
                let (binary, db, stop) = (Arc::clone(binary), stress_db.clone(), Arc::clone(&stop));
                std::thread::spawn(move || {
                    looping(&stop, usize::MAX, |i| {
                        let user =
                            format!("Writer {writer} turn {i}: the cache hit ratio fell to 61 percent.");
                        let session = format!("writer-{writer}");
                        binary.run(
                            &db,
                            &["add", "--session", &session, "--user", &user, "--assistant", "Warm it."],
                        )
                    })
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(1)); // the loops are running
        let started = Instant::now();
        let imported = binary.run(&stress_db, &["import", bulk])?;
        let import_secs = started.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs(1));
        stop.store(true, Ordering::Relaxed);
        let read = join_all(reader_handles)?;
        let wrote = join_all(writer_handles)?;
        println!(
            "import     {} in {import_secs:.2} s ({:.0} turns/s)",
            if imported.status.success() { "ok" } else { "FAILED" },
            args.turns as f64 / import_secs
        );
        println!("readers    select {} | failures {}", figures(&read.times), read.failures.len());
        println!("writers    add {} | failures {}", figures(&wrote.times), wrote.failures.len());
        for failure in read.failures.iter().chain(&wrote.failures).take(5) {
            println!("  failure: {failure}");
        }
        let verified = binary.run(&stress_db, &["verify"])?;
        println!("verify     {}", if verified.status.success() { "clean" } else { "FAILED" });
        let sessions = binary.ok(&stress_db, &["--json", "sessions"])?;
        let sessions: serde_json::Value = serde_json::from_slice(&sessions.stdout)?;
        let count = |prefix: &str| -> u64 {
            let list = sessions.as_array().or_else(|| sessions["sessions"].as_array());
            list.into_iter()
                .flatten()
                .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with(prefix)))
                .map(|s| s["turns"].as_u64().unwrap_or(0))
                .sum()
        };
        println!(
            "stored     {} of {} imported turns, {} of {} acknowledged adds",
            count("bulk-"),
            args.turns,
            count("writer-"),
            wrote.times.len()
        );
    }
    Ok(())
}
