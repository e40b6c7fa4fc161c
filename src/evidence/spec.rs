//! Projection spec files: per-kind rules for what of a document enters the context.
//!
//! A spec is JSON (format and a complete example in `docs/evidence.md`):
//! ```json
//! {
//!   "schema_version": "sqlopt-evidence/v1",
//!   "kinds": [{
//!     "kind": "baseline_facts",
//!     "match": ["round_*/baseline.json"],
//!     "facts": ["/execution_time", "/result_schema/columns"],
//!     "omit": [{"pointer": "/result/rows", "reason": "result rows: read them by evidence_ref"}],
//!     "known_unknowns": [{"pointer": "/fallback_reason", "note": "why the baseline fell back"}],
//!     "blocked_decisions": [{"decision": "invent_shard_key",
//!        "pointer": "/distributed_context/shard_key_source", "equals": "missing",
//!        "message": "the shard key is unknown: do not invent one"}],
//!     "claim_constraints": ["..."],
//!     "agent_space": ["..."]
//!   }]
//! }
//! ```
//! Pointers are RFC 6901 with `*` segments matching every member or element. `match` globs
//! are matched against the evidence ref: `*` within one path component, `**` across them.

use super::pointer;
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// Schema version of projections made without a spec.
pub const DEFAULT_SCHEMA_VERSION: &str = "ctxgate-evidence/v1";

/// A parsed, checked projection spec.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// Written into every projection's `schema_version`.
    pub schema_version: String,
    /// The kinds, tried in order when matching a ref.
    pub kinds: Vec<KindSpec>,
}

/// The rules of one kind of evidence.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindSpec {
    /// The kind's name (the projection's `kind`).
    pub kind: String,
    /// Ref globs that select this kind when no kind is given.
    #[serde(default, rename = "match")]
    pub matches: Vec<String>,
    /// Pointers whose values are copied into `facts`.
    #[serde(default)]
    pub facts: Vec<String>,
    /// Parts left out, with the reason given to the model.
    #[serde(default)]
    pub omit: Vec<OmitRule>,
    /// Fields whose absence or null is reported as a known unknown.
    #[serde(default)]
    pub known_unknowns: Vec<UnknownRule>,
    /// Decisions the evidence does not support, and when.
    #[serde(default)]
    pub blocked_decisions: Vec<BlockRule>,
    /// Claims the model must not make from these facts (copied as written).
    #[serde(default)]
    pub claim_constraints: Vec<String>,
    /// Where the model is free to decide (copied as written).
    #[serde(default)]
    pub agent_space: Vec<String>,
    /// For text evidence: lines of the head kept as a fact (default 20).
    #[serde(default)]
    pub head_lines: Option<usize>,
}

/// A part left out of the context on purpose.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OmitRule {
    /// The part.
    pub pointer: String,
    /// Why, for the model.
    pub reason: String,
}

/// A field whose absence or null is worth saying.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnknownRule {
    /// The field.
    pub pointer: String,
    /// What is unknown when it is missing, for the model.
    #[serde(default)]
    pub note: String,
}

/// A decision blocked when a pointer equals a value, or is missing (absent or null).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockRule {
    /// The decision's name.
    pub decision: String,
    /// The field the rule looks at.
    pub pointer: String,
    /// Blocks when the field equals this value.
    #[serde(default)]
    pub equals: Option<Value>,
    /// Blocks when the field is absent or null.
    #[serde(default)]
    pub missing: bool,
    /// What the model must not do, and why.
    pub message: String,
}

/// A spec that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("projection spec {path}: {reason}")]
pub struct SpecError {
    /// The spec file.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl Spec {
    /// Reads and checks a spec file.
    ///
    /// # Errors
    /// [`SpecError`] naming the file: unreadable, not JSON of this shape, or inconsistent.
    pub fn load(path: &Path) -> Result<Spec, SpecError> {
        let error = |reason: String| SpecError { path: path.display().to_string(), reason };
        let bytes = std::fs::read(path).map_err(|e| error(e.to_string()))?;
        Spec::parse(&bytes).map_err(error)
    }

