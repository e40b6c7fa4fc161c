//! `ctxgate show`: a session's turns in full, with their tool activity and gate decisions.

use super::{Global, output};
use ctxgate::describe_reference;
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
        for tool in &t.tools {
            let _ = writeln!(
                out,
                "tool {}{}: {} · result {} bytes",
                tool.name,
                tool.call_id.as_deref().map(|id| format!(" ({id})")).unwrap_or_default(),
                truncate(&tool.arguments, 200),
                tool.result_bytes
            );
        }
    }
    output::print_text(&out)
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(max_chars).collect::<String>())
    }
}
