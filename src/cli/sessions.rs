//! `ctxgate sessions`: what sessions the index holds.

use super::{Global, output};
use ctxgate::SessionInfo;
use serde::Serialize;
use std::fmt::Write;

#[derive(Serialize)]
struct Sessions {
    sessions: Vec<SessionInfo>,
}

/// Lists sessions.
pub fn run(global: &Global) -> anyhow::Result<()> {
    let sessions = global.open(None, None)?.sessions()?;
    if global.json {
        return output::print_json(&Sessions { sessions });
    }
    let mut out = String::new();
    if sessions.is_empty() {
        out.push_str("no sessions\n");
    }
    for s in &sessions {
        let _ = writeln!(out, "{:>8} turns  segment from turn {:<6}  {}", s.turns, s.segment_start, s.name);
    }
    output::print_text(&out)
}
