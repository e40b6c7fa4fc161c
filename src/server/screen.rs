//! Screening of incoming lines before rmcp reads them, so that every request gets an answer.
//!
//! rmcp's stdio transport drops, without a reply, a line longer than its limit and a line that
//! is not valid JSON (for instance a string with a lone surrogate escape such as `"\ud800"`, or
//! arrays nested deeper than serde_json's recursion limit): it has no id to answer to. The
//! client then waits forever for that request. [`Screened`] sits between stdin and rmcp: it
//! passes every acceptable line through unchanged, and replaces a line that is over
//! [`MAX_MESSAGE_BYTES`] or not valid JSON, when the id of its request can be read from its
//! beginning, with a request for [`REJECTED_METHOD`] carrying that id and the reason, which the
//! server answers with a JSON-RPC error. A line whose id cannot be found (a notification, a
//! response, or garbage) is passed on for rmcp to drop as before. A request whose `jsonrpc` is
//! not `"2.0"` is replaced the same way, since rmcp would answer it with `"id": null`.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, ReadBuf};

/// Largest accepted message (one JSON-RPC line, its newline included): 16 MiB, rmcp's own
/// limit. Each text of a turn or a query is also limited to [`crate::MAX_TEXT_BYTES`]
/// (8 MiB) by the library, so the two sides of a turn together must fit in one message.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// The method of the stand-in request for a rejected line; `params` is
/// `{"code": <JSON-RPC error code>, "message": <why>}`.
pub const REJECTED_METHOD: &str = "ctxgate/rejected";

/// JSON-RPC error code of a line that is too long.
pub const CODE_TOO_LARGE: i32 = -32600;
/// JSON-RPC error code of a request that is not a JSON-RPC 2.0 request.
pub const CODE_INVALID_REQUEST: i32 = -32600;
/// JSON-RPC error code of a line that is not valid JSON.
pub const CODE_PARSE_ERROR: i32 = -32700;

