//! Helpers for tests of `ctxgate serve`: the real binary driven by rmcp's client, the same
//! binary driven by raw JSON-RPC lines over its stdio (for messages the SDK cannot produce),
//! and a small JSON Schema check for structured results.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Result of an async test: its errors cross tasks.
pub type McpResult<T = ()> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// An rmcp client connected to a `ctxgate serve` child.
pub type Client = RunningService<RoleClient, ()>;

const BIN: &str = env!("CARGO_BIN_EXE_ctxgate");

/// `ctxgate serve --db <db> --busy-timeout 20 -q` with rmcp's client on its stdio.
pub async fn start(db: &Path) -> McpResult<Client> {
    let mut command = tokio::process::Command::new(BIN);
    command.env_remove("CTXGATE_DB").env_remove("CTXGATE_LOG").env_remove("RUST_LOG");
    command.arg("serve").arg("--db").arg(db).arg("--busy-timeout").arg("20").arg("-q");
    Ok(().serve(TokioChildProcess::new(command)?).await?)
}

/// `value` as tool arguments (an object; anything else is no arguments).
pub fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Calls `tool`; the result may be a tool error.
pub async fn call(client: &Client, tool: &str, arguments: Value) -> McpResult<CallToolResult> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args(arguments));
    Ok(client.call_tool(params).await?)
}

/// The structured result of a call that must succeed.
pub async fn ok(client: &Client, tool: &str, arguments: Value) -> McpResult<Value> {
    let result = call(client, tool, arguments).await?;
    if result.is_error == Some(true) {
        return Err(format!("{tool} failed: {:?}", result.structured_content).into());
    }
    result.structured_content.ok_or_else(|| format!("{tool}: no structured content").into())
}

/// The error kind and message of a call that must be a tool error.
pub async fn tool_error(client: &Client, tool: &str, arguments: Value) -> McpResult<(String, String)> {
    let result = call(client, tool, arguments).await?;
    if result.is_error != Some(true) {
        return Err(format!("{tool} should have failed: {:?}", result.structured_content).into());
    }
    // The CLI's JSON error document, as text: no structured content, which clients would
    // validate against the output schema of results.
    if result.structured_content.is_some() {
        return Err(format!("{tool}: an error result has structured content: {result:?}").into());
    }
    let text = result.content.first().and_then(|c| c.as_text()).ok_or("no error text")?;
    let content: Value = serde_json::from_str(&text.text)?;
    let kind = content["error"]["kind"].as_str().ok_or("no error kind")?.to_string();
    let message = content["error"]["message"].as_str().unwrap_or_default().to_string();
    if message.is_empty() {
        return Err(format!("an error needs a message: {content}").into());
    }
    Ok((kind, message))
}

/// `ctxgate serve` driven by raw JSON-RPC lines: a reader thread hands over its stdout lines.
pub struct RawServer {
    pub child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
}

impl RawServer {
    /// Starts `ctxgate serve` on `db` and completes the MCP handshake.
    pub fn start(db: &Path) -> McpResult<RawServer> {
        RawServer::start_with(db, &["-q"], Stdio::null())
    }

