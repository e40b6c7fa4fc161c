//! Generated turns as ctxgate's canonical JSON Lines (`{"session","turn","user","assistant"}`
//! per line), as `ctxgate import --format jsonl` reads them.

use crate::PlacedTurn;
use serde::Serialize;
use std::io::{self, Write};

/// One line of the canonical format.
#[derive(Debug, Serialize)]
pub struct Line<'a> {
    /// Session name.
    pub session: &'a str,
    /// Position of the turn in its session, from 0.
    pub turn: u32,
    /// The user's text.
    pub user: &'a str,
    /// The assistant's text.
    pub assistant: &'a str,
}

/// Writes `turns` to `out`, one line each, naming sessions with `name`. Returns the bytes of
/// turn text written (user + assistant, UTF-8), the measure of throughput in MB/s.
pub fn write(
    out: &mut impl Write,
    turns: impl Iterator<Item = PlacedTurn>,
    mut name: impl FnMut(u32) -> String,
) -> io::Result<u64> {
    let mut text_bytes = 0u64;
    let mut names: Vec<String> = Vec::new();
    for placed in turns {
        let index = placed.session as usize;
        if names.len() <= index {
            names.resize_with(index + 1, String::new);
        }
        if names[index].is_empty() {
            names[index] = name(placed.session);
        }
        let line = Line {
            session: &names[index],
            turn: placed.turn,
            user: &placed.content.user,
            assistant: &placed.content.assistant,
        };
        let mut text = serde_json::to_string(&line).map_err(io::Error::other)?;
        text.push('\n');
        out.write_all(text.as_bytes())?;
        text_bytes += (placed.content.user.len() + placed.content.assistant.len()) as u64;
    }
    Ok(text_bytes)
}
