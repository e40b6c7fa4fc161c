//! Tool output of imported turns becomes evidence (DESIGN §4): each result is written under
//! the evidence root as `tool-output/<session>/<call id>.json` (or `.txt`) and indexed bound
//! to its session, so a selection in that session can offer its projection while the turn
//! itself only says `[tool: NAME]`.
//!
//! Refs are unique per output by construction. A session name or call id that is already a
//! safe path component is used as it is; any other (a separator, a control character, `~`, a
//! leading dot, over 120 bytes, or the shape of a generated `turn-N-M` name) becomes its
//! sanitized first 100 bytes, `~` and the xxh3 digest of the exact original text
//! (`a/b` -> `a_b~0f3c...`, while `a_b` stays `a_b`). Names kept as they are never contain a
//! `~`, so they cannot meet a digested one; two digested ones meet only if their 64-bit
//! digests do. The digest is added only where it is needed, not always, so the refs of
//! ordinary outputs (ids such as `toolu_01...`) stay short (every projection the model reads
//! carries its ref) and stay what earlier versions stored. For a name that changed, the ref
//! earlier versions gave it is kept as [`ToolOutput::legacy_reference`]: an output indexed
//! there by an older import is not stored a second time.

use super::turns::ParsedTurn;
use crate::evidence::reference::EvidenceRef;

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
    /// The ref versions before unique refs gave this output, when it differs from
    /// `reference` (a session name or call id that had to be sanitized or cut).
    pub legacy_reference: Option<EvidenceRef>,
}

/// What storing an import's tool results did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoredToolOutputs {
    /// Results written and indexed now (new, or missing since an earlier import).
    pub stored: u64,
    /// Results that could not be stored.
    pub failed: Vec<FailedToolOutput>,
}

/// A tool result that could not be stored as evidence (its turn is imported all the same).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct FailedToolOutput {
    /// The ref it was to be stored under.
    pub evidence_ref: String,
    /// The session it belongs to.
    pub session: String,
    /// Why it was not stored.
    pub reason: String,
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
        None => generated_name(turn, index),
    };
    let text = format!("{TOOL_OUTPUT_DIR}/{}/{name}.{}", component(session), extension(result));
    // Each component is non-empty, has no separator or control character and does not start
    // with a dot, and the whole is far under the ref length limit: the ref parses.
    EvidenceRef::parse(&text).expect("tool output refs are built from safe components")
}

/// The ref ctxgate gave the same output before refs were made unique: components cut at 120
/// bytes, separators replaced, no digest. `None` where it equals [`tool_output_ref`]'s.
fn legacy_tool_output_ref(
    session: &str,
    turn: u32,
    index: usize,
    call_id: Option<&str>,
    result: &str,
) -> Option<EvidenceRef> {
    let name = match call_id.filter(|id| !id.trim().is_empty()) {
        Some(id) => legacy_component(id),
        None => generated_name(turn, index),
    };
    let text = format!("{TOOL_OUTPUT_DIR}/{}/{name}.{}", legacy_component(session), extension(result));
    EvidenceRef::parse(&text).ok()
}

/// Rewrites, in the user text of `turns`, the refs a parser named there for the results of
/// calls with an id (attachments: `[attachment: NAME, evidence REF]`) as session `from`'s
/// into session `to`'s, under which they are stored (`import --session`).
pub fn move_named_refs(turns: &mut [ParsedTurn], from: &str, to: &str) {
    if from == to {
        return;
    }
    for turn in turns {
        for call in &turn.tools {
            let (Some(id), Some(result)) = (call.call_id.as_deref(), call.result.as_deref()) else {
                continue;
            };
            let old = tool_output_ref(from, 0, 0, Some(id), result);
            if turn.user.contains(old.as_str()) {
                let new = tool_output_ref(to, 0, 0, Some(id), result);
                turn.user = turn.user.replace(old.as_str(), new.as_str());
            }
        }
    }
}

/// The tool results of `turns`, the first of which is turn `first_turn` of `session`.
pub fn outputs_of(session: &str, first_turn: u32, turns: &[ParsedTurn]) -> Vec<ToolOutput> {
    let mut out = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let turn_id = first_turn.saturating_add(i as u32);
        for (index, call) in turn.tools.iter().enumerate() {
            let Some(result) = call.result.as_deref().filter(|r| !r.trim().is_empty()) else { continue };
            let call_id = call.call_id.as_deref();
            let reference = tool_output_ref(session, turn_id, index, call_id, result);
            let legacy_reference = legacy_tool_output_ref(session, turn_id, index, call_id, result)
                .filter(|legacy| *legacy != reference);
            out.push(ToolOutput {
                reference,
                session: session.to_string(),
                bytes: result.as_bytes().to_vec(),
                legacy_reference,
            });
        }
    }
    out
}

/// Marks a name made by ctxgate (a digest follows it): never kept in a name used as it is.
const DIGEST_MARK: char = '~';

/// Longest name used as it is, in bytes.
const MAX_VERBATIM_BYTES: usize = 120;

/// Bytes of the readable part kept before the digest of a name that had to change.
const READABLE_BYTES: usize = 100;

/// `json` for a result that is a JSON object or array, else `txt`.
fn extension(result: &str) -> &'static str {
    let trimmed = result.trim_start();
    let is_json = (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(result).is_ok();
    if is_json { "json" } else { "txt" }
}

/// The name of a call without an id.
fn generated_name(turn: u32, index: usize) -> String {
    format!("turn-{turn}-{index}")
}

