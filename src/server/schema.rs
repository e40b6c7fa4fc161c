//! The shapes of the tools' structured results, for their output schemas (`outputSchema` in
//! `tools/list`). These types only describe the JSON documents (the CLI's `--json` documents,
//! built from the library's types in [`super::core`]); they are never built. A unit test there
//! checks real results against these schemas, so a field added to the library shows up here.
#![allow(dead_code, reason = "schema-only mirrors of the result documents, never constructed")]

use super::core::PolicyParam;
use crate::Format;
use crate::evidence::Projection;
use schemars::JsonSchema;

/// `select_context`: the selected turns and why (as `select --json`).
#[derive(JsonSchema)]
pub struct SelectContextOutput {
    /// The session asked about.
    session: String,
    /// The query.
    query: String,
    /// The topic gate's decision.
    decision: Decision,
    /// The query's anchors with their IDF, most discriminative first.
    anchors: Vec<Anchor>,
    /// The policy used.
    policy: PolicyParam,
    /// Budget and use.
    budget: Budget,
    /// Covered share of the query's IDF, in [0, 1].
    coverage: f64,
    /// Selected past turns, in chronological order; use them as context.
    blocks: Vec<Block>,
    /// Selected evidence projections (exact facts of tool output kept on disk); read what they
    /// omit with read_evidence.
    evidence: Vec<EvidenceBlock>,
    /// Version of this document.
    schema_version: u32,
}

/// One selected evidence projection.
#[derive(JsonSchema)]
struct EvidenceBlock {
    /// Where the full document is: pass it to read_evidence.
    evidence_ref: String,
    /// Its kind.
    kind: String,
    /// The evidence recall score.
    score: f64,
    /// Query anchors it covered first.
    covered_anchors: Vec<String>,
    /// Estimated tokens of the projection.
    tokens: u32,
    /// The projection: facts (exact values by JSON pointer) and omitted parts, or a small
    /// document whole as `content`; known unknowns, blocked decisions, claim constraints, agent
    /// space. Empty lists are left out.
    projection: Projection,
}

/// `store_evidence`: the projection of the stored document (as `evidence put` prints it).
#[derive(JsonSchema)]
pub struct StoreEvidenceOutput {
    /// The projection of the document now stored under its ref.
    projection: Projection,
    /// Version of this document.
    schema_version: u32,
}

/// `read_evidence`: a stored document, or the part of it at a JSON pointer.
#[derive(JsonSchema)]
pub struct ReadEvidenceOutput {
    /// The document's ref.
    evidence_ref: String,
    /// The JSON pointer read, if any.
    pointer: Option<String>,
    /// The content (UTF-8; JSON parts pretty-printed), at most `max_bytes`.
    content: String,
    /// Size of the whole document or part, in bytes.
    bytes: u64,
    /// True if `content` stops at `max_bytes`: read a narrower pointer for the rest.
    truncated: bool,
    /// Version of this document.
    schema_version: u32,
}

/// Whether a message continues the current topic or switches to another.
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Topic {
    /// Same topic as the recent turns.
    Continue,
    /// Another topic.
    Switch,
}

/// The topic gate's decision with the numbers behind it.
#[derive(JsonSchema)]
struct Decision {
    /// Continue or switch.
    topic: Topic,
    /// IDF share of the query's anchors found in the topic.
    overlap: f64,
    /// IDF share of the query's anchors not in the topic.
    new_ratio: f64,
    /// The deictic pattern the query starts with (also after a short acknowledgement), or
    /// "reply to a question" when it answers the question the previous turn ended with; null
    /// otherwise.
    deictic: Option<String>,
}

/// One anchor of the query.
#[derive(JsonSchema)]
struct Anchor {
    /// The anchor text.
    text: String,
    /// Its IDF in the index.
    idf: f64,
}

/// A token budget and what was used of it.
#[derive(JsonSchema)]
struct Budget {
    /// The token budget.
    limit: u32,
    /// Estimated tokens of the selected blocks; never above `limit`.
    used: u32,
}

/// One selected past turn, pruned to what the query needs.
#[derive(JsonSchema)]
struct Block {
    /// The turn's id in its session.
    turn_id: u32,
    /// The kept user sentences.
    user: String,
    /// The kept assistant sentences.
    assistant: String,
    /// The recall score.
    score: f64,
    /// Query anchors this block covered first.
    covered_anchors: Vec<String>,
    /// Estimated tokens of `user` and `assistant`.
    tokens: u32,
}

