//! `compare child hook ctxgate` (team layout): the `UserPromptSubmit` hook end to end, as
//! Claude Code runs it, on the index the bulk phase built.
//!
//! The live session is one of the corpus's own: session 0 of project 0, its turns written as a
//! Claude Code transcript (its `cwd` the project's path, its `sessionId` the session's id, so
//! the hook names it as the index already does). One untimed `Stop` hook reads it (every turn is
//! already stored: the import compares them and keeps a checkpoint). Then `samples` times the
//! transcript gains the last prompt's reply and a new prompt about the project, and a
//! `ctxgate hook claude-code` process gets the event; each call is timed from spawn to exit.
//! The hook stores the turns it reads, so this phase runs after ctxgate's queries.

use crate::common::{Figures, Setup};
use anyhow::{Context, Result, bail};
use corpus::timing::quantile;
use corpus::transcript::{Transcript, event, run_hook};
use std::path::PathBuf;
use std::time::Instant;

/// The `ctxgate` binary beside this one (`target/release/ctxgate`).
pub fn ctxgate_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("cannot find this program")?;
    let ctxgate = exe.with_file_name("ctxgate");
    if !ctxgate.exists() {
        bail!(
            "no ctxgate binary at {} for the hook measurement: build it beside compare \
             (cargo build --release --locked --bin ctxgate -p compare), or leave ctxgate out of --engines",
            ctxgate.display()
        );
    }
    Ok(ctxgate)
}

pub fn hook(setup: &Setup) -> Result<Figures> {
    let ctxgate = ctxgate_binary()?;
    let team = setup.team().context("the hook phase needs a team layout")?;
    let db = setup.dir.join("ctxgate.redb");
    let (cwd, id) = (team.project_path(0), team.session_id(0, 0));
    let path = setup.dir.join(format!("{id}.jsonl"));
    let mut transcript = Transcript::create(&path, &cwd, &id)?;
    let mut turns = team.session(0, 0);
    for _ in 0..team.turns_per_session() {
        let turn = turns.next().context("the corpus is endless")?;
        transcript.record("user", &turn.user)?;
        transcript.record("assistant", &turn.assistant)?;
    }
    transcript.flush()?;
    let started = Instant::now();
    run_hook(&ctxgate, &db, None, &event("Stop", &id, &path, &cwd, None))?;
    let first_read = started.elapsed();

    let (mut times, mut with_context) = (Vec::with_capacity(setup.samples), 0usize);
    for i in 0..setup.samples {
        if i > 0 {
            let reply = turns.next().context("the corpus is endless")?;
            transcript.record("assistant", &reply.assistant)?;
        }
        let prompt = team.prompt(0, i as u64);
        transcript.record("user", &prompt)?;
        transcript.flush()?;
        let event = event("UserPromptSubmit", &id, &path, &cwd, Some(&prompt));
        let started = Instant::now();
        let stdout = run_hook(&ctxgate, &db, None, &event)?;
        times.push(started.elapsed());
        with_context += usize::from(!stdout.trim().is_empty());
    }
    let mut figures = Figures::new();
    figures.insert("hook.first_read_ms".into(), first_read.as_secs_f64() * 1e3);
    for (name, q) in [("p50", 0.5), ("p95", 0.95), ("p99", 0.99)] {
        figures.insert(format!("hook.{name}_ms"), quantile(&times, q).as_secs_f64() * 1e3);
    }
    figures.insert("hook.with_context".into(), with_context as f64 / setup.samples as f64);
    Ok(figures)
}
