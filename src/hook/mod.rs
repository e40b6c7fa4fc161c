//! Agent hooks: what `ctxgate hook claude-code|codex` does with one event of the agent's
//! lifecycle (docs/hooks.md). The event JSON comes in, the context to hand the agent (or
//! nothing) goes out; the CLI adds the deadline, the log and the printing.
//!
//! Sessions are tied to their project by name: the hook imports a transcript into the session
//! `<project>#<session_id>` ([`session_name`]), where the project is the event's `cwd` the
//! first time the hook sees the session. "Other sessions of this project" are the sessions
//! whose name has the same `<project>#` prefix, whichever agent wrote them.

mod context;
pub mod given;
pub mod install;

use crate::Gatekeeper;
use crate::ImportOptions;
use crate::import::Format;
use crate::{Error, Result};
use serde::Deserialize;
use std::path::PathBuf;

pub use context::{Context, OTHER_SESSION_HITS};
pub use given::Given;

/// The hooks' default token budget for the context of one event: room for a few pruned turns
/// without crowding the agent's own context (Claude Code shows hook output over 10,000
/// characters only as a preview), 1% of a 200k-token context window. Counted in
/// [`HOOK_TOKENIZER`] unless `--tokenizer` says otherwise.
pub const HOOK_TOKEN_BUDGET: u32 = 2000;

/// What the hooks count budgets in by default: OpenAI's `o200k_base`, Codex's models' encoding,
/// and the closest published one for Claude Code (Anthropic publishes no tokenizer for its
/// current models).
pub const HOOK_TOKENIZER: crate::tokens::Tokenizer = crate::tokens::Tokenizer::O200k;

/// What a hook's import of its transcript may hold in flight: batches small enough that one
/// begun just before the import's time limit ends well before the hook's deadline.
pub const HOOK_IMPORT_MEMORY: usize = 16 << 20;

/// Longest project part of a session name, in bytes: a longer `cwd` is replaced by its hash so
/// the name stays under the 256-byte limit of session names.
const MAX_PROJECT_BYTES: usize = 160;

/// The agent whose hook runs: it decides the transcript format and the output shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    /// Claude Code (`~/.claude/settings.json` hooks; transcripts are session JSONL).
    ClaudeCode,
    /// Codex CLI (`~/.codex/hooks.json`; transcripts are rollout JSONL).
    Codex,
}

impl Agent {
    /// The name on the command line (`ctxgate hook <name>`).
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude-code",
            Agent::Codex => "codex",
        }
    }

    fn format(self) -> Format {
        match self {
            Agent::ClaudeCode => Format::ClaudeCode,
            Agent::Codex => Format::Codex,
        }
    }
}

/// The fields of a hook event that ctxgate uses (Claude Code and Codex send the same names);
/// others are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    /// The agent's session id.
    pub session_id: String,
    /// The session's transcript (Codex may send `null`).
    #[serde(default)]
    pub transcript_path: Option<PathBuf>,
    /// The session's working directory: its project.
    #[serde(default)]
    pub cwd: Option<String>,
    /// `UserPromptSubmit`, `SessionStart`, `Stop`, ...
    pub hook_event_name: String,
    /// The prompt (`UserPromptSubmit`).
    #[serde(default)]
    pub prompt: Option<String>,
    /// Why the session started (`SessionStart`): `startup`, `resume`, `clear` or `compact`.
    #[serde(default)]
    pub source: Option<String>,
}

impl Event {
    /// Parses the event JSON an agent writes on the hook's stdin.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for input that is not such an object.
    pub fn parse(bytes: &[u8]) -> Result<Event> {
        let event: Event = serde_json::from_slice(bytes).map_err(|e| Error::InvalidInput {
            what: "hook event",
            reason: format!("{e}: expected the agent's hook JSON object on stdin"),
        })?;
        if event.session_id.trim().is_empty() {
            return Err(Error::InvalidInput { what: "hook event", reason: "session_id is empty".into() });
        }
        Ok(event)
    }

    /// Whether ctxgate does anything for this event (else the hook need not open the index).
    pub fn is_handled(&self) -> bool {
        action(self) != Action::Nothing
    }
}

