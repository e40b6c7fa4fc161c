//! Claude Code session files written as Claude Code writes them, and `ctxgate hook claude-code`
//! run on an event: what the hook measurements (`hook_bench`, `compare --layout team`) drive.

use anyhow::{Context, Result, bail};
use serde_json::json;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::{Command, Stdio};

/// A Claude Code session file being appended to.
pub struct Transcript {
    file: BufWriter<std::fs::File>,
    records: u64,
    cwd: String,
    session_id: String,
}

impl Transcript {
    /// A new, empty session file at `path` of the session `session_id` run in `cwd`.
    pub fn create(path: &Path, cwd: &str, session_id: &str) -> Result<Transcript> {
        let file =
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        Ok(Transcript {
            file: BufWriter::new(file),
            records: 0,
            cwd: cwd.to_string(),
            session_id: session_id.to_string(),
        })
    }

    /// A user prompt (`role` "user") or an assistant reply.
    pub fn record(&mut self, role: &str, text: &str) -> Result<()> {
        let message = match role {
            "user" => json!({ "role": "user", "content": text }),
            _ => {
                json!({ "role": "assistant", "type": "message", "content": [{ "type": "text", "text": text }] })
            }
        };
        self.write(role, message)
    }

    /// A tool call and its result (a `Bash` run printing `text`).
    pub fn tool(&mut self, text: &str) -> Result<()> {
        let id = format!("toolu_{:08}", self.records);
        let call = json!({ "role": "assistant", "type": "message",
            "content": [{ "type": "tool_use", "id": id, "name": "Bash", "input": { "command": "cargo test" } }] });
        self.write("assistant", call)?;
        let result = json!({ "role": "user",
            "content": [{ "type": "tool_result", "tool_use_id": id, "content": text, "is_error": false }] });
        self.write("user", result)
    }

    /// Writes what is buffered, so a hook reads every record so far.
    pub fn flush(&mut self) -> Result<()> {
        Ok(self.file.flush()?)
    }

    fn write(&mut self, role: &str, message: serde_json::Value) -> Result<()> {
        self.records += 1;
        let n = self.records;
        let line = json!({
            "isSidechain": false, "userType": "external", "cwd": self.cwd, "sessionId": self.session_id,
            "version": "1.0.83", "type": role, "uuid": format!("00000000-0000-4000-8000-{n:012}"),
            // Each record the child of the one before, as Claude Code links them.
            "parentUuid": (n > 1).then(|| format!("00000000-0000-4000-8000-{:012}", n - 1)),
            "timestamp": format!("2025-06-14T{:02}:{:02}:{:02}.000Z", (n / 3600) % 24, (n / 60) % 60, n % 60),
            "message": message,
        });
        writeln!(self.file, "{line}")?;
        Ok(())
    }
}

/// A hook event as Claude Code sends it (the recorded shape of `fixtures/hooks`).
pub fn event(name: &str, session_id: &str, transcript: &Path, cwd: &str, prompt: Option<&str>) -> String {
    let mut e = json!({ "session_id": session_id, "transcript_path": transcript, "cwd": cwd,
        "permission_mode": "default", "hook_event_name": name });
    if let Some(prompt) = prompt {
        e["prompt"] = json!(prompt);
    }
    e.to_string()
}

/// Runs `ctxgate --db DB hook claude-code` with `event` on stdin; fails on a non-zero exit or
/// anything on stderr (the hook reports its problems there and gives no context). Returns
/// what it printed.
pub fn run_hook(ctxgate: &Path, db: &Path, tokenizer: Option<&str>, event: &str) -> Result<String> {
    let mut child = Command::new(ctxgate)
        .arg("--db")
        .arg(db)
        .args(tokenizer.map(|t| ["--tokenizer", t]).into_iter().flatten())
        .args(["hook", "claude-code", "--deadline-ms", "10000"])
        .env_remove("CTXGATE_HOOK_DEADLINE_MS")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", ctxgate.display()))?;
    child.stdin.take().context("no stdin")?.write_all(event.as_bytes())?;
    let output = child.wait_with_output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() || !stderr.trim().is_empty() {
        bail!("the hook failed ({}): {stderr}", output.status);
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}
