//! `verify --secrets`: what secrets an index and its evidence root hold, by rule and place,
//! never the secret itself (an index written with `--no-redact`, or before ctxgate redacted).

use crate::error::Result;
use crate::evidence::{EvidenceRef, EvidenceRoot};
use crate::index::Index;
use crate::redact;
use serde::Serialize;
use std::path::Path;

/// Where a secret was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SecretFinding {
    /// The id of the rule that found it.
    pub rule: String,
    /// Its session, for a turn or a session's tool output.
    pub session: Option<String>,
    /// Its turn.
    pub turn: Option<u32>,
    /// What holds it: `user`, `assistant`, `tool arguments`, `evidence projection` or
    /// `evidence document`.
    pub field: &'static str,
    /// The evidence document's ref.
    pub evidence_ref: Option<String>,
}

/// [`crate::Gatekeeper::scan_secrets`].
pub(crate) fn scan_secrets(index: &Index) -> Result<Vec<SecretFinding>> {
    let view = index.store().read()?;
    let mut found = Vec::new();
    let mut names = std::collections::HashMap::new();
    for (id, session) in view.sessions()? {
        names.insert(id, session.name.clone());
        for turn in 0..session.turn_count {
            let Some(record) = view.turn_record(id, turn)? else { continue };
            let mut texts = vec![("user", record.user.as_str()), ("assistant", record.assistant.as_str())];
            texts.extend(record.tools.iter().map(|t| ("tool arguments", t.arguments.as_str())));
            for (field, text) in texts {
                found.extend(findings(text).into_iter().map(|rule| SecretFinding {
                    rule,
                    session: Some(session.name.clone()),
                    turn: Some(turn),
                    field,
                    evidence_ref: None,
                }));
            }
        }
    }
    let root = view.evidence_meta()?.root.and_then(|root| EvidenceRoot::open(Path::new(&root)).ok());
    let mut documents = Vec::new();
    view.for_each_evidence(|_, record| {
        documents.push(record);
        true
    })?;
    drop(view);
    for record in documents {
        let session = record.session.and_then(|id| names.get(&id).cloned());
        let at = |rule: String, field| SecretFinding {
            rule,
            session: session.clone(),
            turn: None,
            field,
            evidence_ref: Some(record.reference.clone()),
        };
        found.extend(findings(&record.projection).into_iter().map(|rule| at(rule, "evidence projection")));
        let bytes = root
            .as_ref()
            .and_then(|root| root.read(&EvidenceRef::parse(&record.reference).ok()?).ok())
            .map(|document| document.bytes);
        if let Some(text) = bytes.as_deref().and_then(|b| std::str::from_utf8(b).ok()) {
            found.extend(findings(text).into_iter().map(|rule| at(rule, "evidence document")));
        }
    }
    Ok(found)
}

/// The rules of the secrets `text` holds, as stored (JSON strings by value).
fn findings(text: &str) -> Vec<String> {
    let mut rules: Vec<String> = redact::find(text).into_iter().map(|f| f.rule.to_string()).collect();
    if rules.is_empty() && redact::redact_text_or_json(text) != text {
        rules.push(json_rule(text));
    }
    rules
}

/// The rule that redacts a JSON text's strings (found by value, not in the escaped text).
fn json_rule(text: &str) -> String {
    let redacted = redact::redact_text_or_json(text);
    let start = redacted.find(redact::MARKER_PREFIX).map_or(0, |i| i + redact::MARKER_PREFIX.len());
    redacted[start..].split(']').next().unwrap_or("secret").to_string()
}