    /// [`RawServer::start`] with the server's `flags` (logging) and its stderr sent to `stderr`.
    pub fn start_with(db: &Path, flags: &[&str], stderr: Stdio) -> McpResult<RawServer> {
        let mut child = Command::new(BIN)
            .env_remove("CTXGATE_DB")
            .env_remove("CTXGATE_LOG")
            .env_remove("RUST_LOG")
            .arg("serve")
            .arg("--db")
            .arg(db)
            .args(["--busy-timeout", "20"])
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (sender, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = RawServer { child, stdin, lines };
        server.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "0"}
        }}))?;
        let init = server.response(0, Duration::from_secs(30))?;
        if init.get("result").is_none() {
            return Err(format!("initialize failed: {init}").into());
        }
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(server)
    }

    /// Writes `message` as one line.
    pub fn send(&mut self, message: &Value) -> McpResult {
        self.send_raw(message.to_string().as_bytes())
    }

    /// Writes `bytes` and a newline, as they are.
    pub fn send_raw(&mut self, bytes: &[u8]) -> McpResult {
        self.stdin.write_all(bytes)?;
        self.stdin.write_all(b"\n")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// A `tools/call` request line for `tool` with `arguments` as raw JSON text.
    pub fn call_raw(&mut self, id: u64, tool: &str, arguments: &str) -> McpResult {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        );
        self.send_raw(line.as_bytes())
    }

    /// The next message from the server, or `None` after `timeout` or at its end.
    pub fn next_message(&mut self, timeout: Duration) -> McpResult<Option<Value>> {
        match self.lines.recv_timeout(timeout) {
            Ok(line) => Ok(Some(serde_json::from_str(&line)?)),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => Ok(None),
        }
    }

    /// The response to request `id` (other messages are skipped); an error if none comes
    /// within `timeout`.
    pub fn response(&mut self, id: u64, timeout: Duration) -> McpResult<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.next_message(left)? {
                Some(message) if message["id"] == json!(id) => return Ok(message),
                Some(_) => {}
                None => return Err(format!("no response to request {id} within {timeout:?}").into()),
            }
        }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Checks `value` against `schema` (resolving `$ref`s into `root`'s `$defs`): types, required
/// properties, no property the schema does not list, array items, enums and constants,
/// `oneOf`/`anyOf`. Enough for the documents ctxgate returns. The error names the path.
/// Fails if `schema` uses what strict validators (Ajv, as the MCP Inspector runs it) reject or
/// warn about: a `format` JSON Schema does not define, or a list of types.
pub fn assert_portable(schema: &Value, at: &str) -> Result<(), String> {
    const STANDARD: [&str; 5] = ["date-time", "date", "uri", "json-pointer", "regex"];
    match schema {
        Value::Object(object) => {
            if let Some(format) = object.get("format").and_then(Value::as_str)
                && !STANDARD.contains(&format)
            {
                return Err(format!("{at}: non-standard format {format:?}"));
            }
            if object.get("type").is_some_and(Value::is_array) {
                return Err(format!("{at}: a list of types: {schema}"));
            }
            object.iter().try_for_each(|(key, value)| assert_portable(value, &format!("{at}/{key}")))
        }
        Value::Array(items) => items.iter().try_for_each(|item| assert_portable(item, at)),
        _ => Ok(()),
    }
}

pub fn check_schema(value: &Value, schema: &Value, root: &Value, at: &str) -> Result<(), String> {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name =
            reference.strip_prefix("#/$defs/").ok_or_else(|| format!("{at}: unknown $ref {reference}"))?;
        let target =
            root.get("$defs").and_then(|d| d.get(name)).ok_or_else(|| format!("{at}: no $defs/{name}"))?;
        return check_schema(value, target, root, at);
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array)
            && !branches.iter().any(|b| check_schema(value, b, root, at).is_ok())
        {
            return Err(format!("{at}: {value} matches no branch of {key}"));
        }
    }
    if let Some(constant) = schema.get("const")
        && value != constant
    {
        return Err(format!("{at}: {value} is not {constant}"));
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        return Err(format!("{at}: {value} is not one of {options:?}"));
    }
    if let Some(types) = schema.get("type") {
        let types: Vec<&str> = match types {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => return Err(format!("{at}: bad type {types}")),
        };
        let fits = |t: &str| match t {
            "object" => value.is_object(),
            "array" => value.is_array(),
            "string" => value.is_string(),
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "null" => value.is_null(),
            _ => false,
        };
        if !types.iter().any(|t| fits(t)) {
            return Err(format!("{at}: {value} is not of type {types:?}"));
        }
    }
    if let (Some(object), Some(properties)) =
        (value.as_object(), schema.get("properties").and_then(Value::as_object))
    {
        for required in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
            let name = required.as_str().unwrap_or_default();
            if !object.contains_key(name) {
                return Err(format!("{at}: required property {name:?} missing"));
            }
        }
        for (name, item) in object {
            let property =
                properties.get(name).ok_or_else(|| format!("{at}: property {name:?} not in the schema"))?;
            check_schema(item, property, root, &format!("{at}/{name}"))?;
        }
    }
    if let (Some(items), Some(schema)) = (value.as_array(), schema.get("items")) {
        for (i, item) in items.iter().enumerate() {
            check_schema(item, schema, root, &format!("{at}/{i}"))?;
        }
    }
    Ok(())
}
