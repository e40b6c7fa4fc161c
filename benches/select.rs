//! `select/<size>/<variant>`: one selection on an index of `size` turns in one session.
//!
//! Variants: `on_topic` is a full selection for a follow-up question (rotating over every
//! topic of the corpus, skipping the few that select nothing); `gate_only` is the gate decision for the same questions, the baseline
//! the rest of the pipeline adds to; `on_topic_o200k` is `on_topic` with budgets and blocks counted
//! in the o200k encoding (`--tokenizer o200k`). The index is built once per size and cached under
//! `target/ctxgate-bench/` (see `corpus::index`). 10k turns by default; set
//! `CTXGATE_BENCH_LARGE=1` to add 100k (built once, a few minutes).

use corpus::index::{self, SESSION};
use corpus::{Corpus, TopicId};
use criterion::{Criterion, criterion_group, criterion_main};
use ctxgate::tokens::Tokenizer;
use ctxgate::{Gatekeeper, Options, SelectOptions};
use std::hint::black_box;
use std::time::Duration;

const SEED: u64 = 42;

fn sizes() -> Vec<(u32, &'static str)> {
    let mut sizes = vec![(10_000, "10k")];
    if std::env::var_os("CTXGATE_BENCH_LARGE").is_some_and(|v| v == "1") {
        sizes.push((100_000, "100k"));
    }
    sizes
}

fn select(c: &mut Criterion) {
    let corpus = Corpus::new(SEED);
    let queries: Vec<String> = (0..2)
        .flat_map(|n| TopicId::all().map(move |t| (t, n)))
        .map(|(t, n)| corpus.query_for(t, n))
        .collect();
    let mut group = c.benchmark_group("select");
    for (turns, label) in sizes() {
        let cached = index::cached_index(turns, SEED, false, |_| {}).expect("build the bench index");
        let (_dir, path) = index::working_copy(&cached.path).expect("copy the bench index");
        let gk = Gatekeeper::open(&path, Options::default()).expect("open the bench index");
        let session = gk.session(SESSION).expect("session");
        // Keep the questions that select something (a few are filtered out by design, DESIGN
        // §3.3) and remember how many blocks each selects: the loop checks it did the work.
        let on_topic: Vec<(&String, usize)> = queries
            .iter()
            .map(|q| (q, session.select(q).expect("warm-up select").blocks.len()))
            .filter(|(_, blocks)| *blocks > 0)
            .collect();
        assert!(
            on_topic.len() * 4 >= queries.len() * 3,
            "only {} of {} follow-up questions select anything from {turns} turns",
            on_topic.len(),
            queries.len()
        );

        let mut next = 0;
        group.bench_function(format!("{label}/on_topic"), |b| {
            b.iter(|| {
                let (query, blocks) = on_topic[next % on_topic.len()];
                next += 1;
                let selection = session.select(black_box(query)).expect("select");
                assert_eq!(selection.blocks.len(), blocks, "{query:?} selected another number of blocks");
                selection
            })
        });
        let o200k = SelectOptions { tokenizer: Some(Tokenizer::O200k), ..SelectOptions::default() };
        let on_topic_o200k: Vec<(&String, usize)> = on_topic
            .iter()
            .map(|&(q, _)| (q, session.select_with(q, &o200k).expect("warm-up select").blocks.len()))
            .collect();
        let mut next = 0;
        group.bench_function(format!("{label}/on_topic_o200k"), |b| {
            b.iter(|| {
                let (query, blocks) = on_topic_o200k[next % on_topic_o200k.len()];
                next += 1;
                let selection = session.select_with(black_box(query), &o200k).expect("select");
                assert_eq!(selection.blocks.len(), blocks, "{query:?} selected another number of blocks");
                selection
            })
        });
        let mut next = 0;
        group.bench_function(format!("{label}/gate_only"), |b| {
            b.iter(|| {
                let (query, _) = on_topic[next % on_topic.len()];
                next += 1;
                let decision = session.gate(black_box(query), None).expect("gate");
                assert!(decision.overlap.is_finite(), "{query:?}: gate overlap {}", decision.overlap);
                decision
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = select
}
criterion_main!(benches);
