//! `ctxgate serve`: a Model Context Protocol server over stdio.
//!
//! [`Core`] answers one tool call over the library API and returns the JSON document the CLI
//! prints with `--json` for the same request; [`McpServer`] lists the tools and routes MCP calls
//! to it (rmcp, the official Rust SDK); [`serve_stdio`] runs it on stdin/stdout.
//!
//! Sharing: every process shares the index file (docs/DESIGN.md §6.10). The server opens it for
//! each call and drops it before answering, and runs up to [`CONCURRENT_CALLS`] calls at once:
//! reads on read-only opens that never wait, writes waiting only for the write transaction in
//! progress (in any process) up to the busy timeout, then a tool error of kind `busy`, never a
//! hang. Nothing is kept between calls, so memory stays flat.

mod core;
mod mcp;
mod screen;

pub use self::core::{
    BuildPromptParams, Core, GateParams, ImportLogsParams, ListSessionsParams, RecordTurnParams,
    SCHEMA_VERSION, SelectContextParams, TOOL_NAMES, ToolError, ToolSpec, tools,
};
pub use self::mcp::{CONCURRENT_CALLS, McpServer, serve_stdio};
pub use self::screen::{MAX_MESSAGE_BYTES, REJECTED_METHOD, Screened};

/// Page cache the server opens the index with: small, since it is dropped after every call.
pub const SERVER_CACHE_BYTES: usize = 16 * 1024 * 1024;
