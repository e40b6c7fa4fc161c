//! The real agents for the end-to-end hook tests (tests/real_agents.rs): Claude Code and Codex
//! installed from npm at pinned versions into the target directory, a loopback stand-in for
//! their model APIs that records every request, and a runner that bounds each process in time
//! and kills what it started.

use serde_json::{Value, json};
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Claude Code as the issue tried it (issue 50).
pub const CLAUDE_CODE: Package =
    Package { name: "@anthropic-ai/claude-code", version: "2.1.197", bin: "claude" };
/// Codex CLI as the issue tried it (issue 50).
pub const CODEX: Package = Package { name: "@openai/codex", version: "0.171.0", bin: "codex" };

/// The longest an agent's run may take before the test kills it.
pub const AGENT_LIMIT: Duration = Duration::from_secs(120);

/// An npm package with the program it installs.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    pub name: &'static str,
    pub version: &'static str,
    pub bin: &'static str,
}

/// Why a test cannot run here: it prints this and passes, unless `CTXGATE_REQUIRE_AGENTS` is
/// set (a machine that must run them), where it fails.
#[derive(Debug)]
pub struct Unavailable(pub String);

/// The package's program, installed on first use into the target directory with the
/// machine's npm (`npm install` of the pinned version); later runs reuse it. Built in a unique
/// directory and renamed into place, so a run that stops half way leaves nothing half made.
pub fn install(package: Package) -> Result<PathBuf, Unavailable> {
    let slug = format!("{}@{}", package.name, package.version).replace(['/', '@'], "-");
    let home = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("npm{slug}"));
    let bin = home.join("node_modules").join(".bin").join(package.bin);
    if !bin.exists() {
        let staging = tempfile::Builder::new()
            .prefix("npm-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .map_err(|e| Unavailable(format!("cannot make a directory for npm: {e}")))?;
        let spec = format!("{}@{}", package.name, package.version);
        let mut npm = Command::new("npm");
        // A registry out of reach fails in about a minute, not after npm's default retries.
        npm.args(["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error"])
            .args(["--fetch-timeout=30000", "--fetch-retries=1", "--prefix"])
            .arg(staging.path())
            .arg(&spec);
        let output = run(&mut npm, Duration::from_secs(600))
            .map_err(|e| Unavailable(format!("cannot run npm to install {spec} ({e})")))?;
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            return Err(Unavailable(format!("npm cannot install {spec}: {}", stderr.trim())));
        }
        // Another run may have finished first: either copy will do.
        if std::fs::rename(staging.path(), &home).is_err() && !bin.exists() {
            return Err(Unavailable(format!("cannot move the npm install into {}", home.display())));
        }
    }
    let output = run(Command::new(&bin).arg("--version"), Duration::from_secs(60))
        .map_err(|e| Unavailable(format!("{} does not start: {e}", bin.display())))?;
    let version = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !version.contains(package.version) {
        return Err(Unavailable(format!(
            "{} --version says {:?} ({}), expected {}",
            bin.display(),
            version.trim(),
            output.status,
            package.version
        )));
    }
    Ok(bin)
}

/// Runs `command` with stdin closed, in a process group of its own, for at most `limit`; then
/// kills the group, so nothing it started outlives it (on time or not).
///
/// # Errors
/// The program cannot start, or it ran past `limit` (the message has its stderr so far).
pub fn run(command: &mut Command, limit: Duration) -> Result<Output, String> {
    run_with_input(command, None, limit)
}

