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
//! are matched against the evidence ref ([`globset`] syntax): `*` and `?` within one path
//! component, `**` as a whole component across them (`**/x` matches `x` too), `[ab]` and
//! `{a,b}` as alternatives. Each kind's globs are compiled once, when the spec is parsed, and
//! match in time linear in the ref (a backtracking matcher took 20 s for `*a*a*a*a*a*b`);
//! a spec may hold at most 1024 globs of at most 1024 bytes each.

use super::pointer;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;

/// Longest `match` glob a spec may hold, in bytes: as long as the longest ref.
const MAX_GLOB_BYTES: usize = super::MAX_REF_BYTES;

/// Most `match` globs a spec may hold, over all its kinds.
const MAX_GLOBS: usize = 1024;

/// Schema version of projections made without a spec.
pub const DEFAULT_SCHEMA_VERSION: &str = "ctxgate-evidence/v1";

/// A parsed, checked projection spec, its `match` globs compiled.
///
/// Built by [`Spec::parse`], [`Spec::load`] or deserializing (which checks and compiles the
/// same way). [`Spec::kind_for_ref`] uses the globs as they were when the spec was built.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "SpecFile")]
pub struct Spec {
    /// Written into every projection's `schema_version`.
    pub schema_version: String,
    /// The kinds, tried in order when matching a ref.
    pub kinds: Vec<KindSpec>,
    /// Each kind's `match` globs, compiled, in the order of `kinds`.
    matchers: Vec<GlobSet>,
}

impl PartialEq for Spec {
    fn eq(&self, other: &Spec) -> bool {
        // The matchers are compiled from the kinds.
        self.schema_version == other.schema_version && self.kinds == other.kinds
    }
}

/// A spec file as written, before it is checked.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SpecFile {
    schema_version: String,
    kinds: Vec<KindSpec>,
}

impl TryFrom<SpecFile> for Spec {
    type Error = String;

    fn try_from(file: SpecFile) -> Result<Spec, String> {
        check(&file)?;
        let matchers = file.kinds.iter().map(compile).collect::<Result<_, _>>()?;
        Ok(Spec { schema_version: file.schema_version, kinds: file.kinds, matchers })
    }
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
        // Through the file's shape, so a check's message is not given a JSON position.
        let file: SpecFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        Spec::try_from(file)
    }

    /// The kind named `name`.
    pub fn kind(&self, name: &str) -> Option<&KindSpec> {
        self.kinds.iter().find(|k| k.kind == name)
    }

    /// The first kind whose `match` globs match `reference`.
    pub fn kind_for_ref(&self, reference: &str) -> Option<&KindSpec> {
        let candidate = globset::Candidate::new(reference);
        self.kinds
            .iter()
            .zip(&self.matchers)
            .find(|(_, set)| set.is_match_candidate(&candidate))
            .map(|(k, _)| k)
    }

    /// The names of the kinds, for error messages.
    pub fn kind_names(&self) -> Vec<&str> {
        self.kinds.iter().map(|k| k.kind.as_str()).collect()
    }
}

