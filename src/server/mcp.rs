//! The MCP side of `ctxgate serve`: an rmcp [`ServerHandler`] over [`Core`], served on stdio.

use super::core::{Core, ToolError, tools};
use super::screen::{CODE_PARSE_ERROR, MAX_MESSAGE_BYTES, REJECTED_METHOD, Screened};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest, CustomResult,
    ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use std::sync::Arc;
use tokio::sync::Semaphore;

const INSTRUCTIONS: &str = "ctxgate keeps this conversation's history and hands you only the past \
turns a new message needs. For every user message: first call select_context (or build_prompt) \
with the session and the message, and use what it returns as context; after answering, call \
record_turn with the message and your answer. Use one session name per conversation or project. \
When the user refers to work from another conversation, search_history finds it across sessions.";

/// Tool calls one server runs at once: reads share the index, so a second agent's query (or a
/// client's pipelined one) need not wait for the first's whole call; a few threads suffice.
pub const CONCURRENT_CALLS: usize = 4;

/// The MCP server: tools listed from [`tools`], calls answered by [`Core`].
#[derive(Clone)]
pub struct McpServer {
    core: Arc<Core>,
    tools: Arc<Vec<Tool>>,
    /// At most [`CONCURRENT_CALLS`] tool calls on blocking threads. Reads run side by side in
    /// `Core`; without a bound, a client that pipelines N requests got N blocking threads, each
    /// waiting for `Core` (300 pipelined calls: 300 threads, 51 MB resident instead of 18 MB).
    calls: Arc<Semaphore>,
}

impl McpServer {
    /// A server answering with `core`.
    pub fn new(core: Core) -> McpServer {
        let tools = tools()
            .into_iter()
            .map(|spec| {
                let tool = Tool::new(spec.name, spec.description, Arc::new(spec.input_schema))
                    .annotate(ToolAnnotations::new().read_only(spec.read_only).destructive(false));
                match spec.output_schema {
                    Some(schema) => tool.with_raw_output_schema(Arc::new(schema)),
                    None => tool,
                }
            })
            .collect();
        McpServer {
            core: Arc::new(core),
            tools: Arc::new(tools),
            calls: Arc::new(Semaphore::new(CONCURRENT_CALLS)),
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("ctxgate", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools.iter().any(|t| t.name == name) {
            // MCP: an unknown tool is a protocol error, not a tool execution error.
            let message =
                format!("no tool named {name:?}; the tools are {}", super::core::TOOL_NAMES.join(", "));
            return Err(ErrorData::invalid_params(message, None));
        }
        let core = Arc::clone(&self.core);
        let arguments = request.arguments;
        // Owned and moved into the blocking call, so the permit is held until the call ends even
        // if this future is dropped. A query waits behind a write (an import) in `Core`, and
        // behind other calls only when CONCURRENT_CALLS are running.
        let permit = Arc::clone(&self.calls)
            .acquire_owned()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        // Opening may wait for another process (bounded by the busy timeout) and selection is
        // CPU work: both run off the async runtime so the transport keeps reading.
        let outcome = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            core.call(&name, arguments)
        })
        .await
        .unwrap_or_else(|e| Err(ToolError { kind: "internal", message: format!("the request failed: {e}") }));
        let result = match outcome {
            Ok(document) => CallToolResult::structured(document),
            Err(error) => {
                log::debug!("tool error: {}: {}", error.kind, error.message);
                // No structured content: clients validate it against the output schema, which
                // describes results (the MCP Inspector then shows a schema failure instead of
                // the error). The text is the CLI's `--json` error document.
                CallToolResult::error(vec![ContentBlock::text(error.to_json().to_string())])
            }
        };
        Ok(result.into())
    }

    /// Answers the stand-in request [`Screened`] puts in place of a message it rejected (too
    /// long, or not JSON) with a JSON-RPC error; any other unknown method is not found.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if request.method != REJECTED_METHOD {
            return Err(ErrorData::new(ErrorCode::METHOD_NOT_FOUND, request.method, None));
        }
        let params = request.params.unwrap_or_default();
        let code = params["code"].as_i64().and_then(|c| i32::try_from(c).ok()).unwrap_or(CODE_PARSE_ERROR);
        let message = params["message"].as_str().unwrap_or("the message was rejected").to_string();
        log::debug!("rejected a message: {message}");
        Err(ErrorData::new(ErrorCode(code), message, None))
    }
}

/// Serves `core` over stdin/stdout until the client closes the connection. Incoming lines go
/// through [`Screened`] first, so a message over [`MAX_MESSAGE_BYTES`] or one that is not
/// valid JSON gets a JSON-RPC error instead of no answer.
///
/// # Errors
/// The transport failed to start (initialization did not complete) or ended with an error.
pub async fn serve_stdio(core: Core) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let (stdin, stdout) = rmcp::transport::stdio();
    let transport = rmcp::transport::async_rw::AsyncRwTransport::new_server(Screened::new(stdin), stdout)
        .with_max_line_length(MAX_MESSAGE_BYTES);
    let service = McpServer::new(core).serve(transport).await?;
    service.waiting().await?;
    Ok(())
}