/// `build_prompt`: the ready-to-send prompt (as `prompt --json`).
#[derive(JsonSchema)]
pub struct BuildPromptOutput {
    /// The session.
    session: String,
    /// The query.
    query: String,
    /// The selected turns and the question, rendered within the budget.
    prompt: String,
    /// Version of this document.
    schema_version: u32,
}

/// `record_turn`: the id of the recorded turn (as `add --json`).
#[derive(JsonSchema)]
pub struct RecordTurnOutput {
    /// The session.
    session: String,
    /// The new turn's id: its position in the session, from 0.
    turn_id: u32,
    /// Version of this document.
    schema_version: u32,
}

/// `gate`: the topic gate's decision (as `gate --json`).
#[derive(JsonSchema)]
pub struct GateOutput {
    /// The session.
    session: String,
    /// The query.
    query: String,
    /// The decision.
    decision: Decision,
    /// Version of this document.
    schema_version: u32,
}

/// `list_sessions`: the sessions in the index (as `sessions --json`).
#[derive(JsonSchema)]
pub struct ListSessionsOutput {
    /// The sessions, by name.
    sessions: Vec<SessionInfo>,
    /// Version of this document.
    schema_version: u32,
}

/// `search_history`: the best matching turns of every session (as `search --json`).
#[derive(JsonSchema)]
pub struct SearchHistoryOutput {
    /// The query.
    query: String,
    /// The turns, best first.
    hits: Vec<SearchHit>,
    /// Version of this document.
    schema_version: u32,
}

/// One turn `search_history` found.
#[derive(JsonSchema)]
struct SearchHit {
    /// The session's name.
    session: String,
    /// The turn's id within the session.
    turn_id: u32,
    /// Its score: 1.5 x user-side BM25 + 0.7 x assistant-side BM25 (each normalized to [0, 1])
    /// + 1 when it holds every scored query term (framing words such as "how" are not scored).
    score: f64,
    /// The query terms it contains.
    matched_anchors: Vec<String>,
    /// The user's message, pruned to the sentences with those terms.
    user: String,
    /// The assistant's reply, pruned alike.
    assistant: String,
}

/// A session's summary.
#[derive(JsonSchema)]
struct SessionInfo {
    /// Name.
    name: String,
    /// Number of turns.
    turns: u32,
    /// First turn of the current topic segment.
    segment_start: u32,
    /// The log file it was imported from.
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    /// Title from the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    /// Timestamp of the first turn, as the source wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    time_start: Option<String>,
    /// Timestamp of the last turn, as the source wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    time_end: Option<String>,
}

/// `import_logs`: what the import did (as `import --json`).
#[derive(JsonSchema)]
pub struct ImportLogsOutput {
    /// Per file, in the order read.
    files: Vec<FileReport>,
    /// Turns added.
    new_turns: u64,
    /// Turns already in the index.
    existing_turns: u64,
    /// Records skipped.
    skipped: u64,
    /// Tool results stored as evidence.
    tool_outputs: u64,
    /// Tool results that could not be stored (listed per file).
    tool_outputs_failed: u64,
    /// Wall time in seconds.
    seconds: f64,
    /// Version of this document.
    schema_version: u32,
}

/// What happened to one file.
#[derive(JsonSchema)]
struct FileReport {
    /// The file (a name that is not UTF-8 is given with U+FFFD for the invalid bytes).
    path: String,
    /// Its format (detected or given).
    format: Format,
    /// Per session.
    sessions: Vec<SessionReport>,
    /// Turns added.
    new_turns: u64,
    /// Turns already in the index.
    existing_turns: u64,
    /// Records skipped with their reasons.
    skipped: Vec<Skipped>,
    /// Tool results stored as evidence.
    tool_outputs: u64,
    /// Tool results that could not be stored (their turns are imported).
    tool_outputs_failed: u64,
    /// Each of them; importing the file again once the cause is fixed stores them.
    failed_tool_outputs: Vec<FailedToolOutput>,
}

/// A tool result that could not be stored as evidence.
#[derive(JsonSchema)]
struct FailedToolOutput {
    /// The ref it was to be stored under.
    evidence_ref: String,
    /// The session it belongs to.
    session: String,
    /// Why it was not stored.
    reason: String,
}

/// What happened to one session of a file.
#[derive(JsonSchema)]
struct SessionReport {
    /// The session name.
    session: String,
    /// Turns added.
    new_turns: u64,
    /// Turns of the file that the index already had.
    existing_turns: u64,
    /// A last turn held back until its reply is logged (live agent logs).
    held_back: u64,
}

/// A skipped record.
#[derive(JsonSchema)]
struct Skipped {
    /// 1-based line (for JSON documents: the line the record starts on).
    line: u64,
    /// Why.
    reason: String,
}
