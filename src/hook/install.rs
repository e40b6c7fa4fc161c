//! `ctxgate hook install|uninstall`: ctxgate's entries in an agent's hook settings, merged
//! with what the file holds.
//!
//! Claude Code and Codex read the same JSON shape: `{"hooks": {EVENT: [{"matcher": …,
//! "hooks": [{"type": "command", "command": …, "timeout": …}]}]}}` (Claude Code:
//! `.claude/settings.json` or `~/.claude/settings.json`; Codex: `.codex/hooks.json` or
//! `~/.codex/hooks.json`). An entry is ctxgate's when its command has the shape ctxgate writes,
//! `PROGRAM --db PATH hook <agent>` (whatever the program is called: a copy or a link under
//! another name), or runs `hook <agent>` of a program named `ctxgate`; every other key and
//! entry is kept as it was, in its order.

use super::Agent;
use serde_json::{Map, Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Seconds the agent gives the hook before it kills it: a backstop far above the hook's own
/// deadline, which exits in time on its own.
pub const AGENT_TIMEOUT_SECS: u64 = 10;

/// An install or uninstall error: the settings file cannot be read, parsed or written.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InstallError(String);

/// Where the settings go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The user's settings, for every project (`~/.claude`, `~/.codex`).
    User,
    /// The project's settings (`.claude`, `.codex` in the working directory).
    Project,
}

/// The settings file of `agent` for `scope`.
pub fn settings_path(agent: Agent, scope: Scope, home: &Path, project: &Path) -> PathBuf {
    let base = match scope {
        Scope::User => home,
        Scope::Project => project,
    };
    match agent {
        Agent::ClaudeCode => base.join(".claude").join("settings.json"),
        Agent::Codex => base.join(".codex").join("hooks.json"),
    }
}

/// The events ctxgate registers for `agent`, each with its matcher (docs/hooks.md).
pub fn events(agent: Agent) -> &'static [(&'static str, Option<&'static str>)] {
    match agent {
        Agent::ClaudeCode => &[
            ("UserPromptSubmit", None),
            ("SessionStart", Some("resume|clear|compact")),
            ("Stop", None),
            ("SessionEnd", None),
        ],
        Agent::Codex => &[
            ("UserPromptSubmit", None),
            ("SessionStart", Some("resume|clear|compact")),
            ("PostCompact", None),
            ("Stop", None),
        ],
    }
}

/// A change to a settings file, computed before anything is written.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The settings file.
    pub path: PathBuf,
    /// Its text before (`None`: no file).
    pub before: Option<String>,
    /// Its text after.
    pub after: String,
    /// What changes, a line each (`added UserPromptSubmit`, …); empty when nothing does.
    pub changes: Vec<String>,
}

/// Whether `command` is ctxgate's hook for `agent`: `hook <agent>` after `--db PATH` (the
/// marker every install writes, which does not depend on the binary's name), or of a program
/// named `ctxgate`.
pub(crate) fn is_ours(command: &str, agent: Agent) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    let Some(at) = words.windows(2).position(|w| w == ["hook", agent.name()]) else { return false };
    let marked = words[..at].contains(&"--db");
    marked
        || words.iter().any(|w| {
            let w = w.trim_matches(|c| c == '\'' || c == '"');
            let file = w.rsplit(['/', '\\']).next().unwrap_or(w);
            file == "ctxgate" || file == "ctxgate.exe"
        })
}

fn read(path: &Path) -> Result<(Option<String>, Map<String, Value>), InstallError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, Map::new())),
        Err(e) => return Err(InstallError(format!("cannot read {}: {e}", path.display()))),
    };
    if text.trim().is_empty() {
        return Ok((Some(text), Map::new()));
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(map)) => Ok((Some(text), map)),
        Ok(_) => Err(InstallError(format!(
            "{} is not a JSON object: fix or move it, then install again",
            path.display()
        ))),
        Err(e) => Err(InstallError(format!(
            "{} is not valid JSON ({e}): fix or move it, then install again; nothing was written",
            path.display()
        ))),
    }
}