/// True for a name of the shape [`generated_name`] makes.
fn is_generated_name(name: &str) -> bool {
    name.strip_prefix("turn-").and_then(|rest| rest.split_once('-')).is_some_and(|(turn, index)| {
        [turn, index].iter().all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// A path component from any text, unique to it: the text itself when it is a safe name, else
/// its sanitized beginning, [`DIGEST_MARK`] and the digest of the whole text.
fn component(text: &str) -> String {
    let sanitized: String =
        text.chars().map(|c| if is_unsafe(c) || c == DIGEST_MARK { '_' } else { c }).collect();
    let as_is = sanitized == text
        && !text.is_empty()
        && !text.starts_with('.')
        && text.len() <= MAX_VERBATIM_BYTES
        // `evidence index` leaves out names ending so (left behind by an interrupted write).
        && !text.ends_with(".ctxgate-tmp")
        && !is_generated_name(text);
    if as_is {
        return sanitized;
    }
    let mut readable = sanitized;
    readable.truncate(readable.floor_char_boundary(READABLE_BYTES));
    if readable.is_empty() || readable.starts_with('.') {
        readable.insert(0, '_');
    }
    format!("{readable}{DIGEST_MARK}{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
}

/// Characters a component cannot hold: separators, control and invisible formatting
/// characters (refused in refs), `:`.
fn is_unsafe(c: char) -> bool {
    c == '/' || c == '\\' || c.is_control() || c == ':' || crate::evidence::reference::is_invisible_format(c)
}

/// The component of versions before unique refs: unsafe characters replaced, cut at 120 bytes.
fn legacy_component(text: &str) -> String {
    let mut out: String = text.chars().map(|c| if is_unsafe(c) { '_' } else { c }).collect();
    if out.len() > MAX_VERBATIM_BYTES {
        out.truncate(out.floor_char_boundary(MAX_VERBATIM_BYTES));
    }
    if out.is_empty() || out.starts_with('.') {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::turns::ToolCall;

    fn digest(text: &str) -> String {
        format!("{:016x}", xxhash_rust::xxh3::xxh3_64(text.as_bytes()))
    }

    #[test]
    fn refs_are_safe_and_typed() {
        let r = tool_output_ref("proj/../x", 3, 0, Some("toolu_01"), "{\"rows\": []}");
        assert_eq!(r.as_str(), format!("tool-output/proj_.._x~{}/toolu_01.json", digest("proj/../x")));
        let r = tool_output_ref("..", 3, 1, None, "plain text");
        assert_eq!(r.as_str(), format!("tool-output/_..~{}/turn-3-1.txt", digest("..")));
        let r = tool_output_ref("s", 0, 0, Some("a/b\0c"), "{not json");
        assert_eq!(r.as_str(), format!("tool-output/s/a_b_c~{}.txt", digest("a/b\0c")));
        // Safe names are used as they are, as before.
        let r = tool_output_ref("3f2a-session", 0, 0, Some("toolu_01AbC"), "ok");
        assert_eq!(r.as_str(), "tool-output/3f2a-session/toolu_01AbC.txt");
    }

    /// Issue 23, finding 8: `a/b` and `a_b` shared `tool-output/a_b/`, and names over 120 bytes
    /// were cut to one prefix.
    #[test]
    fn names_that_sanitize_or_cut_alike_get_different_refs() {
        let long = "x".repeat(130);
        let rows: [(&str, Option<&str>); 12] = [
            ("a/b", None),
            ("a_b", None),
            ("a:b", None),
            ("a_b~0000000000000000", None),
            (&long, None),
            (&long[..125], None),
            ("s", Some("turn-0-0")), // a call id shaped like a generated name
            ("s", None),
            ("s", Some("id/1")),
            ("s", Some("id_1")),
            ("s", Some(&long)),
            ("s", Some(&long[..121])),
        ];
        let mut seen = std::collections::BTreeMap::new();
        for (session, call_id) in rows {
            let r = tool_output_ref(session, 0, 0, call_id, "same output");
            // Room under the 255-byte name limit for a temporary name beside it.
            assert!(r.as_str().split('/').all(|c| c.len() <= MAX_VERBATIM_BYTES + ".json".len()), "{r}");
            if let Some(other) = seen.insert(r.clone(), (session, call_id)) {
                panic!("{session:?} {call_id:?} and {other:?} share {r}");
            }
        }
        // The old scheme gave several of them one ref: kept as the legacy ref, the new one differs.
        let legacy = |s, id| legacy_tool_output_ref(s, 0, 0, id, "same output");
        assert_eq!(legacy("a/b", None), legacy("a_b", None));
        assert_eq!(legacy(&long, None), legacy(&long[..125], None));
    }

    #[test]
    fn outputs_carry_the_legacy_ref_only_where_it_differs() {
        let call = |id: &str| ToolCall {
            name: "Bash".into(),
            call_id: Some(id.into()),
            result: Some("output".into()),
            ..Default::default()
        };
        let turns = [ParsedTurn { tools: vec![call("toolu_1"), call("a/b")], ..Default::default() }];
        let outputs = outputs_of("s", 4, &turns);
        assert_eq!(outputs.len(), 2);
        assert_eq!(outputs[0].reference.as_str(), "tool-output/s/toolu_1.txt");
        assert_eq!(outputs[0].legacy_reference, None);
        assert_eq!(
            outputs[1].legacy_reference.as_ref().map(EvidenceRef::as_str),
            Some("tool-output/s/a_b.txt")
        );
        assert_ne!(outputs[1].reference, outputs[1].legacy_reference.clone().unwrap());
    }
}