/// [`run`] with `input` on the program's stdin (then closed).
pub fn run_with_input(
    command: &mut Command,
    input: Option<Vec<u8>>,
    limit: Duration,
) -> Result<Output, String> {
    let mut child = command
        .stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start {:?}: {e}", command.get_program()))?;
    let group = child.id() as libc::pid_t;
    let kill_group = || {
        // SAFETY: kill(2) with the negated id of the group the child leads; no memory is
        // touched. A group already gone is ESRCH, which is fine.
        unsafe { libc::kill(-group, libc::SIGKILL) };
    };
    let reader = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
        std::thread::spawn(move || stdin.write_all(&input));
    }
    let stdout = child.stdout.take().map(|p| reader(Box::new(p)));
    let stderr = child.stderr.take().map(|p| reader(Box::new(p)));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) | Err(_) => break None,
        }
    };
    kill_group();
    let status = match status {
        Some(status) => status,
        None => child.wait().map_err(|e| format!("cannot wait for the child: {e}"))?,
    };
    let collect =
        |h: Option<std::thread::JoinHandle<Vec<u8>>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
    let output = Output { status, stdout: collect(stdout), stderr: collect(stderr) };
    if Instant::now() >= deadline {
        return Err(format!(
            "{:?} ran past {limit:?} and was killed; stderr:\n{}",
            command.get_program(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(output)
}

/// The model API a stand-in speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Anthropic's Messages API (`POST /v1/messages`, streamed as server-sent events).
    AnthropicMessages,
    /// OpenAI's Responses API (`POST /v1/responses`, streamed as server-sent events).
    OpenAiResponses,
}

/// What every stand-in answers.
pub const CANNED_REPLY: &str = "Canned reply from the loopback stand-in.";

/// A request the stand-in received.
#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub body: Value,
}

impl Request {
    /// The body as the JSON text it was sent as (for counting what it contains).
    pub fn text(&self) -> String {
        self.body.to_string()
    }
}

/// A model API on 127.0.0.1 that records every request body and answers [`CANNED_REPLY`]
/// (one request per connection). Stops when dropped.
pub struct Standin {
    pub base_url: String,
    requests: Arc<Mutex<Vec<Request>>>,
    stop: Arc<AtomicBool>,
    port: u16,
}

impl Standin {
    /// Starts a stand-in for `api` on a free loopback port.
    pub fn start(api: Api) -> std::io::Result<Standin> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (log, stopped) = (Arc::clone(&requests), Arc::clone(&stop));
        let replies = std::sync::atomic::AtomicU64::new(0);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let log = Arc::clone(&log);
                // Every reply its own id: Claude Code groups a conversation by them (a
                // compaction needs two groups or more).
                let id = replies.fetch_add(1, Ordering::SeqCst);
                std::thread::spawn(move || {
                    let _ = serve(api, stream, &log, id);
                });
            }
        });
        Ok(Standin { base_url: format!("http://127.0.0.1:{port}"), requests, stop, port })
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Drop for Standin {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(api: Api, stream: TcpStream, log: &Mutex<Vec<Request>>, id: u64) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) =
        (parts.next().unwrap_or_default().to_string(), parts.next().unwrap_or_default().to_string());
    let (mut length, mut chunked) = (0usize, false);
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 || line.trim().is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let body = if chunked { read_chunked(&mut reader)? } else { read_exact(&mut reader, length)? };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Ok(mut log) = log.lock() {
        log.push(Request { path: path.clone(), body: body.clone() });
    }
    let (status, kind, answer) = answer(api, &method, &path, &body, id);
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        answer.len()
    )?;
    stream.write_all(answer.as_bytes())?;
    stream.flush()
}

fn read_exact(reader: &mut impl std::io::Read, length: usize) -> std::io::Result<Vec<u8>> {
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(body)
}

fn read_chunked(reader: &mut BufReader<TcpStream>) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let size = usize::from_str_radix(line.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        if size == 0 {
            reader.read_line(&mut line)?;
            return Ok(body);
        }
        body.extend(read_exact(reader, size)?);
        reader.read_line(&mut line)?;
    }
}

/// Server-sent events, each `event: NAME` with its JSON `data`.
fn events(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or_default()))
        .collect()
}