/// How much of an oversized line is kept to find its id.
const HEAD_BYTES: usize = 4096;
/// Buffers above this are released after use, so one large message does not stay resident.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// An [`AsyncRead`] of newline-delimited JSON-RPC messages that screens each line (see the
/// module documentation).
pub struct Screened<R> {
    inner: R,
    limit: usize,
    /// The current line so far (only its first [`HEAD_BYTES`] once it is over the limit).
    line: Vec<u8>,
    /// Bytes of the current line seen, kept or not.
    line_len: usize,
    /// Screened bytes waiting to be read, from `out_pos` on.
    out: Vec<u8>,
    out_pos: usize,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<R: AsyncRead + Unpin> Screened<R> {
    /// Screens `inner` with [`MAX_MESSAGE_BYTES`] as the limit.
    pub fn new(inner: R) -> Self {
        Self::with_limit(inner, MAX_MESSAGE_BYTES)
    }

    /// Screens `inner`, rejecting lines of more than `limit` bytes (newline included).
    pub fn with_limit(inner: R, limit: usize) -> Self {
        Screened {
            inner,
            limit,
            line: Vec::new(),
            line_len: 0,
            out: Vec::new(),
            out_pos: 0,
            chunk: vec![0; 64 * 1024].into_boxed_slice(),
            eof: false,
        }
    }

    /// Takes in `n` bytes of `self.chunk`.
    fn take_in(&mut self, n: usize) {
        let chunk = std::mem::take(&mut self.chunk);
        let mut rest = &chunk[..n];
        while !rest.is_empty() {
            let newline = rest.iter().position(|&b| b == b'\n');
            let part = &rest[..newline.map_or(rest.len(), |i| i + 1)];
            rest = &rest[part.len()..];
            self.line_len += part.len();
            if self.line_len <= self.limit {
                self.line.extend_from_slice(part);
            } else {
                let room = HEAD_BYTES.saturating_sub(self.line.len()).min(part.len());
                self.line.extend_from_slice(&part[..room]);
            }
            if newline.is_some() {
                self.finish_line();
            }
        }
        self.chunk = chunk;
    }

    /// Screens the complete current line into `out`.
    fn finish_line(&mut self) {
        if self.line_len > self.limit {
            let reason = format!(
                "the message is {} bytes, over the server's limit of {} bytes per message \
                 (each text is limited to {} bytes)",
                self.line_len,
                self.limit,
                crate::MAX_TEXT_BYTES
            );
            // The line is gone: answer it if it can be answered, else drop it as rmcp would.
            if let Some(id) = request_id(&self.line) {
                self.out.extend_from_slice(&rejected(&id, CODE_TOO_LARGE, &reason));
            } else {
                log::warn!("dropped a message without an id: {reason}");
            }
        } else {
            let invalid = check_json(&self.line).err().and_then(|e| Some((e, request_id(&self.line)?)));
            match invalid {
                Some((error, id)) => {
                    let reason = format!("the message is not valid JSON: {error}");
                    self.out.extend_from_slice(&rejected(&id, CODE_PARSE_ERROR, &reason));
                }
                None => match wrong_version(&self.line) {
                    Some((id, reason)) => {
                        self.out.extend_from_slice(&rejected(&id, CODE_INVALID_REQUEST, &reason))
                    }
                    None => self.out.extend_from_slice(&self.line),
                },
            }
        }
        self.line.clear();
        if self.line.capacity() > KEEP_CAPACITY {
            self.line = Vec::new();
        }
        self.line_len = 0;
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Screened<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        loop {
            if this.out_pos < this.out.len() {
                let n = buf.remaining().min(this.out.len() - this.out_pos);
                buf.put_slice(&this.out[this.out_pos..this.out_pos + n]);
                this.out_pos += n;
                if this.out_pos == this.out.len() {
                    this.out.clear();
                    this.out_pos = 0;
                    if this.out.capacity() > KEEP_CAPACITY {
                        this.out = Vec::new();
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // An unterminated last line is incomplete: rmcp would drop it too.
                return Poll::Ready(Ok(()));
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            match Pin::new(&mut this.inner).poll_read(cx, &mut chunk) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {
                    let n = chunk.filled().len();
                    if n == 0 {
                        this.eof = true;
                    } else {
                        this.take_in(n);
                    }
                }
            }
        }
    }
}

/// The stand-in request line for a rejected line with request id `id` (JSON text).
fn rejected(id: &str, code: i32, message: &str) -> Vec<u8> {
    let params = serde_json::json!({ "code": code, "message": message });
    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"{REJECTED_METHOD}\",\"params\":{params}}}\n")
        .into_bytes()
}

/// Checks that `line` is one valid JSON value (strings decoded, so lone surrogates are caught,
/// and serde_json's recursion limit applied) without building it.
fn check_json(line: &[u8]) -> Result<(), serde_json::Error> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    serde_json::from_slice::<Valid>(line).map(|_| ())
}

/// The id of the request at the start of `line`, as JSON text: the value of the first `"id"`
/// key before any `"params"` key (where rmcp and other SDKs put it), a number or a string, if
/// the line has a `"method"` (a request, not a response).
fn request_id(line: &[u8]) -> Option<String> {
    let find = |needle: &[u8]| line.windows(needle.len()).position(|w| w == needle);
    find(b"\"method\"")?;
    let params = find(b"\"params\"").unwrap_or(line.len());
    let mut from = 0;
    while let Some(at) = line[from..params].windows(4).position(|w| w == b"\"id\"").map(|i| i + from) {
        from = at + 4;
        let before = line[..at].iter().rev().find(|b| !b.is_ascii_whitespace());
        if !matches!(before, Some(b'{' | b',')) {
            continue;
        }
        let rest = &line[at + 4..];
        let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
        if rest[colon] != b':' {
            continue;
        }
        let value =
            serde_json::Deserializer::from_slice(&rest[colon + 1..]).into_iter::<serde_json::Value>().next();
        return match value {
            Some(Ok(id @ (serde_json::Value::Number(_) | serde_json::Value::String(_)))) => {
                Some(id.to_string())
            }
            _ => None,
        };
    }
    None
}

/// The id of a request (valid JSON) whose `jsonrpc` member is not `"2.0"`, and why it is refused.
/// rmcp cannot read such a line as a request and answers it with `"id": null`, which no client
/// matches to its request: it waits forever.
fn wrong_version(line: &[u8]) -> Option<(String, String)> {
    /// The members that make a request; the others are skipped unread.
    #[derive(serde::Deserialize)]
    struct Envelope {
        jsonrpc: Option<serde_json::Value>,
    }
    let id = request_id(line)?;
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    let found = match envelope.jsonrpc {
        Some(serde_json::Value::String(version)) if version == "2.0" => return None,
        Some(other) => format!("has \"jsonrpc\": {other}"),
        None => "has no \"jsonrpc\" member".to_string(),
    };
    Some((
        id,
        format!(
            "not a JSON-RPC 2.0 request: it {found}; this server speaks JSON-RPC 2.0 (\"jsonrpc\": \"2.0\")"
        ),
    ))
}

/// Any JSON value, checked and dropped.
struct Valid;

impl<'de> Deserialize<'de> for Valid {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValidVisitor)
    }
}