/// What an event asks of the hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Import, then the context for the prompt.
    Prompt,
    /// Import, then what the agent lost: the session's requests and the latest one's selection.
    Recover,
    /// Import only.
    Import,
    /// Nothing (an event ctxgate does not handle, a fresh start).
    Nothing,
}

fn action(event: &Event) -> Action {
    match (event.hook_event_name.as_str(), event.source.as_deref()) {
        ("UserPromptSubmit", _) => Action::Prompt,
        ("SessionStart", Some("resume" | "clear" | "compact")) => Action::Recover,
        // Codex's PostCompact output takes no context (its schema has no `hookSpecificOutput`,
        // and such output fails the hook): the `SessionStart` of source `compact` that follows
        // a compaction in both agents gives it.
        ("Stop" | "SessionEnd" | "PreCompact" | "PostCompact" | "SubagentStop", _) => Action::Import,
        _ => Action::Nothing,
    }
}

/// Runs `event` against the index: imports the transcript if the event calls for it and
/// returns the context to hand the agent, if any: none of what `given` says the agent session
/// was handed before, and `given` notes what it is handed now (the caller saves it once the
/// context is out, or at once when there is none). A compaction clears `given` first: the
/// agent rebuilt the model's window without what was given before.
///
/// `until` limits the import of the transcript ([`ImportOptions::until`]): a long transcript is
/// imported over several events, each keeping what it wrote, and the context comes from what
/// the index holds.
///
/// # Errors
/// Errors of the index, a transcript that cannot be read or parsed, a session name the index
/// refuses.
pub fn handle(
    gatekeeper: &Gatekeeper,
    agent: Agent,
    event: &Event,
    budget: u32,
    given: &mut Given,
    until: Option<std::time::Instant>,
) -> Result<Option<Context>> {
    let action = action(event);
    if action == Action::Nothing {
        return Ok(None);
    }
    let name = session_name(gatekeeper, event)?;
    // Claude Code writes a new session's transcript only after the first `UserPromptSubmit`:
    // a transcript that does not exist yet is an empty one, and the context comes from the
    // project's other sessions.
    let transcript = event.transcript_path.as_ref().filter(|p| !p.as_os_str().is_empty() && p.exists());
    // The session's last request when it has no reply yet: the import holds it back.
    let mut pending = None;
    if let Some(path) = transcript {
        // Tool results become evidence on the other events (Stop follows every reply): looking
        // at every result of the file on each prompt would double the prompt's latency, and the
        // next import with evidence stores whatever is missing.
        let options = ImportOptions {
            format: agent.format(),
            session: Some(name.clone()),
            evidence: action != Action::Prompt,
            memory_bytes: HOOK_IMPORT_MEMORY,
            until,
            ..ImportOptions::default()
        };
        let report = gatekeeper.import(std::slice::from_ref(path), &options)?;
        if report.files.iter().any(|f| f.unfinished) {
            log::info!(
                "{}: imported {} turns within the time limit; the next event goes on",
                path.display(),
                report.new_turns
            );
        }
        pending = (report.files.into_iter().flat_map(|f| f.sessions))
            .find(|s| s.session == name)
            .and_then(|s| s.held_back_request);
    }
    match action {
        Action::Prompt => match event.prompt.as_deref().filter(|p| !p.trim().is_empty()) {
            Some(prompt) => context::for_prompt(gatekeeper, &name, prompt, budget, given),
            None => Ok(None),
        },
        Action::Recover => {
            // A compaction rebuilt the model's window: what the hooks gave before it is gone
            // from it, and the recovery gives it back (then records what it gave).
            if event.source.as_deref() == Some("compact") {
                given.clear();
            }
            context::recovery(gatekeeper, &name, budget, pending.as_deref(), given)
        }
        Action::Import | Action::Nothing => Ok(None),
    }
}

/// What the hook prints for `context` on `event`: `{"hookSpecificOutput": {"hookEventName",
/// "additionalContext"}}` for the events whose output takes context in both agents'
/// published schemas (`UserPromptSubmit`, `SessionStart`), `None` for any other (Codex fails
/// a `PostCompact` hook whose output has a `hookSpecificOutput`).
pub fn output(event: &str, context: &Context) -> Option<serde_json::Value> {
    matches!(event, "UserPromptSubmit" | "SessionStart").then(|| {
        serde_json::json!({
            "hookSpecificOutput": { "hookEventName": event, "additionalContext": context.text }
        })
    })
}

