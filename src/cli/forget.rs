//! `ctxgate forget`: deletes sessions and every trace of them.

use super::{Global, output};
use std::fmt::Write;

#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("which").required(true).args(["session", "before"])))]
pub struct Args {
    /// The session to delete
    #[arg(long, short)]
    session: Option<String>,
    /// Delete every session whose last turn is before this date (YYYY-MM-DD or RFC 3339);
    /// sessions without times are kept
    #[arg(long, value_name = "DATE")]
    before: Option<String>,
}

/// Deletes the sessions and prints what went.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gk = global.open(None, None)?;
    let report = match (&args.session, &args.before) {
        (Some(name), _) => gk.forget_session(name)?,
        (None, Some(date)) => gk.forget_before(date)?,
        (None, None) => anyhow::bail!("pass --session NAME or --before DATE"),
    };
    if global.json {
        return output::print_json(&report);
    }
    let mut out = String::new();
    for name in &report.sessions {
        let _ = writeln!(out, "forgot     {name}");
    }
    let _ = writeln!(
        out,
        "deleted    {} sessions, {} turns ({} pending), {} postings; {} anchors gone",
        report.sessions.len(),
        report.turns,
        report.pending_turns,
        report.postings,
        report.anchors_dropped
    );
    for name in &report.kept_without_time {
        let _ = writeln!(out, "kept       {name} (no time recorded)");
    }
    output::print_text(&out)
}
