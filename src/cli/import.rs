//! `ctxgate import`: conversation logs into the index.

use super::{Global, output};
use ctxgate::ImportProgress;
use ctxgate::{FileStatus, Format, ImportOptions, ImportReport};
use std::fmt::Write as _;
use std::path::PathBuf;

/// Arguments of `import`.
#[derive(clap::Args)]
pub struct Args {
    /// Log format; `auto` detects it per file and reports what it found
    #[arg(long, value_enum, default_value = "auto")]
    format: FormatArg,
    /// Put every conversation into this session instead of naming sessions from the source
    #[arg(long, short)]
    session: Option<String>,
    /// Skip malformed records (each reported with its line and reason) instead of refusing the file
    #[arg(long)]
    skip_invalid: bool,
    /// Do not store tool results as evidence (by default each becomes evidence of its session)
    #[arg(long)]
    no_evidence: bool,
    /// Memory for the turns on their way to the index, in MiB: batches are sized so that the
    /// one being written and the one being prepared hold at most this much. The index's page
    /// cache comes on top, and a format read whole (all but canonical JSONL) holds its file
    #[arg(long, value_name = "MIB", default_value_t = (ctxgate::DEFAULT_IMPORT_MEMORY >> 20) as u64,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    memory_mib: u64,
    /// Do not compact the index afterwards. By default, when at least a quarter of what the
    /// file holds on disk, and at least 32 MiB, is not data (a long import's merges leave a
    /// third of free and part-full pages) and no other process is using the index, the import
    /// ends with what `ctxgate compact` does
    #[arg(long)]
    no_compact: bool,
    /// Begin no batch of turns, and no file, after this many seconds: what was imported stays,
    /// each file cut short is reported unfinished, and the same import run again goes on from
    /// there (a huge history imported a slice at a time)
    #[arg(long, value_name = "SECONDS", value_parser = parse_seconds)]
    max_seconds: Option<std::time::Duration>,
    /// Files, or directories to walk for .json and .jsonl files. Every file is reported:
    /// imported, skipped (in a directory but not a log ctxgate can tell, or a link out of
    /// the directory) or failed (nothing of it written); one failure stops no other file
    /// and makes the exit code 7. A single file given alone fails with its error (exit 1)
    #[arg(required = true, value_name = "PATH")]
    paths: Vec<PathBuf>,
}

/// `--format` values.
#[derive(Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    /// Detect per file
    Auto,
    /// Canonical JSONL: {"session", "user", "assistant"} per line (what `export` writes)
    Jsonl,
    /// OpenAI chat messages JSONL: {"messages": [...]} per line
    Openai,
    /// ChatGPT data export conversations.json
    Chatgpt,
    /// Claude.ai data export conversations.json
    Claude,
    /// Claude Code session JSONL (~/.claude/projects/...)
    ClaudeCode,
    /// Codex CLI rollout JSONL (~/.codex/sessions/...)
    Codex,
    /// ShareGPT conversations (JSON array or JSONL)
    Sharegpt,
}

impl From<FormatArg> for Format {
    fn from(f: FormatArg) -> Format {
        match f {
            FormatArg::Auto => Format::Auto,
            FormatArg::Jsonl => Format::Jsonl,
            FormatArg::Openai => Format::OpenAi,
            FormatArg::Chatgpt => Format::ChatGpt,
            FormatArg::Claude => Format::Claude,
            FormatArg::ClaudeCode => Format::ClaudeCode,
            FormatArg::Codex => Format::Codex,
            FormatArg::Sharegpt => Format::ShareGpt,
        }
    }
}

