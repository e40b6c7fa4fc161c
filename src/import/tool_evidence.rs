//! Tool output of imported turns becomes evidence (DESIGN §4): each result is written under
//! the evidence root as `tool-output/<session>/<call id>.json` (or `.txt`) and indexed bound
//! to its session, so a selection in that session can offer its projection while the turn
//! itself only says `[tool: NAME]`.

use super::turns::ParsedTurn;
use crate::evidence::EvidenceRef;

/// The directory under the evidence root that imported tool output goes to.
pub const TOOL_OUTPUT_DIR: &str = "tool-output";

/// One tool result of an imported turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// Its ref under the evidence root.
    pub reference: EvidenceRef,
    /// The session it belongs to.
    pub session: String,
    /// The result, as the log wrote it.
    pub bytes: Vec<u8>,
}

/// The ref of the result of call `index` of turn `turn` in `session`: named by the call id
/// when the log has one, else by the turn and the call's position.
pub fn tool_output_ref(
    session: &str,
    turn: u32,
    index: usize,
    call_id: Option<&str>,
    result: &str,
) -> EvidenceRef {
    let name = match call_id.filter(|id| !id.trim().is_empty()) {
        Some(id) => component(id),
        None => format!("turn-{turn}-{index}"),
    };
    let trimmed = result.trim_start();
    let is_json = (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(result).is_ok();
    let extension = if is_json { "json" } else { "txt" };
    let text = format!("{TOOL_OUTPUT_DIR}/{}/{name}.{extension}", component(session));
    // Every component was made safe above, so the ref parses.
    EvidenceRef::parse(&text).unwrap_or_else(|_| {
        EvidenceRef::parse(&format!("{TOOL_OUTPUT_DIR}/_/turn-{turn}-{index}.{extension}"))
            .expect("a fixed ASCII ref is valid")
    })
}

/// The tool results of `turns`, the first of which is turn `first_turn` of `session`.
pub fn outputs_of(session: &str, first_turn: u32, turns: &[ParsedTurn]) -> Vec<ToolOutput> {
    let mut out = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let turn_id = first_turn.saturating_add(i as u32);
        for (index, call) in turn.tools.iter().enumerate() {
            let Some(result) = call.result.as_deref().filter(|r| !r.trim().is_empty()) else { continue };
            out.push(ToolOutput {
                reference: tool_output_ref(session, turn_id, index, call.call_id.as_deref(), result),
                session: session.to_string(),
                bytes: result.as_bytes().to_vec(),
            });
        }
    }
    out
}

/// A path component from any text: no separators, control characters or dot-names, at most
/// 120 bytes.
fn component(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c == '/' || c == '\\' || c.is_control() || c == ':' { '_' } else { c })
        .collect();
    if out.len() > 120 {
        out.truncate(out.floor_char_boundary(120));
    }
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refs_are_safe_and_typed() {
        let r = tool_output_ref("proj/../x", 3, 0, Some("toolu_01"), "{\"rows\": []}");
        assert_eq!(r.as_str(), "tool-output/proj_.._x/toolu_01.json");
        let r = tool_output_ref("..", 3, 1, None, "plain text");
        assert_eq!(r.as_str(), "tool-output/_../turn-3-1.txt");
        let r = tool_output_ref("s", 0, 0, Some("a/b\0c"), "{not json");
        assert_eq!(r.as_str(), "tool-output/s/a_b_c.txt");
    }
}
