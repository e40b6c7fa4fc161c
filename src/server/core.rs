//! The request → response core of `ctxgate serve`: tool names, their input types and
//! descriptions, and one call over the library API. No transport, no printing.
//!
//! Each call opens the index, does its work and drops it (see the module doc of
//! [`crate::server`] for why).

use crate::evidence::{Projection, Spec};
use crate::tokens::Tokenizer;
use crate::{
    Error, EvidenceOptions, Format, GateDecision, Gatekeeper, ImportOptions, ImportReport, Options, Policy,
    SearchHit, SelectOptions, Selection, SessionInfo,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::PathBuf;

/// Version of the JSON documents the tools return (the CLI's `--json` documents, same version).
pub const SCHEMA_VERSION: u32 = 1;

/// A tool: its name, what it is for, and the type of its arguments (JSON Schema).
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: &'static str,
    /// What it does and when a model should call it.
    pub description: &'static str,
    /// JSON Schema of its arguments (an object).
    pub input_schema: Map<String, Value>,
    /// JSON Schema of its structured result when it succeeds (an object), if declared.
    pub output_schema: Option<Map<String, Value>>,
    /// True if it never writes to the index.
    pub read_only: bool,
}

/// A failed call, reported to the client as a tool error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolError {
    /// Stable snake_case kind: the library's [`Error::kind`], or `bad_input` for arguments
    /// that do not match the schema, `unknown_tool`, `internal`.
    pub kind: &'static str,
    /// What went wrong, and what would be accepted.
    pub message: String,
}

impl ToolError {
    /// The error as the JSON document the CLI prints with `--json`: `{"error": {kind, message}}`.
    pub fn to_json(&self) -> Value {
        serde_json::json!({ "error": { "kind": self.kind, "message": self.message } })
    }
}

impl From<Error> for ToolError {
    /// The message holds each cause once, as the CLI prints it (`{:#}`): `e`, then its sources.
    fn from(e: Error) -> Self {
        let mut message = e.to_string();
        let mut cause = std::error::Error::source(&e);
        while let Some(c) = cause {
            message.push_str(": ");
            message.push_str(&c.to_string());
            cause = c.source();
        }
        ToolError { kind: e.kind().as_str(), message }
    }
}

/// An optional whole-number argument, taken as a JSON number or as a string of digits: the MCP
/// Inspector's CLI sends every argument it is given as a string (`"budget": "2000"`). Anything
/// else (a fraction, a negative number, other text) is refused naming what is accepted.
fn whole_number<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u32>, D::Error> {
    use serde::de::{Unexpected, Visitor};
    struct WholeNumber;
    impl<'de> Visitor<'de> for WholeNumber {
        type Value = Option<u32>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "a whole number from 0 to {} (a JSON number, or a string of its digits)", u32::MAX)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            u32::try_from(n).map(Some).map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
            u32::try_from(n).map(Some).map_err(|_| E::invalid_value(Unexpected::Signed(n), &self))
        }
        fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Self::Value, E> {
            Err(E::invalid_value(Unexpected::Float(n), &self))
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            let digits = text.trim();
            match digits.parse::<u32>() {
                Ok(n) if digits.bytes().all(|b| b.is_ascii_digit()) => Ok(Some(n)),
                _ => Err(E::invalid_value(Unexpected::Str(text), &self)),
            }
        }
    }
    deserializer.deserialize_any(WholeNumber)
}

/// Arguments of `select_context`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectContextParams {
    /// Session name (one per conversation, e.g. a project or chat id).
    pub session: String,
    /// The user's new message, as they wrote it.
    pub query: String,
    /// Token budget for the selected turns (default 4000).
    #[serde(default, deserialize_with = "whole_number")]
    pub budget: Option<u32>,
    /// Answer as if only turns 0..as_of of the session existed (history replay).
    #[serde(default, deserialize_with = "whole_number")]
    pub as_of: Option<u32>,
    /// minimal (default): the smallest context covering the query; fill: then spend the rest of the budget.
    #[serde(default)]
    pub policy: Option<Policy>,
    /// What the budget and every `tokens` count: chars (characters × 1.5), cl100k or o200k
    /// (OpenAI encodings). Default: the server's --tokenizer (chars unless set).
    #[serde(default)]
    pub tokenizer: Option<Tokenizer>,
}