fn hooks_object<'a>(
    path: &Path,
    root: &'a mut Map<String, Value>,
) -> Result<&'a mut Map<String, Value>, InstallError> {
    let hooks = root.entry("hooks").or_insert_with(|| Value::Object(Map::new()));
    hooks.as_object_mut().ok_or_else(|| {
        InstallError(format!("{}: \"hooks\" is not an object: fix it, then install again", path.display()))
    })
}

/// The groups of `event`, or an error naming the event if the file has something else there.
fn groups<'a>(
    path: &Path,
    hooks: &'a mut Map<String, Value>,
    event: &str,
) -> Result<&'a mut Vec<Value>, InstallError> {
    let groups = hooks.entry(event).or_insert_with(|| Value::Array(Vec::new()));
    groups.as_array_mut().ok_or_else(|| {
        InstallError(format!("{}: hooks.{event} is not an array: fix it, then install again", path.display()))
    })
}

/// The handler commands of a group, mutable.
fn handlers(group: &mut Value) -> Option<&mut Vec<Value>> {
    group.get_mut("hooks").and_then(Value::as_array_mut)
}

fn render(root: &Map<String, Value>) -> String {
    // Serializing a `Value` cannot fail.
    let mut text = serde_json::to_string_pretty(root).unwrap_or_default();
    text.push('\n');
    text
}

/// The plan to add ctxgate's hooks for `agent`, running `command`, to the file at `path`:
/// an entry per event in [`events`], added once (an entry already there with another command
/// is updated in place).
///
/// # Errors
/// A file that cannot be read or is not a JSON object with a `hooks` object.
pub fn plan_install(agent: Agent, path: &Path, command: &str) -> Result<Plan, InstallError> {
    let (before, mut root) = read(path)?;
    let mut changes = Vec::new();
    let hooks = hooks_object(path, &mut root)?;
    for &(event, matcher) in events(agent) {
        let groups = groups(path, hooks, event)?;
        let mut found = false;
        for group in groups.iter_mut() {
            for handler in handlers(group).into_iter().flatten() {
                let Some(existing) = handler.get("command").and_then(Value::as_str) else { continue };
                if !is_ours(existing, agent) {
                    continue;
                }
                found = true;
                if existing != command {
                    handler["command"] = Value::String(command.to_string());
                    changes.push(format!("updated {event}: {command}"));
                }
            }
        }
        if !found {
            let mut group = Map::new();
            if let Some(matcher) = matcher {
                group.insert("matcher".into(), Value::String(matcher.into()));
            }
            group.insert(
                "hooks".into(),
                json!([{ "type": "command", "command": command, "timeout": AGENT_TIMEOUT_SECS }]),
            );
            groups.push(Value::Object(group));
            changes.push(format!(
                "added {event}{}: {command}",
                matcher.map(|m| format!(" ({m})")).unwrap_or_default()
            ));
        }
    }
    let after =
        if changes.is_empty() { before.clone().unwrap_or_else(|| render(&root)) } else { render(&root) };
    Ok(Plan { path: path.to_path_buf(), before, after, changes })
}

/// The plan to remove ctxgate's hooks for `agent` from the file at `path`: only its handlers;
/// a group, event or `hooks` object left empty by that goes too.
///
/// # Errors
/// As [`plan_install`].
pub fn plan_uninstall(agent: Agent, path: &Path) -> Result<Plan, InstallError> {
    let (before, mut root) = read(path)?;
    let mut changes = Vec::new();
    if before.is_none() || !root.contains_key("hooks") {
        return Ok(Plan {
            path: path.to_path_buf(),
            after: before.clone().unwrap_or_default(),
            before,
            changes,
        });
    }
    let hooks = hooks_object(path, &mut root)?;
    let events: Vec<String> = hooks.keys().cloned().collect();
    for event in events {
        let Some(groups) = hooks.get_mut(&event).and_then(Value::as_array_mut) else { continue };
        let mut removed = 0;
        for group in groups.iter_mut() {
            if let Some(list) = handlers(group) {
                let len = list.len();
                list.retain(|h| !h.get("command").and_then(Value::as_str).is_some_and(|c| is_ours(c, agent)));
                removed += len - list.len();
            }
        }
        if removed == 0 {
            continue;
        }
        changes.push(format!("removed {event}"));
        groups.retain(|g| g.get("hooks").and_then(Value::as_array).is_none_or(|l| !l.is_empty()));
        if groups.is_empty() {
            hooks.remove(&event);
        }
    }
    if hooks.is_empty() {
        root.remove("hooks");
    }
    let after = if changes.is_empty() { before.clone().unwrap_or_default() } else { render(&root) };
    Ok(Plan { path: path.to_path_buf(), before, after, changes })
}

