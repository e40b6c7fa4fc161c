//! The hook payloads the real agents sent (recorded by tests/real_agents.rs into
//! `fixtures/hooks/<agent>-<version>/`), replayed in order through `ctxgate hook <agent>` on an
//! index with a history of the project: every call exits 0, and whatever it prints is output
//! that agent version accepts for the event.
//!
//! Codex's accepted output is its published schema
//! (`codex-rs/hooks/schema/generated/<event>.command.output.schema.json`; every object there
//! has `additionalProperties: false`); Claude Code's, its hooks reference
//! (<https://code.claude.com/docs/en/hooks>: `hookSpecificOutput` with the event's
//! `hookEventName` and an `additionalContext` string for `UserPromptSubmit` and
//! `SessionStart`). The live tests show the agents taking it; this one keeps every recorded
//! event covered without them.

mod common;

use common::{TestResult, ctxgate, run_at};
use serde_json::Value;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The keys an agent version's output schema allows for an event: at the top, and in
/// `hookSpecificOutput` (`None`: the event takes none, so ctxgate must print nothing).
struct Accepts {
    top: &'static [&'static str],
    specific: Option<&'static [&'static str]>,
}

fn accepts(agent: &str, event: &str) -> Accepts {
    const COMMON: &[&str] = &["continue", "stopReason", "suppressOutput", "systemMessage"];
    match (agent, event) {
        // user-prompt-submit.command.output.schema.json
        ("codex", "UserPromptSubmit") => Accepts {
            top: &[
                "continue",
                "decision",
                "hookSpecificOutput",
                "reason",
                "stopReason",
                "suppressOutput",
                "systemMessage",
            ],
            specific: Some(&["additionalContext", "hookEventName"]),
        },
        // session-start.command.output.schema.json
        ("codex", "SessionStart") => Accepts {
            top: &["continue", "hookSpecificOutput", "stopReason", "suppressOutput", "systemMessage"],
            specific: Some(&["additionalContext", "env", "hookEventName"]),
        },
        ("claude-code", "UserPromptSubmit" | "SessionStart") => Accepts {
            top: &[
                "continue",
                "decision",
                "hookSpecificOutput",
                "reason",
                "stopReason",
                "suppressOutput",
                "systemMessage",
            ],
            specific: Some(&["additionalContext", "hookEventName"]),
        },
        // Stop, PostCompact, SessionEnd, ...: no context in either agent.
        _ => Accepts { top: COMMON, specific: None },
    }
}

/// Fails unless `output` (what the hook printed for `event`) is accepted by `agent`.
fn check_output(agent: &str, event: &str, output: &str) -> TestResult {
    let output = output.trim();
    if output.is_empty() {
        return Ok(());
    }
    let accepts = accepts(agent, event);
    let doc: Value =
        serde_json::from_str(output).map_err(|e| format!("{event}: not one JSON object ({e}): {output}"))?;
    let top = doc.as_object().ok_or_else(|| format!("{event}: not an object: {output}"))?;
    if let Some(key) = top.keys().find(|k| !accepts.top.contains(&k.as_str())) {
        return Err(format!("{agent} {event}: {key:?} is not in its schema: {output}").into());
    }
    if let Some(specific) = top.get("hookSpecificOutput") {
        let allowed =
            accepts.specific.ok_or_else(|| format!("{agent} {event} takes no hookSpecificOutput"))?;
        let specific = specific.as_object().ok_or("hookSpecificOutput is not an object")?;
        if let Some(key) = specific.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(format!("{agent} {event}: hookSpecificOutput.{key} is not in its schema").into());
        }
        if specific.get("hookEventName") != Some(&Value::from(event)) {
            return Err(format!("{agent} {event}: hookEventName is not {event:?}: {output}").into());
        }
        if !specific.get("additionalContext").is_some_and(Value::is_string) {
            return Err(format!("{agent} {event}: additionalContext is not a string: {output}").into());
        }
    }
    Ok(())
}

