//! `add_turn/<size>/durable`: one durable `add_turn` (default options: quick repair on) to a
//! session that already holds `size` turns.
//!
//! `0` is the baseline, a fresh index; the log-structured store should make the cost flat in
//! the size. Every `FOLD_BATCH`-th call folds the pending turns into postings, so the mean
//! includes folding. Indexes are cached under `target/ctxgate-bench/` and each run writes to a
//! copy. 10k turns by default; set `CTXGATE_BENCH_LARGE=1` to add 100k.

use corpus::index::{self, SESSION};
use corpus::{Corpus, Turn};
use criterion::{Criterion, criterion_group, criterion_main};
use ctxgate::{Gatekeeper, Options};
use std::hint::black_box;
use std::time::Duration;

const SEED: u64 = 42;

fn sizes() -> Vec<(u32, &'static str)> {
    let mut sizes = vec![(0, "0"), (10_000, "10k")];
    if std::env::var_os("CTXGATE_BENCH_LARGE").is_some_and(|v| v == "1") {
        sizes.push((100_000, "100k"));
    }
    sizes
}

fn add_turn(c: &mut Criterion) {
    let mut group = c.benchmark_group("add_turn");
    for (turns, label) in sizes() {
        let work = if turns == 0 {
            let dir = tempfile::Builder::new()
                .prefix("work-")
                .tempdir_in(index::cache_dir().expect("cache dir"))
                .expect("temp dir");
            let path = dir.path().join("index.redb");
            (dir, path)
        } else {
            let cached = index::cached_index(turns, SEED, false, |_| {}).expect("build the bench index");
            index::working_copy(&cached.path).expect("copy the bench index")
        };
        let gk = Gatekeeper::open(&work.1, Options::default()).expect("open the bench index");
        let session = gk.session(SESSION).expect("session");
        // The turns that would come next in the corpus, cycled.
        let pool: Vec<Turn> = Corpus::new(SEED).session(0).skip(turns as usize).take(1024).collect();
        let mut expected = turns;
        group.bench_function(format!("{label}/durable"), |b| {
            b.iter(|| {
                let turn = &pool[(expected - turns) as usize % pool.len()];
                let id =
                    session.add_turn(black_box(&turn.user), black_box(&turn.assistant)).expect("add_turn");
                assert_eq!(id, expected, "add_turn returned the wrong turn id");
                expected += 1;
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = add_turn
}
criterion_main!(benches);