fn answer(api: Api, method: &str, path: &str, body: &Value, id: u64) -> (&'static str, &'static str, String) {
    const SSE: &str = "text/event-stream";
    const JSON: &str = "application/json";
    let not_found = ("404 Not Found", JSON, json!({"error": {"message": "not here"}}).to_string());
    if method != "POST" {
        return not_found;
    }
    match api {
        Api::AnthropicMessages if path.starts_with("/v1/messages/count_tokens") => {
            ("200 OK", JSON, json!({"input_tokens": 10}).to_string())
        }
        Api::AnthropicMessages if path.starts_with("/v1/messages") => {
            let model = body["model"].as_str().unwrap_or("claude");
            let usage = json!({"input_tokens": 10, "output_tokens": 5});
            let message = |content: Value, stop: Value| {
                json!({"id": format!("msg_standin_{id}"), "type": "message", "role": "assistant", "model": model,
                    "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
            };
            if body["stream"] != json!(true) {
                let content = json!([{"type": "text", "text": CANNED_REPLY}]);
                return ("200 OK", JSON, message(content, json!("end_turn")).to_string());
            }
            let stream = events(&[
                json!({"type": "message_start", "message": message(json!([]), Value::Null)}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": CANNED_REPLY}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ]);
            ("200 OK", SSE, stream)
        }
        Api::OpenAiResponses if path.ends_with("/responses") => {
            let item = json!({"type": "message", "role": "assistant", "id": format!("msg_standin_{id}"),
                "content": [{"type": "output_text", "text": CANNED_REPLY}]});
            let usage = json!({"input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
                "output_tokens_details": null, "total_tokens": 15});
            let stream = events(&[
                json!({"type": "response.created", "response": {"id": format!("resp_standin_{id}")}}),
                json!({"type": "response.output_item.done", "item": item}),
                json!({"type": "response.completed", "response": {"id": format!("resp_standin_{id}"), "usage": usage}}),
            ]);
            ("200 OK", SSE, stream)
        }
        _ => not_found,
    }
}

/// Codex's own view of the hooks it found for `cwd` and their trust, then the trust a user's
/// approval records (`[hooks.state."KEY"] trusted_hash = CURRENT_HASH` in `config.toml`), for
/// every hook whose command runs `hook codex`: asked of and written by `codex app-server`
/// (JSON-RPC `hooks/list`, then `config/batchWrite`), the calls Codex's own review screen
/// makes. Returns the keys trusted.
pub fn trust_codex_hooks(codex: &Path, env: &[(&str, &Path)], cwd: &Path) -> Result<Vec<String>, String> {
    let mut command = Command::new(codex);
    command
        .arg("app-server")
        .current_dir(cwd)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start codex app-server: {e}"))?;
    let group = child.id() as libc::pid_t;
    let result = (|| {
        let mut stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (send, lines) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut call = |id: u64, method: &str, params: Value| -> Result<Value, String> {
            let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(stdin, "{request}").map_err(|e| e.to_string())?;
            if method == "initialize" {
                writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "initialized"}))
                    .map_err(|e| e.to_string())?;
            }
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let line = lines.recv_timeout(left).map_err(|_| format!("no answer to {method} in time"))?;
                let Ok(message) = serde_json::from_str::<Value>(&line) else { continue };
                if message["id"] == json!(id) {
                    return match message.get("error") {
                        Some(error) => Err(format!("{method}: {error}")),
                        None => Ok(message["result"].clone()),
                    };
                }
            }
        };
        call(1, "initialize", json!({"clientInfo": {"name": "ctxgate-tests", "version": "1"}}))?;
        let list = call(2, "hooks/list", json!({"cwds": [cwd]}))?;
        let mut state = serde_json::Map::new();
        for hook in list["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|d| d["hooks"].as_array().into_iter().flatten())
        {
            let ours = hook["command"].as_str().is_some_and(|c| c.contains(" hook codex"));
            if ours && hook["trustStatus"] != "trusted" {
                let (Some(key), Some(hash)) = (hook["key"].as_str(), hook["currentHash"].as_str()) else {
                    continue;
                };
                state.insert(key.to_string(), json!({"trusted_hash": hash}));
            }
        }
        if !state.is_empty() {
            let edit = json!({"keyPath": "hooks.state", "value": state, "mergeStrategy": "upsert"});
            call(3, "config/batchWrite", json!({"edits": [edit]}))?;
        }
        Ok(state.keys().cloned().collect())
    })();
    // SAFETY: as in `run`: kill(2) of the group this function started.
    unsafe { libc::kill(-group, libc::SIGKILL) };
    let _ = child.wait();
    result
}