/// The project part of session names for a working directory.
pub fn project_key(cwd: &str) -> String {
    let cwd = cwd.trim();
    let clean = !cwd.is_empty() && !cwd.contains('#') && !cwd.chars().any(char::is_control);
    if clean && cwd.len() <= MAX_PROJECT_BYTES {
        cwd.to_string()
    } else {
        format!("project-{:016x}", xxhash_rust::xxh3::xxh3_64(cwd.as_bytes()))
    }
}

/// The session an event's transcript goes into: the one the hook already named for this
/// session id (so a `cd` mid-session does not start another), else `<project>#<session_id>`.
///
/// # Errors
/// Errors of the index; [`Error::InvalidInput`] for a session id the index cannot name.
pub fn session_name(gatekeeper: &Gatekeeper, event: &Event) -> Result<String> {
    let id = event.session_id.trim();
    let suffix = format!("#{id}");
    if let Some(existing) = gatekeeper.sessions()?.into_iter().find(|s| s.name.ends_with(&suffix)) {
        return Ok(existing.name);
    }
    let project = project_key(event.cwd.as_deref().unwrap_or_default());
    let name = format!("{project}{suffix}");
    gatekeeper.session(&name)?;
    Ok(name)
}

/// The project part of a hook session's name (`None` for a session the hook did not name).
pub fn project_of(session: &str) -> Option<&str> {
    session.rsplit_once('#').map(|(project, _)| project)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(json: &str) -> Event {
        Event::parse(json.as_bytes()).expect("parses")
    }

    #[test]
    fn actions_follow_the_documented_events() {
        let base = r#""session_id":"s","hook_event_name""#;
        assert_eq!(action(&event(&format!(r#"{{{base}:"UserPromptSubmit","prompt":"x"}}"#))), Action::Prompt);
        for source in ["resume", "clear", "compact"] {
            let e = event(&format!(r#"{{{base}:"SessionStart","source":"{source}"}}"#));
            assert_eq!(action(&e), Action::Recover, "{source}");
        }
        assert_eq!(
            action(&event(&format!(r#"{{{base}:"SessionStart","source":"startup"}}"#))),
            Action::Nothing
        );
        assert_eq!(action(&event(&format!(r#"{{{base}:"PostCompact"}}"#))), Action::Import);
        assert_eq!(action(&event(&format!(r#"{{{base}:"Stop"}}"#))), Action::Import);
        assert_eq!(action(&event(&format!(r#"{{{base}:"SessionEnd"}}"#))), Action::Import);
        assert_eq!(action(&event(&format!(r#"{{{base}:"PreToolUse"}}"#))), Action::Nothing);
    }

    /// Issue 50, item 6: output only where the agents' output schemas take context
    /// (codex-rs/hooks/schema/generated/*.command.output.schema.json).
    #[test]
    fn r50_output_only_where_the_schemas_take_context() {
        let context = Context { text: "x".into(), tokens: 1 };
        for event in ["UserPromptSubmit", "SessionStart"] {
            let doc = output(event, &context).expect("context is output");
            assert_eq!(doc["hookSpecificOutput"]["hookEventName"], event);
            assert_eq!(doc.as_object().map(|o| o.len()), Some(1), "{doc}");
        }
        for event in ["PostCompact", "PreCompact", "Stop", "SessionEnd"] {
            assert_eq!(output(event, &context), None, "{event}");
        }
    }

    #[test]
    fn bad_events_are_errors() {
        for bad in [
            "",
            "not json",
            "[]",
            r#"{"hook_event_name":"Stop"}"#,
            r#"{"session_id":" ","hook_event_name":"Stop"}"#,
        ] {
            assert!(Event::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn project_keys_fit_session_names() {
        assert_eq!(project_key("/home/mei/src/demo"), "/home/mei/src/demo");
        let long = format!("/{}", "d".repeat(300));
        assert!(project_key(&long).starts_with("project-"));
        assert!(project_key("/a#b").starts_with("project-"));
        assert_eq!(project_key(&long), project_key(&long));
        assert_eq!(project_of("/home/mei/src/demo#abc"), Some("/home/mei/src/demo"));
    }
}