    /// Parses and checks a spec.
    ///
    /// # Errors
    /// A message saying what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<Spec, String> {
        let spec: Spec = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        spec.check()?;
        Ok(spec)
    }

    fn check(&self) -> Result<(), String> {
        if self.schema_version.trim().is_empty() {
            return Err("schema_version is empty".into());
        }
        let mut names = std::collections::BTreeSet::new();
        for kind in &self.kinds {
            if kind.kind.trim().is_empty() {
                return Err("a kind has an empty name".into());
            }
            if !names.insert(kind.kind.as_str()) {
                return Err(format!("kind {:?} is defined twice", kind.kind));
            }
            let pointers = kind
                .facts
                .iter()
                .chain(kind.omit.iter().map(|o| &o.pointer))
                .chain(kind.known_unknowns.iter().map(|u| &u.pointer))
                .chain(kind.blocked_decisions.iter().map(|b| &b.pointer));
            for p in pointers {
                pointer::segments(p).map_err(|e| format!("kind {:?}: {e}", kind.kind))?;
            }
            for rule in &kind.blocked_decisions {
                if rule.missing == rule.equals.is_some() {
                    return Err(format!(
                        "kind {:?}, decision {:?}: give exactly one of \"equals\" and \"missing\": true",
                        kind.kind, rule.decision
                    ));
                }
            }
        }
        Ok(())
    }

    /// The kind named `name`.
    pub fn kind(&self, name: &str) -> Option<&KindSpec> {
        self.kinds.iter().find(|k| k.kind == name)
    }

    /// The first kind whose `match` globs match `reference`.
    pub fn kind_for_ref(&self, reference: &str) -> Option<&KindSpec> {
        self.kinds.iter().find(|k| k.matches.iter().any(|g| glob_matches(g, reference)))
    }

    /// The names of the kinds, for error messages.
    pub fn kind_names(&self) -> Vec<&str> {
        self.kinds.iter().map(|k| k.kind.as_str()).collect()
    }
}

/// Matches `text` against `glob`: `*` matches within a path component, `**` across them.
pub fn glob_matches(glob: &str, text: &str) -> bool {
    fn go(g: &[u8], t: &[u8]) -> bool {
        match g.first() {
            None => t.is_empty(),
            Some(b'*') if g.get(1) == Some(&b'*') => {
                let rest = &g[2..];
                // `**/` also matches no directory at all.
                if let Some(after) = rest.strip_prefix(b"/")
                    && go(after, t)
                {
                    return true;
                }
                (0..=t.len()).any(|i| go(rest, &t[i..]))
            }
            Some(b'*') => {
                let rest = &g[1..];
                for i in 0..=t.len() {
                    if go(rest, &t[i..]) {
                        return true;
                    }
                    if t.get(i) == Some(&b'/') {
                        break;
                    }
                }
                false
            }
            Some(&c) => t.first() == Some(&c) && go(&g[1..], &t[1..]),
        }
    }
    go(glob.as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_matches("round_*/baseline.json", "round_3/baseline.json"));
        assert!(!glob_matches("round_*/baseline.json", "round_3/x/baseline.json"));
        assert!(glob_matches("**/ddl.sql", "table_ctx/db.t/ddl.sql"));
        assert!(glob_matches("**/ddl.sql", "ddl.sql"));
        assert!(glob_matches("table_ctx.json", "table_ctx.json"));
        assert!(!glob_matches("table_ctx.json", "table_ctx.jsonl"));
    }

    #[test]
    fn checks() {
        let ok = br#"{"schema_version": "v1", "kinds": [{"kind": "a", "facts": ["/x"]}]}"#;
        assert_eq!(Spec::parse(ok).unwrap().kind("a").unwrap().facts, ["/x"]);
        for (bad, why) in [
            (r#"{"schema_version": "v1", "kinds": [{"kind": "a"}, {"kind": "a"}]}"#, "twice"),
            (r#"{"schema_version": "v1", "kinds": [{"kind": "a", "facts": ["x"]}]}"#, "start with '/'"),
            (r#"{"schema_version": "", "kinds": []}"#, "schema_version"),
            (r#"{"schema_version": "v1", "kinds": [], "extra": 1}"#, "unknown field"),
            (
                r#"{"schema_version": "v1", "kinds": [{"kind": "a", "blocked_decisions":
                    [{"decision": "d", "pointer": "/p", "message": "m"}]}]}"#,
                "exactly one",
            ),
        ] {
            let err = Spec::parse(bad.as_bytes()).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