/// Checks a spec file's kinds and pointers.
fn check(file: &SpecFile) -> Result<(), String> {
    if file.schema_version.trim().is_empty() {
        return Err("schema_version is empty".into());
    }
    let globs: usize = file.kinds.iter().map(|k| k.matches.len()).sum();
    if globs > MAX_GLOBS {
        return Err(format!("{globs} match globs: a spec may have at most {MAX_GLOBS}"));
    }
    let mut names = std::collections::BTreeSet::new();
    for kind in &file.kinds {
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

/// A kind's `match` globs as one set.
fn compile(kind: &KindSpec) -> Result<GlobSet, String> {
    let mut set = GlobSetBuilder::new();
    for glob in &kind.matches {
        if glob.len() > MAX_GLOB_BYTES {
            return Err(format!(
                "kind {:?}: a match glob of {} bytes: a glob may have at most {MAX_GLOB_BYTES}",
                kind.kind,
                glob.len()
            ));
        }
        set.add(
            compile_glob(glob)
                .map_err(|reason| format!("kind {:?}, match glob {glob:?}: {reason}", kind.kind))?,
        );
    }
    set.build().map_err(|e| format!("kind {:?}: match globs: {e}", kind.kind))
}

/// One glob: `*` stops at `/`, `**` crosses it.
fn compile_glob(glob: &str) -> Result<globset::Glob, String> {
    GlobBuilder::new(glob).literal_separator(true).build().map_err(|e| e.kind().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `text` matches `glob` compiled as a spec's globs are.
    fn glob_matches(glob: &str, text: &str) -> bool {
        compile_glob(glob).is_ok_and(|g| g.compile_matcher().is_match(text))
    }

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

    fn spec_matching(globs: &[(&str, &[&str])]) -> Spec {
        let kinds: Vec<Value> =
            globs.iter().map(|(kind, matches)| serde_json::json!({"kind": kind, "match": matches})).collect();
        let text = serde_json::json!({"schema_version": "v1", "kinds": kinds}).to_string();
        Spec::parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn kinds_are_found_by_their_globs_in_order() {
        let spec = spec_matching(&[
            ("baseline", &["round_*/baseline.json"]),
            ("ddl", &["**/ddl.sql", "schema/*.sql"]),
            ("any_json", &["**/*.json"]),
        ]);
        for (reference, kind) in [
            ("round_3/baseline.json", Some("baseline")),
            ("round_3/x/baseline.json", Some("any_json")),
            ("ddl.sql", Some("ddl")),
            ("a/b/ddl.sql", Some("ddl")),
            ("schema/t.sql", Some("ddl")),
            ("schema/x/t.sql", None),
            ("top.json", Some("any_json")),
            ("top.jsonl", None),
        ] {
            assert_eq!(spec.kind_for_ref(reference).map(|k| k.kind.as_str()), kind, "ref {reference}");
        }
        // Deserializing checks and compiles as `parse` does.
        let text = r#"{"schema_version": "v1", "kinds": [{"kind": "a", "match": ["x/*.json"]}]}"#;
        let spec: Spec = serde_json::from_str(text).unwrap();
        assert_eq!(spec.kind_for_ref("x/y.json").map(|k| k.kind.as_str()), Some("a"));
        assert!(serde_json::from_str::<Spec>(r#"{"schema_version": "", "kinds": []}"#).is_err());
    }

    /// Issue 23, finding 7: the hand-written matcher backtracked, `*a*a*a*a*a*b` against 200
    /// bytes took 20 s (six stars, more than a minute).
    #[test]
    fn pathological_globs_match_in_linear_time() {
        let spec = spec_matching(&[("five", &["*a*a*a*a*a*b"]), ("six", &["*a*a*a*a*a*a*b"])]);
        let no_match = "a".repeat(200);
        let both = format!("{no_match}b");
        let started = std::time::Instant::now();
        for _ in 0..100 {
            assert!(spec.kind_for_ref(&no_match).is_none());
            assert_eq!(spec.kind_for_ref(&both).map(|k| k.kind.as_str()), Some("five"));
        }
        let elapsed = started.elapsed();
        // One backtracking match took 20 s; a loaded machine can stall linear ones a second.
        assert!(elapsed < std::time::Duration::from_secs(5), "200 matches took {elapsed:?}");
    }

    #[test]
    fn absurd_globs_are_spec_errors() {
        let spec = |matches: Vec<String>| {
            let text =
                serde_json::json!({"schema_version": "v1", "kinds": [{"kind": "k", "match": matches}]});
            Spec::parse(text.to_string().as_bytes())
        };
        let long = "*a".repeat(MAX_GLOB_BYTES / 2 + 1);
        let err = spec(vec![long]).unwrap_err();
        assert!(err.contains("a match glob of 1026 bytes") && err.contains("at most 1024"), "{err}");
        assert!(err.len() < 200, "the message does not repeat the glob: {err}");
        assert!(spec(vec!["*a".repeat(MAX_GLOB_BYTES / 2)]).is_ok(), "1024 bytes are allowed");
        let err = spec((0..=MAX_GLOBS).map(|i| format!("d{i}/*.json")).collect()).unwrap_err();
        assert!(err.contains("1025 match globs") && err.contains("at most 1024"), "{err}");
        let err = spec(vec!["round_[3/x.json".into()]).unwrap_err();
        assert!(
            err.contains("kind \"k\", match glob \"round_[3/x.json\"") && err.contains("unclosed"),
            "{err}"
        );
    }
}