/// One agent version's recorded payloads: agent, version, files in the order sent.
type Recorded = (String, String, Vec<PathBuf>);

/// The recorded payloads of every agent version, in the order they were sent.
fn recorded() -> Result<Vec<Recorded>, Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join("hooks");
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(root)? {
        let dir = entry?.path();
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
        // `<agent>-<version>`: the version is what follows the last `-`.
        let Some((agent, version)) = name.rsplit_once('-') else { continue };
        if !version.starts_with(|c: char| c.is_ascii_digit()) {
            continue;
        }
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        files.retain(|f| f.extension().is_some_and(|e| e == "json"));
        files.sort();
        versions.push((agent.to_string(), version.to_string(), files));
    }
    versions.sort();
    Ok(versions)
}

#[test]
fn recorded_payloads_replay_into_output_each_agent_accepts() -> TestResult {
    let versions = recorded()?;
    let agents: Vec<&str> = versions.iter().map(|(a, _, _)| a.as_str()).collect();
    assert!(agents.contains(&"claude-code") && agents.contains(&"codex"), "{agents:?}");
    for (agent, version, files) in &versions {
        let dir = tempfile::tempdir()?;
        let (home, project) = (dir.path().join("home"), dir.path().join("project"));
        std::fs::create_dir_all(&project)?;
        let db = dir.path().join("index.redb");
        let session = format!("{}#earlier", project.display());
        let (user, assistant) = (
            "How do I rotate the TLS certificates on the gateway?",
            "Run certbot renew --cert-name gateway-zebra7731, then reload nginx.",
        );
        run_at(&db, ["add", "--session", &session, "--user", user, "--assistant", assistant])?.ok()?;
        let mut printed = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file)?
                .replace("$HOME", &home.display().to_string())
                .replace("$PROJECT_DIR", "project")
                .replace("$PROJECT", &project.display().to_string());
            let event: Value = serde_json::from_str(&text)?;
            let name = event["hook_event_name"].as_str().ok_or("no hook_event_name")?.to_string();
            let mut child = ctxgate()
                .env("HOME", &home)
                // A debug build on a busy machine: this test is about the output, not the time.
                .env("CTXGATE_HOOK_DEADLINE_MS", "30000")
                .arg("--db")
                .arg(&db)
                .args(["hook", agent])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            child.stdin.take().ok_or("no stdin")?.write_all(text.as_bytes())?;
            let out = child.wait_with_output()?;
            let (stdout, stderr) = (String::from_utf8(out.stdout)?, String::from_utf8_lossy(&out.stderr));
            let what = format!("{agent} {version} {}", file.display());
            assert!(out.status.success(), "{what}: {stderr}");
            assert!(stderr.trim().is_empty(), "{what}: {stderr}");
            check_output(agent, &name, &stdout).map_err(|e| format!("{what}: {e}"))?;
            if !stdout.trim().is_empty() {
                printed.push(name);
            }
        }
        // The replay reached the output: the first prompt, on a transcript not written yet,
        // gets the history's turn, and a resume gives context too.
        for event in ["UserPromptSubmit", "SessionStart"] {
            assert!(
                printed.iter().any(|e| e == event),
                "{agent} {version}: no {event} printed context: {printed:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn output_outside_the_schemas_is_caught() {
    let context = r#"{"hookSpecificOutput":{"hookEventName":"PostCompact","additionalContext":"x"}}"#;
    assert!(check_output("codex", "PostCompact", context).is_err());
    let extra =
        r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"x"},"extra":1}"#;
    assert!(check_output("codex", "SessionStart", extra).is_err());
    let renamed = r#"{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"x"}}"#;
    assert!(check_output("claude-code", "SessionStart", renamed).is_err());
    let good = r#"{"hookSpecificOutput":{"hookEventName":"SessionStart","additionalContext":"x"}}"#;
    assert!(check_output("codex", "SessionStart", good).is_ok());
}
