//! Replays `compare`'s session-scoped queries against the index a `compare --keep` run left, so
//! that two builds of ctxgate can be timed alternately on one index, and their selections
//! compared line by line:
//!
//! ```text
//! cargo run --release -p compare -- --turns 1000000 --engines ctxgate --keep --dir D
//! cargo run --release -p compare --bin select_replay -- --turns 1000000 --dir D --rounds 4
//! cargo run --release -p compare --bin select_replay -- --turns 1000000 --dir D --dump > a.txt
//! ```
//! `--turns`, `--sessions`, `--samples` and `--seed` are `compare`'s, and mean the same.

use anyhow::{Context, Result, bail};
use corpus::{Corpus, TopicId};
use ctxgate::{Gatekeeper, Options, SelectOptions};
use std::path::PathBuf;
use std::time::Instant;

const USAGE: &str = "usage: select_replay --dir DIR [--turns N (10000)] [--sessions S (1 + N/200)] \
                     [--samples K (200)] [--seed X (42)] [--rounds R (4)] [--as-of T] [--dump] [--each]";

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (mut dir, mut turns, mut sessions, mut samples, mut seed) = (None, 10_000u64, None, 200usize, 42u64);
    let (mut rounds, mut as_of, mut dump, mut each) = (4usize, None, false, false);
    while let Some(flag) = args.next() {
        let mut value = || args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"));
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--turns" => turns = value()?.parse().context("--turns")?,
            "--sessions" => sessions = Some(value()?.parse::<u32>().context("--sessions")?),
            "--samples" => samples = value()?.parse().context("--samples")?,
            "--seed" => seed = value()?.parse().context("--seed")?,
            "--rounds" => rounds = value()?.parse().context("--rounds")?,
            "--as-of" => as_of = Some(value()?.parse().context("--as-of")?),
            "--dump" => dump = true,
            "--each" => each = true,
            "--help" | "-h" => {
                println!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let Some(dir) = dir else { bail!("--dir is required\n{USAGE}") };
    // As `compare` names and asks: the long session is the last, queries rotate over topics.
    let sessions = sessions.unwrap_or(1 + (turns / 200) as u32).max(2);
    let corpus = Corpus::new(seed);
    let topics: Vec<TopicId> = TopicId::all().collect();
    let queries: Vec<String> =
        (0..samples).map(|i| corpus.query_for(topics[i % topics.len()], (i / topics.len()) as u64)).collect();

    let path = dir.join("ctxgate.redb");
    let gatekeeper =
        Gatekeeper::open(&path, Options::default()).with_context(|| format!("{}", path.display()))?;
    let session = gatekeeper.session(&corpus::session_name(sessions - 1))?;
    let options = SelectOptions { as_of, ..SelectOptions::default() };
    if dump {
        for query in &queries {
            let selection = session.select_with(query, &options)?;
            let blocks: Vec<String> = (selection.blocks.iter())
                .map(|b| format!("{}:{:?}:{:?}", b.turn_id, b.score, b.covered_anchors))
                .collect();
            println!("{query} => {}", blocks.join(" "));
        }
        return Ok(());
    }
    let mut by_query = vec![Vec::with_capacity(rounds); queries.len()];
    for _ in 0..rounds {
        for (query, times) in queries.iter().zip(&mut by_query) {
            let started = Instant::now();
            std::hint::black_box(session.select_with(query, &options)?);
            times.push(started.elapsed().as_secs_f64() * 1e3);
        }
    }
    if each {
        for (query, times) in queries.iter().zip(&mut by_query) {
            times.sort_by(f64::total_cmp);
            println!("{:.3} ms {query}", times[times.len() / 2]);
        }
    }
    let mut millis: Vec<f64> = by_query.into_iter().flatten().collect();
    millis.sort_by(f64::total_cmp);
    let at = |q: f64| millis[((millis.len() - 1) as f64 * q) as usize];
    println!("select p50 {:.3} ms, p90 {:.3} ms, {} selections", at(0.5), at(0.9), millis.len());
    Ok(())
}