/// Arguments of `build_prompt`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildPromptParams {
    /// Session name.
    pub session: String,
    /// The user's new message, as they wrote it.
    pub query: String,
    /// Token budget for the whole prompt (default 4000).
    #[serde(default, deserialize_with = "whole_number")]
    pub budget: Option<u32>,
    /// What the budget counts: chars (characters × 1.5), cl100k or o200k (OpenAI encodings).
    /// Default: the server's --tokenizer (chars unless set).
    #[serde(default)]
    pub tokenizer: Option<Tokenizer>,
}

/// Arguments of `record_turn`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordTurnParams {
    /// Session name (created on its first turn).
    pub session: String,
    /// The user's message.
    pub user: String,
    /// The assistant's reply.
    pub assistant: String,
}

/// Arguments of `search_history`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchHistoryParams {
    /// What to look for.
    pub query: String,
    /// Turns to return at most (default 20).
    #[serde(default, deserialize_with = "whole_number")]
    pub limit: Option<u32>,
}

/// Turns `search_history` returns when the caller gives no `limit`.
pub const DEFAULT_SEARCH_LIMIT: u32 = 20;

/// Arguments of `gate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GateParams {
    /// Session name.
    pub session: String,
    /// The user's new message.
    pub query: String,
    /// Decide as if only turns 0..as_of of the session existed.
    #[serde(default, deserialize_with = "whole_number")]
    pub as_of: Option<u32>,
}

/// Arguments of `list_sessions`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListSessionsParams {}

/// Arguments of `import_logs`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImportLogsParams {
    /// Files, or directories to walk for .json and .jsonl files (relative paths are relative to the server's working directory).
    pub paths: Vec<PathBuf>,
    /// Log format (default auto: detected per file).
    #[serde(default)]
    pub format: Option<Format>,
    /// Put every conversation into this session instead of naming sessions from the source.
    #[serde(default)]
    pub session: Option<String>,
    /// Skip malformed records (each reported) instead of refusing the file.
    #[serde(default)]
    pub skip_invalid: bool,
}

/// Arguments of `store_evidence`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreEvidenceParams {
    /// Where to store it: a relative path inside the evidence root, e.g. round_3/baseline.json.
    #[serde(rename = "ref")]
    pub reference: String,
    /// The whole document (JSON or text), exactly as the tool produced it.
    pub content: String,
    /// Project as this kind of the spec (default: the spec's match globs).
    #[serde(default)]
    pub kind: Option<String>,
    /// Projection spec file on the server's machine (default: the default projection).
    #[serde(default)]
    pub spec: Option<PathBuf>,
}

/// Arguments of `read_evidence`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadEvidenceParams {
    /// The document's ref (an `evidence_ref` of a projection).
    #[serde(rename = "ref")]
    pub reference: String,
    /// Only the JSON value at this RFC 6901 pointer, e.g. /result/rows/0 (a part listed in
    /// omitted_from_context).
    #[serde(default)]
    pub pointer: Option<String>,
    /// Most bytes of content returned (default 65536).
    #[serde(default, deserialize_with = "whole_number")]
    pub max_bytes: Option<u32>,
}

/// Content returned by `read_evidence` when the caller gives no `max_bytes`.
pub const DEFAULT_READ_BYTES: u32 = 64 * 1024;