/// Imports and prints the summary.
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let mut gatekeeper = global.open(None, None)?;
    let options = ImportOptions {
        format: args.format.into(),
        session: args.session.clone(),
        skip_invalid: args.skip_invalid,
        evidence: !args.no_evidence,
        memory_bytes: (args.memory_mib as usize).saturating_mul(1 << 20),
        until: args.max_seconds.map(|limit| started + limit),
    };
    let report = output::with_progress(
        |p: ImportProgress| {
            let rate = if p.seconds > 0.0 { p.turns as f64 / p.seconds } else { 0.0 };
            format!("files {}/{}  turns {}  {:.0} turns/s   ", p.files_done, p.files_total, p.turns, rate)
        },
        |progress| gatekeeper.import_with_progress(&args.paths, &options, progress),
    )
    .map_err(|error| match hint(&error, args.skip_invalid) {
        Some(hint) => anyhow::Error::new(output::Hinted { error, hint }),
        None => anyhow::Error::new(error),
    })?;
    let compacted = if args.no_compact || report.new_turns == 0 {
        None
    } else {
        let compacted = output::with_progress(super::compact::progress_line, |progress| {
            gatekeeper.compact_if_sparse(ctxgate::jobs::AUTO_COMPACT_MIN_BYTES, progress)
        });
        // The turns are in the index by now: a compaction that fails leaves the file as the
        // import left it, which is no reason to report the import failed.
        compacted.unwrap_or_else(|e| {
            log::warn!("the import is complete, but compacting the index afterwards failed: {e}; run `ctxgate compact` to try again");
            None
        })
    };
    if global.json {
        let mut document = serde_json::to_value(&report)?;
        if let (Some(object), Some(compacted)) = (document.as_object_mut(), &compacted) {
            object.insert("compacted".into(), serde_json::to_value(compacted)?);
        }
        output::print_json(&document)?;
    } else {
        let mut text = describe(&report);
        if let Some(c) = &compacted {
            let mib = |bytes: u64| bytes as f64 / 1048576.0;
            let _ = writeln!(
                text,
                "compacted the index: {:.1} MiB -> {:.1} MiB (free and part-full pages given back)",
                mib(c.bytes_before),
                mib(c.bytes_after)
            );
        }
        output::print_text(&text)?;
    }
    if report.files_failed > 0 {
        let unreadable = report.files.iter().any(|f| {
            f.status == FileStatus::Failed && matches!(f.error_kind, Some("bad_log" | "unknown_format"))
        });
        return Err(super::exit::ImportIncomplete(format!(
            "{} file{} failed (listed {}; nothing of {} is in the index) and the others are imported: fix what the errors say{} and run the same import again",
            report.files_failed,
            if report.files_failed == 1 { "" } else { "s" },
            if global.json { "with status \"failed\" in files" } else { "above" },
            if report.files_failed == 1 { "it" } else { "them" },
            if unreadable && !args.skip_invalid { " (or pass --skip-invalid to skip the records that cannot be read)" } else { "" },
        ))
        .into());
    }
    if report.tool_outputs_failed > 0 {
        // The turns are imported; the evidence is not complete: exit 1 so scripts notice.
        anyhow::bail!(
            "{} tool output{} not stored as evidence (listed {}); their turns are imported: fix what the reasons say and run the same import again, which stores only the missing outputs",
            report.tool_outputs_failed,
            if report.tool_outputs_failed == 1 { " was" } else { "s were" },
            if global.json { "in failed_tool_outputs of each file" } else { "above" },
        );
    }
    Ok(())
}

/// `--max-seconds`: a number of seconds above 0 (fractions allowed).
fn parse_seconds(value: &str) -> Result<std::time::Duration, String> {
    match value.trim().parse::<f64>() {
        Ok(seconds) if seconds > 0.0 && seconds <= 1e9 => Ok(std::time::Duration::from_secs_f64(seconds)),
        _ => Err(format!("{value:?} is not a number of seconds above 0")),
    }
}

