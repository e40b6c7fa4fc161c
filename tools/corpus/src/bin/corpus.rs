//! `corpus --turns N --sessions S --seed X [--identifiers]`: generated turns as JSON Lines on
//! stdout, one `{"session","turn","user","assistant"}` object per line, session by session.
//! `--identifiers` appends hosts, tickets and commits drawn from large pools to every turn, so
//! the vocabulary keeps growing with the history as real logs' does.
//!
//! `corpus --projects P --sessions-per-project S --turns-per-session T --seed X`: a team's
//! layout instead (`corpus::team`): P × S × T turns in sessions named
//! `<project path>#<session id>`, as `ctxgate hook` names them, each project with a vocabulary
//! of its own.

use anyhow::{Context, Result, bail};
use std::io::{BufWriter, Write};

const USAGE: &str = "usage: corpus [--turns N (1000)] [--sessions S (1)] [--seed X (42)] [--identifiers]\n       \
corpus --projects P --sessions-per-project S --turns-per-session T [--seed X (42)]";

fn main() -> Result<()> {
    let (mut turns, mut sessions, mut seed, mut identifiers) = (1000u64, 1u32, 42u64, false);
    let mut team: [Option<u32>; 3] = [None; 3];
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
            "--projects" => team[0] = Some(value.parse().context("--projects")?),
            "--sessions-per-project" => team[1] = Some(value.parse().context("--sessions-per-project")?),
            "--turns-per-session" => team[2] = Some(value.parse().context("--turns-per-session")?),
            _ => bail!("unknown argument {flag}\n{USAGE}"),
        }
    }
    if sessions == 0 {
        bail!("--sessions must be at least 1");
    }
    let corpus = corpus::Corpus::new(seed);
    let mut out = BufWriter::new(std::io::stdout().lock());
    if team.iter().any(Option::is_some) {
        let [Some(projects), Some(per_project), Some(turns)] = team else {
            bail!("a team layout needs --projects, --sessions-per-project and --turns-per-session\n{USAGE}");
        };
        if !(1..=65_535).contains(&projects) || !(1..65_536).contains(&per_project) {
            bail!("--projects must be 1 to 65535, --sessions-per-project 1 to 65535");
        }
        let team = corpus::team::Team::new(corpus, projects, per_project, turns);
        return finish(team.write_jsonl(&mut out).and_then(|_| out.flush()));
    }
    let placed =
        corpus.spread(turns, sessions).map(|t| if identifiers { corpus.with_identifiers(t) } else { t });
    finish(corpus::jsonl::write(&mut out, placed, corpus::session_name).and_then(|_| out.flush()))
}

/// A closed pipe (`corpus ... | head`) is not an error.
fn finish(written: std::io::Result<()>) -> Result<()> {
    match written {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}