const SELECT_CONTEXT: &str = "Call this BEFORE answering a user message: returns the past turns of \
the session that the message needs, pruned to the relevant sentences, within a token budget, with \
the topic gate's decision and why each turn was chosen. Use the blocks as context for your answer. \
An unknown session (no turn recorded yet) is an error of kind unknown_session, and a new index (no turn \
recorded in any session) one of kind unknown_index: then answer without context, and record the turn.";
const BUILD_PROMPT: &str = "Call this BEFORE answering a user message, instead of select_context when \
you want ready-to-send text: the selected past turns and the question, rendered as one prompt that \
fits the budget.";
const RECORD_TURN: &str = "Call this AFTER answering: records the user's message and your reply as \
the session's next turn (the session is created on its first turn) and returns its turn id. \
Record every turn so later questions can find it.";
const SEARCH_HISTORY: &str = "Finds which past conversations discussed something: the turns of \
every session that best match the query, best first, each with its session name, turn id, the \
query terms it matches and its text pruned to them. Use it when the user refers to work from \
another session (\"what did we decide about X last week?\"); select_context only looks within one.";
const GATE: &str = "Only the topic gate's decision for a new message: continue (same topic as the \
recent turns) or switch, with its numbers. Cheap; does not select anything.";
const STORE_EVIDENCE: &str = "Call this with a tool's full output (query results, DDL, plans, logs, \
test output) instead of putting it in the conversation: stores the whole document on disk under \
`ref` and returns its projection — exact facts by JSON pointer, what was omitted and its size, \
known unknowns, blocked decisions, claim constraints (a document no longer than that comes back \
whole, as `content`). Reason from the projection; never restate omitted data; read parts with \
read_evidence.";
const READ_EVIDENCE: &str = "Reads a stored evidence document by its evidence_ref, whole or the part \
at a JSON pointer listed in omitted_from_context. Use it when a projection says a fact you need \
was omitted, instead of guessing it.";
const LIST_SESSIONS: &str = "Lists the sessions in the index with their turn counts, sources and time spans.";
const IMPORT_LOGS: &str = "Imports conversation logs (canonical JSONL, OpenAI, ChatGPT, Claude, \
Claude Code, Codex, ShareGPT) from files or directories on the server's machine. Incremental: \
importing the same log again adds nothing. Returns what was new, already there, or skipped, and \
each file's status: imported, skipped (not a log, a link out of the directory) or failed (with its \
error; nothing of it written, the other files imported).";

/// Names of the tools, in the order they are listed.
pub const TOOL_NAMES: [&str; 9] = [
    "select_context",
    "build_prompt",
    "record_turn",
    "search_history",
    "gate",
    "list_sessions",
    "import_logs",
    "store_evidence",
    "read_evidence",
];

/// JSON Schema (draft 2020-12) of `T` as an object: arguments as deserialized, or a result as
/// serialized with the `schema_version` every document has, without `$schema` and the type's
/// title and description. Made [`portable`], since clients validate with strict validators.
fn object_schema<T: JsonSchema>(result: bool) -> Map<String, Value> {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    if result {
        settings = settings.for_serialize();
    }
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut object = match serde_json::to_value(schema) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    object.remove("$schema");
    object.remove("title");
    object.remove("description");
    let properties = object.entry("properties").or_insert_with(|| Value::Object(Map::new()));
    if result {
        if let Some(properties) = properties.as_object_mut() {
            let version = serde_json::json!({"type": "integer", "minimum": 0, "description": "Version of this document."});
            properties.insert("schema_version".into(), version);
        }
        let required = object.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Some(required) = required.as_array_mut() {
            required.push("schema_version".into());
        }
    }
    let mut schema = Value::Object(object);
    portable(&mut schema);
    match schema {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}

/// Formats JSON Schema defines (draft 2020-12 §7.3); schemars also writes Rust ones (`uint32`,
/// `double`) that strict validators such as Ajv reject as unknown.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Rewrites `schema` in place into what every client's validator takes: no non-standard
/// `format`, and a nullable type (`"type": ["integer", "null"]`, which Ajv's strict mode warns
/// about) as `anyOf` of the type and `null`, with the type's own keywords in its branch.
fn portable(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object.get("format").and_then(Value::as_str).is_some_and(|f| !STANDARD_FORMATS.contains(&f)) {
                object.remove("format");
            }
            let nullable = match object.get("type") {
                Some(Value::Array(types)) if types.len() == 2 && types.contains(&Value::from("null")) => {
                    types.iter().find(|t| *t != "null").cloned()
                }
                _ => None,
            };
            if let Some(kind) = nullable {
                object.remove("type");
                let mut branch = Map::new();
                branch.insert("type".into(), kind);
                let moved: Vec<String> = object
                    .keys()
                    .filter(|k| !matches!(k.as_str(), "description" | "default" | "title" | "$defs"))
                    .cloned()
                    .collect();
                for key in moved {
                    if let Some(value) = object.remove(&key) {
                        branch.insert(key, value);
                    }
                }
                let null = serde_json::json!({"type": "null"});
                object.insert("anyOf".into(), Value::Array(vec![Value::Object(branch), null]));
            }
            object.values_mut().for_each(portable);
        }
        Value::Array(items) => items.iter_mut().for_each(portable),
        _ => {}
    }
}

impl ToolSpec {
    /// The tool with `T` as the shape of its structured result.
    fn returns<T: JsonSchema>(self) -> ToolSpec {
        ToolSpec { output_schema: Some(object_schema::<T>(true)), ..self }
    }
}

