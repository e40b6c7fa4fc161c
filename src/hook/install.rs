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

/// Where ctxgate's handler of one event sits in a settings file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The event.
    pub event: &'static str,
    /// Its group's index in the event's list, and the handler's in the group (Codex keys a
    /// hook's trust by both).
    pub group: usize,
    /// The handler's index in its group.
    pub handler: usize,
    /// The command.
    pub command: String,
}

/// ctxgate's handlers for `agent` in the file at `path`, per event of [`events`]: `None` for
/// an event without one (a file that does not exist has none).
///
/// # Errors
/// As [`plan_install`].
pub fn find(agent: Agent, path: &Path) -> Result<Vec<(&'static str, Option<Found>)>, InstallError> {
    let (_, mut root) = read(path)?;
    let mut out = Vec::new();
    let hooks = root.get_mut("hooks").and_then(Value::as_object_mut);
    for &(event, _) in events(agent) {
        let groups = hooks.as_ref().and_then(|h| h.get(event)).and_then(Value::as_array);
        let found = groups.into_iter().flatten().enumerate().find_map(|(g, group)| {
            let list = group.get("hooks").and_then(Value::as_array)?;
            list.iter().enumerate().find_map(|(h, handler)| {
                let command = handler.get("command").and_then(Value::as_str)?;
                is_ours(command, agent).then(|| Found {
                    event,
                    group: g,
                    handler: h,
                    command: command.to_string(),
                })
            })
        });
        out.push((event, found));
    }
    Ok(out)
}

/// What Codex's config says of one hook's trust.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// No trust recorded: Codex shows "Hooks need review" and runs the hook only once the user
    /// trusts it (`codex exec` skips it without a word).
    Untrusted,
    /// A `trusted_hash` is recorded. Whether it is the hash of the hook as it is now (a changed
    /// command needs review again) cannot be told here: Codex hashes its own normalized form.
    TrustedOnce,
    /// The user turned the hook off (`enabled = false`).
    Disabled,
}

/// The key Codex keeps a hook's state under in `config.toml` (`[hooks.state."KEY"]`): the
/// hooks file's absolute path, the event in snake case, the group's and the handler's index
/// (openai/codex `codex-rs/hooks/src/lib.rs`, `hook_key`).
pub fn codex_state_key(hooks_file: &Path, found: &Found) -> String {
    let mut event = String::new();
    for (i, c) in found.event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            event.push('_');
        }
        event.push(c.to_ascii_lowercase());
    }
    format!("{}:{event}:{}:{}", hooks_file.display(), found.group, found.handler)
}

/// What `config_toml` (Codex's `config.toml`) records of the hook whose state key is `key`:
/// a `[hooks.state."KEY"]` table, or `"KEY" = { … }` in a `[hooks.state]` table. A line-based
/// reading of the two forms Codex writes, not a TOML parser.
pub fn codex_trust(config_toml: &str, key: &str) -> Trust {
    let quoted = format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""));
    let (mut table, mut in_state, mut hash, mut disabled) = (false, false, false, false);
    for line in config_toml.lines().map(str::trim) {
        if line.starts_with('[') {
            let header = line.trim_start_matches('[').trim_end_matches(']').trim();
            table =
                header.strip_prefix("hooks.state.").is_some_and(|k| k.trim() == quoted || k.trim() == key);
            in_state = header == "hooks.state";
            continue;
        }
        let field = |line: &str, name: &str| line.split_once('=').is_some_and(|(k, _)| k.trim() == name);
        if table {
            hash |= field(line, "trusted_hash");
            disabled |=
                field(line, "enabled") && line.split_once('=').is_some_and(|(_, v)| v.trim() == "false");
        } else if in_state && line.starts_with(&quoted) {
            hash |= line.contains("trusted_hash");
            disabled |= line.replace(' ', "").contains("enabled=false");
        }
    }
    match (disabled, hash) {
        (true, _) => Trust::Disabled,
        (false, true) => Trust::TrustedOnce,
        (false, false) => Trust::Untrusted,
    }
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

    /// Issue 50, item 5: the trust Codex records in config.toml, in both of its forms.
    #[test]
    fn r50_codex_trust_of_a_hook() {
        let found = Found { event: "UserPromptSubmit", group: 1, handler: 0, command: "x".into() };
        let key = codex_state_key(Path::new("/home/me/.codex/hooks.json"), &found);
        assert_eq!(key, "/home/me/.codex/hooks.json:user_prompt_submit:1:0");
        let table = format!(
            "model = \"gpt-5\"\n\n[hooks.state.\"{key}\"]\ntrusted_hash = \"sha256:ab\"\n\n[other]\ntrusted_hash = \"x\"\n"
        );
        assert_eq!(codex_trust(&table, &key), Trust::TrustedOnce);
        let inline = format!("[hooks.state]\n\"{key}\" = {{ trusted_hash = \"sha256:ab\" }}\n");
        assert_eq!(codex_trust(&inline, &key), Trust::TrustedOnce);
        let off = format!("[hooks.state.\"{key}\"]\nenabled = false\ntrusted_hash = \"sha256:ab\"\n");
        assert_eq!(codex_trust(&off, &key), Trust::Disabled);
        let other = "[hooks.state.\"/home/me/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:ab\"\n";
        assert_eq!(codex_trust(other, &key), Trust::Untrusted);
        assert_eq!(codex_trust("", &key), Trust::Untrusted);
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
