//! Which parser reads which format. One parser per log format, each in its own module; and
//! the check that a format given for a file is the file's.

use super::error::Error;
use super::turns::ParsedFile;
use super::{Format, chatgpt, claude, claude_code, codex, jsonl, openai, sharegpt};
use std::path::Path;

/// Parses `text` (the whole file) as `format`.
pub fn parse(format: Format, path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    let parsed = match format {
        Format::Jsonl => jsonl::parse(path, text, skip_invalid),
        Format::OpenAi => openai::parse(path, text, skip_invalid),
        Format::ChatGpt => chatgpt::parse(path, text, skip_invalid),
        Format::Claude => claude::parse(path, text, skip_invalid),
        Format::ClaudeCode => claude_code::parse(path, text, skip_invalid),
        Format::Codex => codex::parse(path, text, skip_invalid),
        Format::ShareGpt => sharegpt::parse(path, text, skip_invalid),
        Format::Auto => Err(Error::UnknownFormat { path: path.to_path_buf() }),
    };
    parsed.and_then(|parsed| within_limits(path, parsed))
}

/// `parsed`, if each of its turns is within [`crate::limits::MAX_TURN_BYTES`]. A turn past it
/// fails the file, even with `--skip-invalid`: leaving one turn out would shift the turns after
/// it, which a later import of the grown log would find differing.
fn within_limits(path: &Path, parsed: ParsedFile) -> Result<ParsedFile, Error> {
    for conversation in &parsed.conversations {
        for (i, turn) in conversation.turns.iter().enumerate() {
            let tools = turn.tools.iter().map(|t| (&*t.name, t.call_id.as_deref(), &*t.arguments));
            let bytes = crate::limits::turn_bytes(&turn.user, &turn.assistant, turn.time.as_deref(), tools);
            if let Some(why) = crate::limits::turn_too_large(bytes) {
                return Err(Error::Shape {
                    path: path.to_path_buf(),
                    at: super::error::Location::File,
                    what: format!("conversation {:?}, turn {i}: {why}", conversation.key),
                });
            }
        }
    }
    Ok(parsed)
}

/// Parses the part of a live agent log (Claude Code, Codex) that starts at the record that
/// began one of its turns, given what the parse of the whole file said of the records before
/// it ([`Carry`](super::turns::Carry)). `None` for a format that is no live log.
pub fn parse_from(
    format: Format,
    path: &Path,
    text: &str,
    carry: &super::turns::Carry,
) -> Option<Result<ParsedFile, Error>> {
    let parsed = match format {
        Format::ClaudeCode => claude_code::parse_from(path, text, false, Some(carry)),
        Format::Codex => codex::parse_from(path, text, false, Some(carry)),
        _ => return None,
    };
    Some(parsed.and_then(|parsed| within_limits(path, parsed)))
}

/// The error for a file read as `given` that failed with `what` (a parser's message) or held
/// no turns: [`Error::WrongFormat`] naming the format the file looks like, if detection finds
/// another one. `None` if it finds `given` or nothing: the parser's own result stands.
pub fn wrong_format(path: &Path, given: Format, what: impl FnOnce() -> String) -> Option<Error> {
    match super::detect_file(path) {
        Ok(detected) if detected != given => {
            Some(Error::WrongFormat { path: path.to_path_buf(), given, detected, what: what() })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::records::fixtures;

    /// The rule a resumed read rests on: whenever a read that starts at a turn of an earlier,
    /// shorter state of the file says it is sure, its turns are the whole read's from that
    /// turn on, and the whole read's turns before it are the earlier state's. Checked for every state of each fixture (its first L lines, as the agent wrote
    /// them), every turn of it, and two later states (one more line; the whole file), on
    /// linear sessions, a rewound one and rollouts of both kinds.
    #[test]
    fn a_sure_resumed_read_is_the_whole_read() {
        let files = [
            (Format::ClaudeCode, "fixtures/import/claude-code/session.jsonl"),
            (Format::ClaudeCode, "fixtures/import/claude-code/rewind.jsonl"),
            (Format::ClaudeCode, "fixtures/import/claude-code/9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b.jsonl"),
            (
                Format::Codex,
                "fixtures/import/codex/rollout-2025-10-02T07-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl",
            ),
            (Format::Codex, "fixtures/import/codex/events-only.jsonl"),
        ];
        let mut sure = 0;
        let mut unsure = 0;
        for (format, relative) in files {
            let (path, text) = fixtures::read(relative);
            let ends: Vec<usize> = text.match_indices('\n').map(|(i, _)| i + 1).collect();
            for (l, &end) in ends.iter().enumerate() {
                let Ok(earlier) = parse(format, &path, &text[..end], false) else { continue };
                let Some(live) = earlier.live.filter(|live| !live.unsure) else { continue };
                for later_end in [ends.get(l + 1).copied().unwrap_or(end), text.len()] {
                    let later = &text[..later_end];
                    let whole = parse(format, &path, later, false).expect("the fixture parses");
                    for (k, &start) in live.starts.iter().enumerate() {
                        let part = parse_from(format, &path, &later[start..], &live.carry).unwrap();
                        let Ok(part) = part else { continue };
                        if part.live.as_ref().is_none_or(|live| live.unsure) {
                            unsure += 1;
                            continue;
                        }
                        sure += 1;
                        let [only] = &whole.conversations[..] else { panic!("{relative}: one conversation") };
                        let [resumed] = &part.conversations[..] else {
                            panic!("{relative}: one conversation")
                        };
                        assert_eq!(resumed.key, only.key, "{relative}");
                        // The turns before the part are the earlier state's: a resumed import
                        // keeps those it stored.
                        let [before] = &earlier.conversations[..] else {
                            panic!("{relative}: one conversation")
                        };
                        assert_eq!(
                            only.turns[..k],
                            before.turns[..k],
                            "{relative}: {l} lines, then {later_end} bytes: the turns before turn {k}"
                        );
                        assert_eq!(
                            resumed.turns,
                            only.turns[k..],
                            "{relative}: {l} lines, then {later_end} bytes, from turn {k}"
                        );
                        let starts = &whole.live.as_ref().unwrap().starts[k..];
                        let from_part: Vec<usize> =
                            part.live.unwrap().starts.iter().map(|s| s + start).collect();
                        assert_eq!(from_part, starts, "{relative}: where the turns begin");
                    }
                }
            }
        }
        // Both outcomes happen: the rule is exercised, and the rewound session is caught.
        assert!(sure > 100, "{sure} sure reads");
        assert!(unsure > 0, "{unsure} unsure reads");
    }
}