/// The tools, in [`TOOL_NAMES`] order.
pub fn tools() -> Vec<ToolSpec> {
    fn spec<T: JsonSchema>(name: &'static str, description: &'static str, read_only: bool) -> ToolSpec {
        ToolSpec {
            name,
            description,
            input_schema: object_schema::<T>(false),
            output_schema: None,
            read_only,
        }
    }
    vec![
        spec::<SelectContextParams>("select_context", SELECT_CONTEXT, true).returns::<Selection>(),
        spec::<BuildPromptParams>("build_prompt", BUILD_PROMPT, true).returns::<Prompted>(),
        spec::<RecordTurnParams>("record_turn", RECORD_TURN, false).returns::<Added>(),
        spec::<SearchHistoryParams>("search_history", SEARCH_HISTORY, true).returns::<Searched>(),
        spec::<GateParams>("gate", GATE, true).returns::<Gated>(),
        spec::<ListSessionsParams>("list_sessions", LIST_SESSIONS, true).returns::<Sessions>(),
        spec::<ImportLogsParams>("import_logs", IMPORT_LOGS, false).returns::<ImportReport>(),
        spec::<StoreEvidenceParams>("store_evidence", STORE_EVIDENCE, false).returns::<Stored>(),
        spec::<ReadEvidenceParams>("read_evidence", READ_EVIDENCE, true).returns::<Read>(),
    ]
}

/// Answers tool calls on one index file, opening it per call. Calls run side by side: reads
/// on read-only opens that never wait, writes each waiting only for the one write transaction
/// at a time the index allows (across processes, as within this one).
#[derive(Debug)]
pub struct Core {
    db: PathBuf,
    options: Options,
    /// Pending turns decoded by one call, for the next calls (the index is opened per call).
    pending: crate::ReadCache,
}

impl Core {
    /// A core over the index at `db`, opened with `options` for every call.
    pub fn new(db: PathBuf, options: Options) -> Core {
        Core { db, options, pending: Default::default() }
    }

    /// The index file.
    pub fn db(&self) -> &std::path::Path {
        &self.db
    }

    /// Runs tool `name` with `arguments` (a JSON object; `None` = no arguments) and returns its
    /// JSON document, the one the CLI prints with `--json` for the same request.
    ///
    /// # Errors
    /// [`ToolError`] for an unknown tool (`unknown_tool`), arguments that do not match the tool's
    /// schema (`bad_input`), and every library error (its [`Error::kind`]; `busy` when another
    /// process holds the index past the busy timeout).
    pub fn call(&self, name: &str, arguments: Option<Map<String, Value>>) -> Result<Value, ToolError> {
        let args = arguments.unwrap_or_default();
        match name {
            "select_context" => {
                let p: SelectContextParams = parse(name, args)?;
                let options = SelectOptions {
                    budget: p.budget,
                    as_of: p.as_of,
                    policy: p.policy,
                    tokenizer: p.tokenizer,
                    ..SelectOptions::default()
                };
                self.read(|gk| document(&gk.session(&p.session)?.select_with(&p.query, &options)?))
            }
            "build_prompt" => {
                let p: BuildPromptParams = parse(name, args)?;
                let options =
                    SelectOptions { budget: p.budget, tokenizer: p.tokenizer, ..SelectOptions::default() };
                self.read(|gk| {
                    let prompt = gk.session(&p.session)?.build_prompt_with(&p.query, &options)?;
                    document(&Prompted { session: &p.session, query: &p.query, prompt })
                })
            }
            "record_turn" => {
                let p: RecordTurnParams = parse(name, args)?;
                self.write(|gk| {
                    let turn_id = gk.session(&p.session)?.add_turn(&p.user, &p.assistant)?;
                    document(&Added { session: &p.session, turn_id })
                })
            }
            "search_history" => {
                let p: SearchHistoryParams = parse(name, args)?;
                let limit = p.limit.unwrap_or(DEFAULT_SEARCH_LIMIT) as usize;
                self.read(|gk| document(&Searched { query: &p.query, hits: gk.search(&p.query, limit)? }))
            }
            "gate" => {
                let p: GateParams = parse(name, args)?;
                self.read(|gk| {
                    let decision = gk.session(&p.session)?.gate(&p.query, p.as_of)?;
                    document(&Gated { session: &p.session, query: &p.query, decision })
                })
            }
            "list_sessions" => {
                let _: ListSessionsParams = parse(name, args)?;
                self.read(|gk| document(&Sessions { sessions: gk.sessions()? }))
            }
            "import_logs" => {
                let p: ImportLogsParams = parse(name, args)?;
                if p.paths.is_empty() {
                    return Err(ToolError {
                        kind: "bad_input",
                        message: "invalid paths: give at least one file or directory".into(),
                    });
                }
                let options = ImportOptions {
                    format: p.format.unwrap_or(Format::Auto),
                    session: p.session,
                    skip_invalid: p.skip_invalid,
                    ..ImportOptions::default()
                };
                // A file name that is not UTF-8 is reported lossily (`FileReport` serializes so).
                self.write(|gk| document(&gk.import(&p.paths, &options)?))
            }
            "store_evidence" => {
                let p: StoreEvidenceParams = parse(name, args)?;
                let spec = match &p.spec {
                    Some(path) => Some(Spec::load(path).map_err(Error::from)?),
                    None => None,
                };
                let options = EvidenceOptions { spec: spec.as_ref(), kind: p.kind.as_deref() };
                self.write(|gk| {
                    let projection = gk.put_evidence(&p.reference, p.content.as_bytes(), &options)?;
                    document(&Stored { projection })
                })
            }
            "read_evidence" => {
                let p: ReadEvidenceParams = parse(name, args)?;
                let max = p.max_bytes.unwrap_or(DEFAULT_READ_BYTES) as usize;
                self.read(|gk| {
                    let bytes = gk.read_evidence(&p.reference, p.pointer.as_deref())?;
                    let text = String::from_utf8_lossy(&bytes);
                    let cut = text.floor_char_boundary(max.min(text.len()));
                    document(&Read {
                        evidence_ref: &p.reference,
                        pointer: p.pointer.as_deref(),
                        content: &text[..cut],
                        bytes: bytes.len() as u64,
                        truncated: cut < text.len(),
                    })
                })
            }
            _ => Err(ToolError {
                kind: "unknown_tool",
                message: format!("no tool named {name:?}; the tools are {}", TOOL_NAMES.join(", ")),
            }),
        }
    }

