//! `import/<size>`: `Gatekeeper::import` of a generated canonical JSONL file of `size` turns
//! (one session per 2,000 turns, as `corpus --turns N --sessions N/2000` writes them) into a
//! fresh index; throughput in turns.
//!
//! The file is generated once and cached under `target/ctxgate-bench/`. 100k turns by default;
//! set `CTXGATE_BENCH_LARGE=1` to add 1M, the size the import target is stated at (50,000
//! turns/s). Peak RSS needs a process of its own: run `ctxgate import` under
//! `/usr/bin/time -v` (README, Performance).

use anyhow::{Context, Result};
use corpus::Corpus;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use ctxgate::{Gatekeeper, ImportOptions, Options};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Duration;

const SEED: u64 = 42;
const TURNS_PER_SESSION: u64 = 2_000;

fn sizes() -> Vec<(u64, &'static str)> {
    let mut sizes = vec![(100_000, "100k")];
    if std::env::var_os("CTXGATE_BENCH_LARGE").is_some_and(|v| v == "1") {
        sizes.push((1_000_000, "1M"));
    }
    sizes
}

/// The cached canonical JSONL file of `turns` generated turns, written first if missing.
fn corpus_file(turns: u64) -> Result<PathBuf> {
    let dir = corpus::index::cache_dir()?;
    let path = dir.join(format!("import-{turns}-{SEED}-v{}.jsonl", corpus::CORPUS_VERSION));
    if path.exists() {
        return Ok(path);
    }
    // Written beside it and renamed: an interrupted run leaves no half file to be reused.
    let partial = tempfile::NamedTempFile::new_in(&dir)?;
    let mut out = BufWriter::new(partial.as_file());
    let sessions = u32::try_from(turns.div_ceil(TURNS_PER_SESSION)).context("too many sessions")?;
    let corpus = Corpus::new(SEED);
    corpus::jsonl::write(&mut out, corpus.spread(turns, sessions), corpus::session_name)?;
    out.flush()?;
    drop(out);
    partial.persist(&path)?;
    Ok(path)
}

fn import(c: &mut Criterion) {
    let mut group = c.benchmark_group("import");
    for (turns, label) in sizes() {
        let file = corpus_file(turns).expect("generate the bench corpus");
        let paths = vec![file];
        group.throughput(Throughput::Elements(turns));
        // Ten imports of ~1.5 s per 100k turns, with room to spare.
        group.measurement_time(Duration::from_secs(18 * turns.div_ceil(100_000)));
        group.bench_function(label, |b| {
            b.iter_batched(
                || tempfile::tempdir().expect("temp dir"),
                |dir| {
                    let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())
                        .expect("create the index");
                    let report = gk.import(&paths, &ImportOptions::default()).expect("import");
                    assert_eq!(report.new_turns, turns, "the import missed turns");
                    dir // removed outside the measurement
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1));
    targets = import
}
criterion_main!(benches);
