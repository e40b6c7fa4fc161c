//! `ctxgate show`: a session's turns in full, with their tool activity and gate decisions.

use super::{Global, output};
use ctxgate::describe_reference;
use ctxgate::import::turns::FAILED_MARK;
use ctxgate::{SessionInfo, StoredTurn, Topic};
use serde::Serialize;
use std::fmt::Write;

/// Arguments of `show`.
#[derive(clap::Args)]
pub struct Args {
    /// Session name
    #[arg(long, short)]
    session: String,
    /// Only this turn
    #[arg(long, short, value_name = "N")]
    turn: Option<u32>,
}

#[derive(Serialize)]
struct Shown {
    session: SessionInfo,
    turns: Vec<StoredTurn>,
}

/// Prints the turn(s).
pub fn run(global: &Global, args: &Args) -> anyhow::Result<()> {
    let gatekeeper = global.open(None, None)?;
    let session = gatekeeper.session(&args.session)?;
    let info = session.info()?;
    let turns = match args.turn {
        Some(n) => vec![session.turn(n)?.ok_or_else(|| {
            anyhow::Error::from(ctxgate::Error::InvalidInput {
                what: "--turn",
                reason: format!("session {:?} has {} turns (0..{})", args.session, info.turns, info.turns),
            })
        })?],
        None => {
            let mut all = Vec::new();
            session.for_each_turn(|t| {
                all.push(t);
                Ok(())
            })?;
            all
        }
    };
    if global.json {
        return output::print_json(&Shown { session: info, turns });
    }
    let mut out = String::new();
    let _ = writeln!(out, "session {} · {} turns", info.name, info.turns);
    if let Some(source) = &info.source {
        let _ = writeln!(out, "source  {source}");
    }
    if let Some(title) = &info.title {
        let _ = writeln!(out, "title   {title}");
    }
    if let (Some(a), Some(b)) = (&info.time_start, &info.time_end) {
        let _ = writeln!(out, "time    {a} .. {b}");
    }
    for t in &turns {
        let topic = if t.gate.topic == Topic::Switch { "switch" } else { "continue" };
        let _ = writeln!(
            out,
            "\n── turn {}{} · gate {topic} (overlap {:.2}, new {:.2}{}) · segment from {}",
            t.turn_id,
            t.time.as_deref().map(|x| format!(" · {x}")).unwrap_or_default(),
            t.gate.overlap,
            t.gate.new_ratio,
            t.gate.deictic.as_deref().map(|p| format!(", {}", describe_reference(p))).unwrap_or_default(),
            t.gate.segment_start
        );
        let _ = writeln!(out, "user:\n{}", t.user);
        let _ = writeln!(out, "assistant:\n{}", t.assistant);
        for (tool, failed) in t.tools.iter().zip(failed_tools(t)) {
            let _ = writeln!(
                out,
                "tool {}{}: {} · result {} bytes{}",
                tool.name,
                tool.call_id.as_deref().map(|id| format!(" ({id})")).unwrap_or_default(),
                truncate(&tool.arguments, 200),
                tool.result_bytes,
                if failed { " · failed" } else { "" }
            );
        }
    }
    output::print_text(&out)
}

/// For each tool of a turn, whether its call failed. Import mentions each call in the assistant
/// text, in order, as a paragraph `[tool: NAME]`, `[tool: NAME (failed)]` for a failed one
/// (DESIGN §8.7); a tool is matched to the next mention of its name (documents such as
/// attachments have none).
fn failed_tools(turn: &StoredTurn) -> Vec<bool> {
    let mentions: Vec<(&str, bool)> = turn
        .assistant
        .split("\n\n")
        .filter_map(|part| part.trim().strip_prefix("[tool: ")?.strip_suffix(']'))
        .map(|name| match name.strip_suffix(FAILED_MARK) {
            Some(name) => (name, true),
            None => (name, false),
        })
        .collect();
    let mut next = 0;
    let mut failed = Vec::with_capacity(turn.tools.len());
    for tool in &turn.tools {
        let rest = mentions.get(next..).unwrap_or_default();
        match rest.iter().position(|(name, _)| *name == tool.name) {
            Some(at) => {
                failed.push(rest[at].1);
                next += at + 1;
            }
            None => failed.push(false),
        }
    }
    failed
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max_chars).collect::<String>())
    }
}
