//! Reading a session's stored turns back: `show` and `export`.

use crate::error::{Error, Result};
use crate::gate::Topic;
use crate::index::Index;
use crate::import::{CanonicalLine, CanonicalTool};
use crate::types::TurnId;
use crate::store::records::{SessionRecord, TurnRecord};
use serde::Serialize;

/// Turns read per transaction while exporting, so memory stays bounded.
const EXPORT_CHUNK: u32 = 1024;

/// A tool call recorded with a turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolInfo {
    /// Tool name.
    pub name: String,
    /// Call id from the source log.
    pub call_id: Option<String>,
    /// Arguments as the log wrote them.
    pub arguments: String,
    /// Size of the result in bytes.
    pub result_bytes: u64,
}

/// The gate decision recorded when a turn was added.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedGate {
    /// Continue or switch.
    pub topic: Topic,
    /// Overlap ratio.
    pub overlap: f32,
    /// New-anchor ratio.
    pub new_ratio: f32,
    /// Deictic pattern matched, or `reply to a question`, if any.
    pub deictic: Option<String>,
    /// First turn of the topic segment the turn belongs to.
    pub segment_start: u32,
}

/// A stored turn, whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoredTurn {
    /// Turn id.
    pub turn_id: TurnId,
    /// The user's text.
    pub user: String,
    /// The assistant's text.
    pub assistant: String,
    /// Timestamp from the source.
    pub time: Option<String>,
    /// Tool calls.
    pub tools: Vec<ToolInfo>,
    /// What the gate said when the turn was added.
    pub gate: RecordedGate,
}

impl StoredTurn {
    fn new(turn_id: TurnId, r: TurnRecord) -> Self {
        StoredTurn {
            turn_id,
            user: r.user,
            assistant: r.assistant,
            time: r.time,
            tools: r
                .tools
                .into_iter()
                .map(|t| ToolInfo {
                    name: t.name,
                    call_id: t.call_id,
                    arguments: t.arguments,
                    result_bytes: t.result_bytes,
                })
                .collect(),
            gate: RecordedGate {
                topic: if r.gate.switch { Topic::Switch } else { Topic::Continue },
                overlap: r.gate.overlap,
                new_ratio: r.gate.new_ratio,
                deictic: r.gate.deictic,
                segment_start: r.segment_start,
            },
        }
    }

    /// This turn as a line of the canonical JSONL format.
    pub fn to_canonical(&self, session: &str) -> CanonicalLine {
        CanonicalLine {
            session: session.to_string(),
            turn: Some(u64::from(self.turn_id)),
            user: self.user.clone(),
            assistant: self.assistant.clone(),
            time: self.time.clone(),
            tools: self
                .tools
                .iter()
                .map(|t| CanonicalTool {
                    name: t.name.clone(),
                    call_id: t.call_id.clone(),
                    arguments: t.arguments.clone(),
                    result_bytes: t.result_bytes,
                    // The output is evidence, not part of the turn: `export` reads it.
                    result: None,
                })
                .collect(),
        }
    }
}

/// The summary of the session `name`.
pub(crate) fn info(index: &Index, name: &str) -> Result<SessionRecord> {
    let view = index.store().read()?;
    let (_, record) = view.session_by_name(name)?.ok_or_else(|| unknown(name))?;
    Ok(record)
}

/// The stored turn `turn_id` of the session `name`, whole; `None` past its last turn.
pub(crate) fn turn(index: &Index, name: &str, turn_id: TurnId) -> Result<Option<StoredTurn>> {
    let view = index.store().read()?;
    let (id, _) = view.session_by_name(name)?.ok_or_else(|| unknown(name))?;
    Ok(view.turn_record(id, turn_id)?.map(|r| StoredTurn::new(turn_id, r)))
}

/// Calls `each` with every turn of the session `name` in order, or with the error of a turn
/// whose record is damaged (kind `corrupt`), [`EXPORT_CHUNK`] turns per read transaction.
/// Other errors end the walk.
pub(crate) fn for_each_turn(
    index: &Index,
    name: &str,
    mut each: impl FnMut(TurnId, Result<StoredTurn>) -> Result<()>,
) -> Result<()> {
    let mut next = 0;
    loop {
        let view = index.store().read()?;
        let (id, record) = view.session_by_name(name)?.ok_or_else(|| unknown(name))?;
        let end = record.turn_count.min(next + EXPORT_CHUNK);
        for turn_id in next..end {
            let stored = match view.turn_record(id, turn_id) {
                Ok(Some(stored)) => Ok(StoredTurn::new(turn_id, stored)),
                Ok(None) => Err(crate::store::Error::Corrupt {
                    what: format!("turn {turn_id} of session {name:?} is missing"),
                }
                .into()),
                Err(e @ crate::store::Error::Corrupt { .. }) => Err(e.into()),
                Err(e) => return Err(e.into()),
            };
            each(turn_id, stored)?;
        }
        if end >= record.turn_count {
            return Ok(());
        }
        next = end;
    }
}

fn unknown(name: &str) -> Error {
    Error::UnknownSession { name: name.to_string() }
}
