//! Whether the text an index holds was redacted (`crate::redact`): recorded with the writes
//! that store text, so a later run knows what the history was made with (`stats`, `redact`).

use super::error::{Error, corrupt};
use super::view::{Source, View, WriteSource};
use redb::{ReadableTable, ReadableTableMetadata};
use serde::{Deserialize, Serialize};

const REDACTION_KEY: &str = "redaction";

/// How the text of an index was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum History {
    /// Every text was redacted as it was written (or `ctxgate redact` rewrote it).
    Redacted,
    /// No text was redacted.
    Raw,
    /// Some text was written without redaction (`--no-redact`, or by a ctxgate before it
    /// redacted): `ctxgate redact` rewrites it.
    Mixed,
}

/// What the index records of its redaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedactionRecord {
    /// How its text was written.
    pub history: History,
    /// The rules of the last redacting write ([`crate::redact::RULES_VERSION`]).
    pub rules: Option<String>,
}

impl<S: Source> View<S> {
    /// What the index records of its redaction; `None` for one that holds nothing, or was last
    /// written by a ctxgate that did not redact.
    pub fn redaction(&self) -> Result<Option<RedactionRecord>, Error> {
        match self.tables.meta.get(REDACTION_KEY)? {
            Some(bytes) => postcard::from_bytes(bytes.value()).map(Some).map_err(|e| corrupt("redaction", e)),
            None => Ok(None),
        }
    }
}

impl View<WriteSource<'_>> {
    /// Records that this transaction writes text, redacted or not; call it before the text is
    /// written. Rewrites the record only when it changes.
    pub fn note_text_written(&mut self, redacted: bool) -> Result<(), Error> {
        let before = self.redaction()?;
        let empty = || -> Result<bool, Error> {
            Ok(self.tables.sessions.len()? == 0 && self.tables.evidence.len()? == 0)
        };
        let history = match (before.as_ref().map(|r| r.history), redacted) {
            (Some(History::Redacted), true) => History::Redacted,
            (Some(History::Raw), false) => History::Raw,
            (Some(History::Mixed), _) => History::Mixed,
            (Some(_), _) => History::Mixed,
            // Nothing recorded: a new index, or one an older ctxgate wrote unredacted.
            (None, true) => if empty()? { History::Redacted } else { History::Mixed },
            (None, false) => History::Raw,
        };
        let rules = match redacted {
            true => Some(crate::redact::RULES_VERSION.to_string()),
            false => before.as_ref().and_then(|r| r.rules.clone()),
        };
        self.set_redaction(&RedactionRecord { history, rules }, before.as_ref())
    }

    /// Records `record` (after `ctxgate redact`, say), unless it is what `before` holds.
    pub fn set_redaction(&mut self, record: &RedactionRecord, before: Option<&RedactionRecord>) -> Result<(), Error> {
        if before == Some(record) {
            return Ok(());
        }
        let bytes = postcard::to_allocvec(record).map_err(|e| corrupt("redaction", e))?;
        self.tables.meta.insert(REDACTION_KEY, bytes.as_slice())?;
        Ok(())
    }
}