/// Writes a plan: a backup of the file as it was (a new name each time, never overwritten),
/// then the new text through a temporary file in the same directory renamed over it, so the
/// agent never reads half a file. Returns the backup's path. A plan without changes writes
/// nothing.
///
/// # Errors
/// A directory or file that cannot be created or written.
pub fn apply(plan: &Plan) -> Result<Option<PathBuf>, InstallError> {
    if plan.changes.is_empty() {
        return Ok(None);
    }
    let io = |what: &str, path: &Path, e: std::io::Error| {
        InstallError(format!("cannot {what} {}: {e}", path.display()))
    };
    let dir = plan.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let name = plan
        .path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "settings.json".into());
    let backup = match &plan.before {
        Some(before) => Some(write_new(dir, &format!("{name}.ctxgate-backup"), before.as_bytes())?),
        None => None,
    };
    let temp = write_new(dir, &format!(".{name}.ctxgate-tmp"), plan.after.as_bytes())?;
    if let Err(e) = std::fs::rename(&temp, &plan.path) {
        let _ = std::fs::remove_file(&temp);
        return Err(io("replace", &plan.path, e));
    }
    Ok(backup)
}

/// Writes `bytes` to a file of `dir` named `stem-<seconds>[-n]` that did not exist, synced.
fn write_new(dir: &Path, stem: &str, bytes: &[u8]) -> Result<PathBuf, InstallError> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    for n in 0..1000u32 {
        let path = match n {
            0 => dir.join(format!("{stem}-{seconds}")),
            n => dir.join(format!("{stem}-{seconds}-{n}")),
        };
        let mut file = match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(InstallError(format!("cannot create {}: {e}", path.display()))),
        };
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| InstallError(format!("cannot write {}: {e}", path.display())))?;
        return Ok(path);
    }
    Err(InstallError(format!("cannot find a free name for {stem} in {}", dir.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ours_is_the_ctxgate_hook_of_the_agent() {
        assert!(is_ours("/usr/local/bin/ctxgate --db /x.redb hook claude-code", Agent::ClaudeCode));
        assert!(
            is_ours("'/opt/my tools/ctxgate' hook codex", Agent::Codex)
                || is_ours("ctxgate hook codex", Agent::Codex)
        );
        assert!(!is_ours("ctxgate hook codex", Agent::ClaudeCode));
        assert!(!is_ours("python3 hook claude-code", Agent::ClaudeCode));
        assert!(!is_ours("ctxgate import x", Agent::ClaudeCode));
    }

    /// Issue 50, item 10: the binary reached under another name (a copy, a link) is still
    /// ctxgate, by the shape of the command it writes.
    #[test]
    fn r50_ours_whatever_the_binary_is_called() {
        assert!(is_ours("/opt/tools/ctxg --db /home/me/index.redb hook codex", Agent::Codex));
        assert!(is_ours("'/opt/my tools/cg-dev' --db '/x y.redb' hook claude-code", Agent::ClaudeCode));
        assert!(!is_ours("/opt/tools/ctxg --db /x.redb hook codex", Agent::ClaudeCode));
        assert!(!is_ours("my-hook --db /x.redb import", Agent::Codex));
        assert!(
            !is_ours("other-tool hook codex --db /x.redb", Agent::Codex),
            "--db after the verb is not ours"
        );
    }
}