    /// [`Core::with_index`] on the index opened read-only: a query neither creates the file
    /// nor changes a byte of it, and shares it with other readers.
    fn read(&self, f: impl FnOnce(&Gatekeeper) -> Result<Value, Failure>) -> Result<Value, ToolError> {
        log::debug!("read call begins");
        let result = self.with_index(|db, options| Gatekeeper::open_read_only(db, options), f);
        log::debug!("read call ends");
        result
    }

    /// [`Core::with_index`] on the index opened for writing (created if missing).
    fn write(&self, f: impl FnOnce(&Gatekeeper) -> Result<Value, Failure>) -> Result<Value, ToolError> {
        self.with_index(|db, options| Gatekeeper::open(db, options), f)
    }

    /// Opens the index with `open`, runs `f`, and drops the index before returning. A damaged
    /// file is a tool error of kind `damaged` naming it (redb may panic on one: caught here, so
    /// the server goes on serving), and any other panic one of kind `internal`.
    fn with_index(
        &self,
        open: fn(&std::path::Path, Options) -> crate::Result<Gatekeeper>,
        f: impl FnOnce(&Gatekeeper) -> Result<Value, Failure>,
    ) -> Result<Value, ToolError> {
        let caught = crate::catch_panic(&self.db, || {
            let mut gatekeeper = open(&self.db, self.options.clone())?;
            gatekeeper.share_read_cache(&self.pending);
            f(&gatekeeper)
        });
        match caught {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(Failure::Library(e))) | Err(e) => Err(crate::name_damaged_file(e, &self.db).into()),
            Ok(Err(Failure::Tool(e))) => Err(e),
        }
    }
}

/// Why a call on the open index failed: a library error (named with the file when it says
/// the file is damaged, which only [`Core::with_index`] knows), or a tool error already made.
enum Failure {
    Library(Error),
    Tool(ToolError),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Library(e)
    }
}

impl From<ToolError> for Failure {
    fn from(e: ToolError) -> Self {
        Failure::Tool(e)
    }
}

/// `build_prompt`: the ready-to-send prompt (as `prompt --json`).
#[derive(Serialize, JsonSchema)]
struct Prompted<'a> {
    /// The session.
    session: &'a str,
    /// The query.
    query: &'a str,
    /// The selected turns and the question, rendered within the budget.
    prompt: String,
}

