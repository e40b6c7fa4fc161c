//! The largest texts ctxgate accepts, and the checks that refuse larger ones where text
//! enters (DESIGN §3.8): `add`, the server's `record_turn`, `import` (and the hooks' import),
//! `evidence put` and `evidence index`.
//!
//! A turn is stored as one row and read back whole; the limits keep every accepted turn well
//! inside what a read accepts as a row's decompressed size (`store::turn_text`), so what is
//! stored always reads back.

/// Largest text of one side of a turn, or of a query: 8 MiB.
pub const MAX_TEXT_BYTES: usize = 8 * 1024 * 1024;

/// Largest turn: its user and assistant text, time, and its tool calls' names, ids and
/// arguments together, 16 MiB.
pub const MAX_TURN_BYTES: usize = 16 * 1024 * 1024;

/// Largest line of a canonical JSONL log: room for a turn at [`MAX_TURN_BYTES`] written with
/// JSON escapes. A longer line is refused without being read into memory.
pub const MAX_LINE_BYTES: usize = 4 * MAX_TURN_BYTES;

/// Largest evidence document: 32 MiB. Projecting a document parses it whole.
pub const MAX_EVIDENCE_BYTES: u64 = 32 * 1024 * 1024;

/// A turn's size as the limit counts it.
pub fn turn_bytes<'a>(
    user: &str,
    assistant: &str,
    time: Option<&str>,
    tools: impl IntoIterator<Item = (&'a str, Option<&'a str>, &'a str)>,
) -> usize {
    let tools: usize = tools
        .into_iter()
        .map(|(name, call_id, arguments)| name.len() + call_id.map_or(0, str::len) + arguments.len())
        .sum();
    user.len() + assistant.len() + time.map_or(0, str::len) + tools
}

/// Why a turn of `bytes` (from [`turn_bytes`]) is refused, with what to do; `None` within the
/// limit.
pub fn turn_too_large(bytes: usize) -> Option<String> {
    (bytes > MAX_TURN_BYTES).then(|| {
        format!(
            "the turn holds {bytes} bytes of text, over the limit of {MAX_TURN_BYTES} bytes (16 MiB) a turn: \
             split the turn, or leave its largest text out of the log"
        )
    })
}

/// Why an evidence document of `bytes` is refused, with what to do; `None` within the limit.
pub fn evidence_too_large(bytes: u64) -> Option<String> {
    (bytes > MAX_EVIDENCE_BYTES).then(|| {
        format!(
            "{bytes} bytes is over the limit of {MAX_EVIDENCE_BYTES} bytes (32 MiB) a document: \
             store it in parts, or keep only the part the agent needs"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_every_text_of_a_turn() {
        let tools = [("Bash", Some("c1"), "{}")];
        assert_eq!(turn_bytes("ab", "cde", Some("t"), tools), 2 + 3 + 1 + 4 + 2 + 2);
        assert!(turn_too_large(MAX_TURN_BYTES).is_none());
        let why = turn_too_large(MAX_TURN_BYTES + 1).unwrap_or_default();
        assert!(why.contains(&MAX_TURN_BYTES.to_string()) && why.contains("split"), "{why}");
        assert!(evidence_too_large(MAX_EVIDENCE_BYTES).is_none());
        assert!(evidence_too_large(MAX_EVIDENCE_BYTES + 1).is_some_and(|w| w.contains("32 MiB")));
    }
}
