//! `corpus --turns N --sessions S --seed X [--identifiers]`: generated turns as JSON Lines on
//! stdout, one `{"session","turn","user","assistant"}` object per line, session by session.
//! `--identifiers` appends hosts, tickets and commits drawn from large pools to every turn, so
//! the vocabulary keeps growing with the history as real logs' does.

use anyhow::{Context, Result, bail};
use std::io::{BufWriter, Write};

const USAGE: &str = "usage: corpus [--turns N (1000)] [--sessions S (1)] [--seed X (42)] [--identifiers]";

fn main() -> Result<()> {
    let (mut turns, mut sessions, mut seed, mut identifiers) = (1000u64, 1u32, 42u64, false);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            return Ok(());
        }
        if flag == "--identifiers" {
            identifiers = true;
            continue;
        }
        let value = args.next().with_context(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--turns" => turns = value.parse().context("--turns")?,
            "--sessions" => sessions = value.parse().context("--sessions")?,
            "--seed" => seed = value.parse().context("--seed")?,
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    if sessions == 0 {
        bail!("--sessions must be at least 1");
    }
    let corpus = corpus::Corpus::new(seed);
    let mut out = BufWriter::new(std::io::stdout().lock());
    let placed =
        corpus.spread(turns, sessions).map(|t| if identifiers { corpus.with_identifiers(t) } else { t });
    let written = corpus::jsonl::write(&mut out, placed, corpus::session_name).and_then(|_| out.flush());
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