/// `record_turn`: the id of the recorded turn (as `add --json`).
#[derive(Serialize, JsonSchema)]
struct Added<'a> {
    /// The session.
    session: &'a str,
    /// The new turn's id: its position in the session, from 0.
    turn_id: u32,
}

/// `search_history`: the best matching turns of every session (as `search --json`).
#[derive(Serialize, JsonSchema)]
struct Searched<'a> {
    /// The query.
    query: &'a str,
    /// The turns, best first.
    hits: Vec<SearchHit>,
}

/// `gate`: the topic gate's decision (as `gate --json`).
#[derive(Serialize, JsonSchema)]
struct Gated<'a> {
    /// The session.
    session: &'a str,
    /// The query.
    query: &'a str,
    /// The decision.
    decision: GateDecision,
}

/// `list_sessions`: the sessions in the index (as `sessions --json`).
#[derive(Serialize, JsonSchema)]
struct Sessions {
    /// The sessions, by name.
    sessions: Vec<SessionInfo>,
}

fn parse<T: for<'de> Deserialize<'de>>(tool: &str, args: Map<String, Value>) -> Result<T, ToolError> {
    serde_json::from_value(Value::Object(args)).map_err(|e| ToolError {
        kind: "bad_input",
        message: format!("invalid arguments for {tool}: {e} (see the tool's input schema)"),
    })
}

/// `store_evidence`: the projection of the stored document (as `evidence put` prints it).
#[derive(Serialize, JsonSchema)]
struct Stored {
    /// The projection of the document now stored under its ref.
    projection: Projection,
}

/// `read_evidence`: a stored document, or the part of it at a JSON pointer.
#[derive(Serialize, JsonSchema)]
struct Read<'a> {
    /// The document's ref.
    evidence_ref: &'a str,
    /// The JSON pointer read, if any.
    pointer: Option<&'a str>,
    /// The content (UTF-8; JSON parts pretty-printed), at most `max_bytes`.
    content: &'a str,
    /// Size of the whole document or part, in bytes.
    bytes: u64,
    /// True if `content` stops at `max_bytes`: read a narrower pointer for the rest.
    truncated: bool,
}