struct ValidVisitor;

impl<'de> Visitor<'de> for ValidVisitor {
    type Value = Valid;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_unit<E>(self) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Valid, A::Error> {
        while seq.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Valid, A::Error> {
        while map.next_entry::<Valid, Valid>()?.is_some() {}
        Ok(Valid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn screen(input: &[u8], limit: usize) -> String {
        let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        runtime.block_on(async {
            let mut out = String::new();
            Screened::with_limit(input, limit).read_to_string(&mut out).await.expect("read");
            out
        })
    }

    #[test]
    fn valid_lines_pass_unchanged() {
        let input =
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n\n{\"a\":[1,2.5,null,true,\"\\u00e9\"]}\r\n";
        assert_eq!(screen(input.as_bytes(), 1000), input);
    }

    #[test]
    fn an_invalid_request_becomes_a_rejection_with_its_id() {
        let input = "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"method\":\"tools/call\",\"params\":{\"q\":\"\\ud800\"}}\n";
        let out: serde_json::Value = serde_json::from_str(&screen(input.as_bytes(), 1000)).expect("json");
        assert_eq!(out["id"], "a\"b");
        assert_eq!(out["method"], REJECTED_METHOD);
        assert_eq!(out["params"]["code"], CODE_PARSE_ERROR);
        assert!(out["params"]["message"].as_str().is_some_and(|m| m.contains("not valid JSON")), "{out}");
    }

    #[test]
    fn an_oversized_request_becomes_a_rejection_and_the_next_line_passes() {
        let big = format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{{\"q\":\"{}\"}}}}\n",
            "x".repeat(300_000)
        );
        let next = "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}\n";
        let out = screen(format!("{big}{next}").as_bytes(), 100_000);
        let mut lines = out.lines();
        let first: serde_json::Value = serde_json::from_str(lines.next().expect("line")).expect("json");
        assert_eq!(first["id"], 7);
        assert_eq!(first["params"]["code"], CODE_TOO_LARGE);
        assert_eq!(lines.next(), Some(next.trim_end()));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn a_request_of_another_version_becomes_a_rejection_with_its_id() {
        for (input, found) in [
            ("{\"jsonrpc\":\"1.0\",\"id\":3,\"method\":\"tools/list\"}\n", "\"jsonrpc\": \"1.0\""),
            ("{\"id\":\"q\",\"method\":\"ping\",\"params\":{}}\n", "no \"jsonrpc\""),
        ] {
            let out: serde_json::Value = serde_json::from_str(&screen(input.as_bytes(), 1000)).expect("json");
            assert_eq!(out["method"], REJECTED_METHOD, "{input}");
            assert_eq!(out["params"]["code"], CODE_INVALID_REQUEST, "{input}");
            assert!(out["params"]["message"].as_str().is_some_and(|m| m.contains(found)), "{out}");
        }
        // A notification of another version has no id to answer: rmcp drops it as before.
        let notification = "{\"jsonrpc\":\"1.0\",\"method\":\"notifications/x\"}\n";
        assert_eq!(screen(notification.as_bytes(), 1000), notification);
    }

    #[test]
    fn lines_without_an_id_pass_for_rmcp_to_drop() {
        let input =
            "not json\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":[\"\\ud800\"]}\n";
        assert_eq!(screen(input.as_bytes(), 1000), input);
        assert_eq!(request_id(b"{\"params\":{\"id\":3},\"id\":4,\"method\":\"m\"}"), None);
        assert_eq!(request_id(b"{\"x\":\"\\\"id\\\": 9\",\"id\" : 4,\"method\":\"m\"}"), Some("4".into()));
    }
}