/// What to do about an import that failed on what a file holds, in flags; `None` when the
/// error's own message says it (a file that cannot be read, a conflict) or nothing would help.
fn hint(error: &ctxgate::Error, skip_invalid: bool) -> Option<&'static str> {
    use ctxgate::import::Error as Log;
    match error {
        _ if skip_invalid => None,
        ctxgate::Error::Import(Log::Json { .. } | Log::Shape { .. }) => Some(
            "pass --skip-invalid to skip the records that cannot be read (each is reported with its line) and import the rest",
        ),
        ctxgate::Error::Import(Log::UnknownFormat { .. }) => {
            Some("or, if the file's first lines are damaged, pass --skip-invalid to look past them")
        }
        _ => None,
    }
}

/// Sessions listed per file in the human summary.
const SESSIONS_SHOWN: usize = 20;

/// Tool outputs not stored listed per file in the human summary.
const FAILURES_SHOWN: usize = 20;

/// The first `shown` of `items`, a line each, then how many more there are.
fn write_capped<T>(out: &mut String, items: &[T], shown: usize, what: &str, line: impl Fn(&T) -> String) {
    for item in items.iter().take(shown) {
        let _ = writeln!(out, "  {}", line(item));
    }
    if items.len() > shown {
        let _ = writeln!(out, "  … and {} more {what} (--json lists them all)", items.len() - shown);
    }
}

fn describe(report: &ImportReport) -> String {
    let mut out = String::new();
    for file in &report.files {
        let reason = file.reason.as_deref().unwrap_or_default();
        match file.status {
            FileStatus::Imported => {}
            FileStatus::Skipped => {
                let _ = writeln!(out, "{}: skipped: {reason}", file.path.display());
                continue;
            }
            FileStatus::Failed => {
                let _ = writeln!(out, "{}: FAILED, nothing imported: {reason}", file.path.display());
                continue;
            }
        }
        let _ = writeln!(
            out,
            "{} ({}): {} new, {} already there, {} records skipped{}{}",
            file.path.display(),
            file.format.name(),
            file.new_turns,
            file.existing_turns,
            file.skipped.len(),
            if file.tool_outputs > 0 {
                format!(", {} tool outputs stored as evidence", file.tool_outputs)
            } else {
                String::new()
            },
            if file.unfinished {
                "; UNFINISHED at the time limit: run the import again to go on"
            } else {
                ""
            }
        );
        write_capped(&mut out, &file.sessions, SESSIONS_SHOWN, "sessions", |s| {
            let held = if s.held_back > 0 { ", last turn held back until its reply is logged" } else { "" };
            format!("{}: {} new, {} already there{held}", s.session, s.new_turns, s.existing_turns)
        });
        for skip in &file.skipped {
            let _ = writeln!(out, "  skipped line {}: {}", skip.line, skip.reason);
        }
        write_capped(&mut out, &file.failed_tool_outputs, FAILURES_SHOWN, "tool outputs not stored", |f| {
            format!("tool output not stored: {} (session {}): {}", f.evidence_ref, f.session, f.reason)
        });
    }
    let rate = if report.seconds > 0.0 { report.new_turns as f64 / report.seconds } else { 0.0 };
    let mut files = format!(
        "{} file{} imported",
        report.files_imported,
        if report.files_imported == 1 { "" } else { "s" }
    );
    if report.files_skipped > 0 {
        let _ = write!(files, ", {} skipped", report.files_skipped);
    }
    if report.files_failed > 0 {
        let _ = write!(files, ", {} FAILED", report.files_failed);
    }
    let _ = writeln!(
        out,
        "{files}: {} new turns, {} already there, {} records skipped{}{}, {:.2} s ({:.0} turns/s)",
        report.new_turns,
        report.existing_turns,
        report.skipped,
        if report.tool_outputs > 0 {
            format!(", {} tool outputs stored", report.tool_outputs)
        } else {
            String::new()
        },
        if report.tool_outputs_failed > 0 {
            format!(", {} tool outputs NOT stored", report.tool_outputs_failed)
        } else {
            String::new()
        },
        report.seconds,
        rate
    );
    out
}
