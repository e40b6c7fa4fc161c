//! `ctxgate forget`: deletes sessions and every trace of them, or with `--dry-run` says what
//! it would delete.

use super::{Access, Global, output};
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
    /// Report what would be deleted, and delete nothing (the index is opened read-only)
    #[arg(long)]
    dry_run: bool,
}

/// A dry run only reads.
pub fn access(args: &Args) -> Access {
    if args.dry_run { Access::Read } else { Access::Write }
}

/// Deletes the sessions (or, with `--dry-run`, finds them) and prints what went: one line per
/// forgotten session, one summing up what was deleted, one what was kept. `--json` has the
/// full report, the names of the sessions kept for lack of a time included.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gk = global.open(None, None)?;
    if !args.dry_run {
        // Tombstones first: a crash before the forget leaves one, which the next sync applies.
        let doomed = match (&args.session, &args.before) {
            (Some(name), _) => gk.forget_session_dry_run(name)?,
            (None, Some(date)) => gk.forget_before_dry_run(date)?,
            (None, None) => anyhow::bail!("pass --session NAME or --before DATE"),
        };
        ctxgate::sync::note_forgotten(&gk, &doomed.sessions).map_err(super::sync::into_anyhow)?;
    }
    let report = match (&args.session, &args.before, args.dry_run) {
        (Some(name), _, false) => gk.forget_session(name)?,
        (Some(name), _, true) => gk.forget_session_dry_run(name)?,
        (None, Some(date), false) => gk.forget_before(date)?,
        (None, Some(date), true) => gk.forget_before_dry_run(date)?,
        (None, None, _) => anyhow::bail!("pass --session NAME or --before DATE"),
    };
    if global.json {
        return output::print_json(&report);
    }
    let (forgot, deleted) =
        if report.dry_run { ("would forget", "would delete") } else { ("forgot", "deleted") };
    let mut out = String::new();
    for name in &report.sessions {
        let _ = writeln!(out, "{forgot:<13}{name}");
    }
    let _ = writeln!(
        out,
        "{deleted:<13}{} sessions, {} turns ({} pending), {} postings, {} evidence documents; {} anchors gone",
        report.sessions.len(),
        report.turns,
        report.pending_turns,
        report.postings,
        report.evidence,
        report.anchors_dropped
    );
    let untimed = report.kept_without_time.len();
    let untimed = match untimed {
        0 => String::new(),
        _ => format!(" ({untimed} of them without a recorded time: `--json` lists them)"),
    };
    let _ = writeln!(out, "{:<13}{} sessions{untimed}", "kept", report.kept);
    output::print_text(&out)
}