/// `value` as a JSON object with `schema_version` added, as the CLI prints it.
fn document(value: &impl Serialize) -> Result<Value, Failure> {
    let mut document = serde_json::to_value(value)
        .map_err(|e| ToolError { kind: "internal", message: format!("cannot serialize the result: {e}") })?;
    if let Some(object) = document.as_object_mut() {
        object.insert("schema_version".into(), SCHEMA_VERSION.into());
    }
    Ok(document)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core() -> (tempfile::TempDir, Core) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = dir.path().join("index.redb");
        (dir, Core::new(db, Options { cache_bytes: 1 << 20, ..Options::default() }))
    }

    fn args(value: Value) -> Option<Map<String, Value>> {
        value.as_object().cloned()
    }

    #[test]
    fn every_tool_has_an_object_schema() {
        let specs = tools();
        let names: Vec<&str> = specs.iter().map(|t| t.name).collect();
        assert_eq!(names, TOOL_NAMES);
        for spec in &specs {
            assert_eq!(spec.input_schema.get("type"), Some(&Value::from("object")), "{}", spec.name);
            assert!(spec.input_schema.contains_key("properties"), "{}", spec.name);
            let output =
                spec.output_schema.as_ref().unwrap_or_else(|| panic!("{}: no output schema", spec.name));
            assert_eq!(output.get("type"), Some(&Value::from("object")), "{}", spec.name);
            assert!(output["required"].as_array().is_some_and(|r| r.contains(&"schema_version".into())));
        }
    }

    #[test]
    fn a_recorded_turn_is_selected() {
        let (_dir, core) = core();
        let turn = serde_json::json!({"session": "s", "user": "How do I expire a Redis lock?", "assistant": "PX 30000."});
        let added = core.call("record_turn", args(turn)).expect("record_turn");
        assert_eq!(added["turn_id"], 0);
        let before = std::fs::read(core.db()).expect("the index");
        let query = serde_json::json!({"session": "s", "query": "redis lock"});
        let selected = core.call("select_context", args(query)).expect("select_context");
        assert_eq!(selected["blocks"][0]["turn_id"], 0);
        assert!(std::fs::read(core.db()).expect("the index") == before, "a query changed the index file");
        assert_eq!(selected["schema_version"], SCHEMA_VERSION);
    }

    /// The index is opened for every call; the pending turns one call decoded or wrote serve
    /// the next calls until another writer changes them.
    #[test]
    fn calls_share_the_pending_turns_until_another_writer_changes_them() {
        let (_dir, core) = core();
        let turn = |user: &str| serde_json::json!({"session": "s", "user": user, "assistant": "PX 30000."});
        core.call("record_turn", args(turn("How do I expire a Redis lock?"))).expect("record_turn");
        let misses = core.pending.misses();
        let query = serde_json::json!({"session": "s", "query": "redis lock"});
        for _ in 0..2 {
            let selected = core.call("select_context", args(query.clone())).expect("select_context");
            assert_eq!(selected["blocks"][0]["turn_id"], 0);
        }
        assert_eq!(core.pending.misses(), misses, "the recorded turn's pending row was decoded again");
        let other = Gatekeeper::open(core.db(), core.options.clone()).expect("open");
        other
            .session("s")
            .expect("session")
            .add_turn("And renew the Redis lock?", "Extend it.")
            .expect("add");
        drop(other);
        let selected = core.call("select_context", args(query)).expect("select_context");
        assert_eq!(core.pending.misses(), misses + 1);
        let turns: Vec<&Value> =
            selected["blocks"].as_array().expect("blocks").iter().map(|b| &b["turn_id"]).collect();
        assert!(turns.contains(&&Value::from(1)), "another writer's turn is selected: {selected}");
    }

    #[test]
    fn search_history_finds_the_session_that_discussed_it() {
        let (_dir, core) = core();
        for (session, user) in [("infra", "How do I expire a Redis lock?"), ("db", "Postgres vacuum is slow")]
        {
            let turn = serde_json::json!({"session": session, "user": user, "assistant": "Let us look."});
            core.call("record_turn", args(turn)).expect("record_turn");
        }
        let found = core.call("search_history", args(serde_json::json!({"query": "postgres vacuum"})));
        let found = found.expect("search_history");
        assert_eq!(found["hits"].as_array().map(Vec::len), Some(1), "{found}");
        assert_eq!(
            (found["hits"][0]["session"].as_str(), found["hits"][0]["turn_id"].as_u64()),
            (Some("db"), Some(0))
        );
        let limited = core.call("search_history", args(serde_json::json!({"query": "look", "limit": 1})));
        assert_eq!(limited.expect("search_history")["hits"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn a_tool_error_names_its_cause_once() {
        let (dir, core) = core();
        let log = dir.path().join("broken.jsonl");
        std::fs::write(&log, "{\"session\": \"s\", \"user\": \"a\" \"assistant\": \"b\"}\n").expect("write");
        let call = core.call("import_logs", args(serde_json::json!({"paths": [log], "format": "jsonl"})));
        let error = call.expect_err("a malformed line");
        assert_eq!(error.kind, "bad_log", "{error:?}");
        // The file and line, then serde's reason, once.
        assert!(error.message.contains("broken.jsonl") && error.message.contains(":1"), "{}", error.message);
        assert_eq!(error.message.matches("expected `,` or `}`").count(), 1, "{}", error.message);
    }

    #[test]
    fn errors_have_kinds() {
        let (_dir, core) = core();
        let kind = |tool: &str, a: Value| core.call(tool, args(a)).map(|_| ()).map_err(|e| e.kind);
        assert_eq!(kind("nope", serde_json::json!({})), Err("unknown_tool"));
        assert_eq!(kind("gate", serde_json::json!({"session": "s"})), Err("bad_input"));
        // A query creates no index.
        assert_eq!(kind("gate", serde_json::json!({"session": "s", "query": "q"})), Err("unknown_index"));
        assert_eq!(kind("list_sessions", serde_json::json!({})), Err("unknown_index"));
        assert!(!core.db().exists(), "a read-only tool created the index");
        let turn =
            serde_json::json!({"session": "t", "user": "How do I expire a Redis lock?", "assistant": "PX."});
        core.call("record_turn", args(turn)).expect("record_turn");
        assert_eq!(kind("gate", serde_json::json!({"session": "s", "query": "q"})), Err("unknown_session"));
        assert_eq!(kind("list_sessions", serde_json::json!({"extra": 1})), Err("bad_input"));
        assert_eq!(
            core.call("list_sessions", None).map(|v| v["sessions"][0]["name"].clone()),
            Ok(serde_json::json!("t"))
        );
    }
}
