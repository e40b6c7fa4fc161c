//! Projections (DESIGN §4): what of a document enters the model's context.
//!
//! Facts are copies of values at their pointers, never rewritten: the value in `facts` under
//! key `/a/b` serializes to exactly the bytes of the document's value at `/a/b` (both as
//! normalized JSON: compact, members in document order). Every part of the document that is not
//! a fact is listed in `omitted_from_context` with its pointer and size, so the model knows it
//! exists and can read it by `evidence_ref`. A document no longer than its facts and omissions
//! is given whole instead, as `content`. The same document and spec give the same bytes.

use super::pointer::{self, join, normalized_len};
use super::reference::EvidenceRef;
use super::spec::{DEFAULT_SCHEMA_VERSION, KindSpec, Spec};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Without a spec, a value this small (normalized bytes) is kept whole as a fact.
pub const SMALL_VALUE_BYTES: u64 = 256;
/// Without a spec, facts stop at this many bytes; later parts are omitted.
pub const DEFAULT_FACT_BYTES: u64 = 4096;
/// Without a spec, an object with more members than this is omitted whole rather than listed
/// member by member.
pub const MAX_LISTED_MEMBERS: usize = 64;
/// Lines of a text document's head kept as a fact, unless its kind says otherwise.
pub const DEFAULT_HEAD_LINES: usize = 20;
/// Most bytes of a text document's head.
pub const MAX_HEAD_BYTES: usize = 2048;

/// The envelope of DESIGN §4. Empty lists and maps are left out when it is serialized (every
/// key costs the context tokens) and read back as empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Projection {
    /// The spec's schema version, or [`DEFAULT_SCHEMA_VERSION`].
    pub schema_version: String,
    /// The kind of evidence (a spec kind, or `json`, `text`, `binary`).
    pub kind: String,
    /// Where the full document is, relative to the evidence root.
    pub evidence_ref: String,
    /// The whole document (its JSON value, or its text), when that is no longer than its facts
    /// and omissions: then `facts` and `omitted_from_context` are empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    /// Exact values by JSON pointer (for text: its head and sizes).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub facts: Map<String, Value>,
    /// Every part left out, with its size and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub omitted_from_context: Vec<Omitted>,
    /// Fields the spec names that are missing or null.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_unknowns: Vec<Unknown>,
    /// Decisions the evidence does not support.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_decisions: Vec<Blocked>,
    /// Claims the model must not make from these facts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_constraints: Vec<String>,
    /// Where the model is free to decide.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_space: Vec<String>,
}

/// A part of the document left out of the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Omitted {
    /// The part's JSON pointer (JSON and binary documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pointer: Option<String>,
    /// The lines left out, `first-last` from 1 (text documents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<String>,
    /// Why it was left out.
    pub reason: String,
    /// Elements, if it is an array.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// Members, if it is an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys: Option<u64>,
    /// Normalized JSON bytes (or text bytes).
    pub bytes: u64,
}

/// A field the spec names that the document does not give.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Unknown {
    /// The field.
    pub pointer: String,
    /// `missing` or `null`.
    pub state: String,
    /// What is unknown, from the spec.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// A decision the evidence does not support.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Blocked {
    /// The decision.
    pub decision: String,
    /// The field whose value (or absence) blocks it.
    pub pointer: String,
    /// What the model must not do.
    pub message: String,
}

/// A stored document as the projection sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Document {
    /// A JSON document.
    Json(Value),
    /// UTF-8 text that is not JSON (SQL, logs, test output).
    Text(String),
    /// Anything else: only its size is known to the context.
    Binary(u64),
}

impl Document {
    /// Reads `bytes`: JSON if it parses as a JSON object or array, else text if UTF-8.
    pub fn parse(bytes: &[u8]) -> Document {
        let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
        if matches!(first, Some(b'{' | b'['))
            && let Ok(value) = serde_json::from_slice::<Value>(bytes)
        {
            return Document::Json(value);
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Document::Text(text.to_string()),
            Err(_) => Document::Binary(bytes.len() as u64),
        }
    }

    fn default_kind(&self) -> &'static str {
        match self {
            Document::Json(_) => "json",
            Document::Text(_) => "text",
            Document::Binary(_) => "binary",
        }
    }
}

/// The kind rules a document is projected with.
pub fn choose_kind<'s>(
    reference: &EvidenceRef,
    spec: Option<&'s Spec>,
    kind: Option<&str>,
) -> Result<Option<&'s KindSpec>, String> {
    match (spec, kind) {
        (Some(spec), Some(name)) => spec.kind(name).map(Some).ok_or_else(|| {
            format!("kind {name:?} is not in the projection spec (it has: {})", spec.kind_names().join(", "))
        }),
        (Some(spec), None) => Ok(spec.kind_for_ref(reference.as_str())),
        (None, _) => Ok(None),
    }
}

/// Projects `doc` stored at `reference`: its facts and omissions, or the document whole if that
/// is no longer.
///
/// # Errors
/// A message if `kind` is given and the spec does not define it.
pub fn project(
    reference: &EvidenceRef,
    doc: &Document,
    spec: Option<&Spec>,
    kind: Option<&str>,
) -> Result<Projection, String> {
    Ok(whole_if_no_longer(doc, project_parts(reference, doc, spec, kind)?))
}

/// The projection by facts and omissions.
fn project_parts(
    reference: &EvidenceRef,
    doc: &Document,
    spec: Option<&Spec>,
    kind: Option<&str>,
) -> Result<Projection, String> {
    let rules = choose_kind(reference, spec, kind)?;
    let mut projection = Projection {
        schema_version: spec.map_or(DEFAULT_SCHEMA_VERSION, |s| s.schema_version.as_str()).to_string(),
        kind: rules.map(|r| r.kind.as_str()).or(kind).unwrap_or(doc.default_kind()).to_string(),
        evidence_ref: reference.as_str().to_string(),
        content: None,
        facts: Map::new(),
        omitted_from_context: Vec::new(),
        known_unknowns: Vec::new(),
        blocked_decisions: Vec::new(),
        claim_constraints: rules.map(|r| r.claim_constraints.clone()).unwrap_or_default(),
        agent_space: rules.map(|r| r.agent_space.clone()).unwrap_or_default(),
    };
    match doc {
        Document::Json(value) => match rules {
            Some(rules) => {
                SpecWalk::new(rules, &mut projection).walk(value, &mut Vec::new(), None);
                judge_rules(value, rules, &mut projection);
            }
            None => DefaultWalk { budget: DEFAULT_FACT_BYTES, projection: &mut projection }
                .walk(value, &mut Vec::new()),
        },
        Document::Text(text) => {
            let head_lines = rules.and_then(|r| r.head_lines).unwrap_or(DEFAULT_HEAD_LINES);
            project_text(text, head_lines, &mut projection);
        }
        Document::Binary(bytes) => {
            projection.facts.insert("bytes".into(), Value::from(*bytes));
            projection.omitted_from_context.push(Omitted {
                pointer: Some(String::new()),
                lines: None,
                reason: "binary content: read it by evidence_ref".into(),
                rows: None,
                keys: None,
                bytes: *bytes,
            });
        }
    }
    Ok(projection)
}

/// `projection` with the document itself in place of its facts and omissions, if that is no
/// longer as compact JSON (in characters, what the token estimate counts; ties go to the
/// document): a small document costs what it is, not an envelope of pointers around it. Unknowns,
/// blocked decisions and the spec's text stay, so a stored projection is refitted without its
/// spec.
pub fn whole_if_no_longer(doc: &Document, projection: Projection) -> Projection {
    let projected = json_chars(&projection);
    // A character is at most four bytes: a document over four times the projection's length in
    // bytes cannot be shorter, and is not copied to find out.
    let limit = 4 * projected as u64;
    let content = match doc {
        Document::Json(value) if !longer_than(value, limit) => value.clone(),
        Document::Text(text) if text.len() as u64 <= limit => Value::from(text.as_str()),
        _ => return projection,
    };
    let whole = Projection {
        content: Some(content),
        facts: Map::new(),
        omitted_from_context: Vec::new(),
        ..projection.clone()
    };
    if json_chars(&whole) <= projected { whole } else { projection }
}

/// Whether `value` is over `limit` bytes as compact JSON; counting stops there.
fn longer_than(value: &Value, limit: u64) -> bool {
    struct Capped(u64);
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.checked_sub(buf.len() as u64).ok_or(std::io::ErrorKind::WriteZero)?;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    serde_json::to_writer(&mut Capped(limit), value).is_err()
}

/// Characters of `projection` as compact JSON.
fn json_chars(projection: &Projection) -> usize {
    // A projection has string keys only: it always serializes.
    serde_json::to_string(projection).map_or(usize::MAX, |json| json.chars().count())
}

fn omitted(path: &[String], value: &Value, reason: String) -> Omitted {
    Omitted {
        pointer: Some(join(path)),
        lines: None,
        reason,
        rows: value.as_array().map(|a| a.len() as u64),
        keys: value.as_object().map(|o| o.len() as u64),
        bytes: normalized_len(value),
    }
}

/// Walks a document by a kind's `facts` and `omit` rules.
struct SpecWalk<'a> {
    facts: Vec<Vec<String>>,
    omit: Vec<(Vec<String>, &'a str)>,
    unlisted: String,
    projection: &'a mut Projection,
}

impl<'a> SpecWalk<'a> {
    fn new(rules: &'a KindSpec, projection: &'a mut Projection) -> Self {
        // `Spec::parse` checked every pointer.
        let parse = |p: &str| pointer::segments(p).unwrap_or_default();
        SpecWalk {
            facts: rules.facts.iter().map(|p| parse(p)).collect(),
            omit: rules.omit.iter().map(|o| (parse(&o.pointer), o.reason.as_str())).collect(),
            unlisted: format!("not among the facts of kind {}: read it by evidence_ref", rules.kind),
            projection,
        }
    }

    fn walk(&mut self, node: &Value, path: &mut Vec<String>, inherited: Option<&'a str>) {
        if self.facts.iter().any(|f| pointer::matches(f, path)) {
            self.projection.facts.insert(join(path), node.clone());
            return;
        }
        let reason = self.omit.iter().find(|(p, _)| pointer::matches(p, path)).map(|(_, r)| *r).or(inherited);
        let below =
            self.facts.iter().chain(self.omit.iter().map(|(p, _)| p)).any(|p| pointer::is_below(p, path));
        let children = pointer::children(node);
        if below && !children.is_empty() {
            for (segment, child) in children {
                path.push(segment);
                self.walk(child, path, reason);
                path.pop();
            }
            return;
        }
        let reason = reason.map_or_else(|| self.unlisted.clone(), str::to_string);
        self.projection.omitted_from_context.push(omitted(path, node, reason));
    }
}

/// Known unknowns and blocked decisions of a kind, in rule order.
fn judge_rules(doc: &Value, rules: &KindSpec, projection: &mut Projection) {
    for rule in &rules.known_unknowns {
        for (path, value) in pointer::resolve(doc, &pointer::segments(&rule.pointer).unwrap_or_default()) {
            let state = match value {
                None => "missing",
                Some(Value::Null) => "null",
                Some(_) => continue,
            };
            projection.known_unknowns.push(Unknown {
                pointer: join(&path),
                state: state.into(),
                note: rule.note.clone(),
            });
        }
    }
    for rule in &rules.blocked_decisions {
        for (path, value) in pointer::resolve(doc, &pointer::segments(&rule.pointer).unwrap_or_default()) {
            let blocked = match &rule.equals {
                Some(expected) => value == Some(expected),
                None => matches!(value, None | Some(Value::Null)),
            };
            if blocked {
                projection.blocked_decisions.push(Blocked {
                    decision: rule.decision.clone(),
                    pointer: join(&path),
                    message: rule.message.clone(),
                });
            }
        }
    }
}

/// The projection without a spec: small values kept, large ones omitted with their size.
struct DefaultWalk<'a> {
    budget: u64,
    projection: &'a mut Projection,
}

impl DefaultWalk<'_> {
    fn walk(&mut self, node: &Value, path: &mut Vec<String>) {
        let size = normalized_len(node);
        if size <= SMALL_VALUE_BYTES {
            if size <= self.budget {
                self.budget -= size;
                self.projection.facts.insert(join(path), node.clone());
            } else {
                let reason =
                    format!("past the first {DEFAULT_FACT_BYTES} bytes of facts: read it by evidence_ref");
                self.projection.omitted_from_context.push(omitted(path, node, reason));
            }
            return;
        }
        let reason = match node {
            Value::Object(map) if map.len() <= MAX_LISTED_MEMBERS => {
                for (key, child) in map {
                    path.push(key.clone());
                    self.walk(child, path);
                    path.pop();
                }
                return;
            }
            Value::Object(_) => "large object",
            Value::Array(_) => "large array",
            _ => "long string",
        };
        self.projection.omitted_from_context.push(omitted(
            path,
            node,
            format!("{reason}: read it by evidence_ref"),
        ));
    }
}

/// A text's head (whole lines, at most `head_lines` and [`MAX_HEAD_BYTES`]) and sizes as facts,
/// the rest omitted by line range.
fn project_text(text: &str, head_lines: usize, projection: &mut Projection) {
    let mut end = 0;
    let mut kept_lines = 0;
    for line in text.split_inclusive('\n').take(head_lines) {
        if end + line.len() > MAX_HEAD_BYTES {
            break;
        }
        end += line.len();
        kept_lines += 1;
    }
    if kept_lines == 0 && !text.is_empty() && head_lines > 0 {
        // One very long first line: keep its start, cut at a character boundary.
        end = text.floor_char_boundary(MAX_HEAD_BYTES);
    }
    let line_count = text.split_inclusive('\n').count() as u64;
    let facts = &mut projection.facts;
    facts.insert("head".into(), Value::from(&text[..end]));
    facts.insert("line_count".into(), Value::from(line_count));
    facts.insert("bytes".into(), Value::from(text.len() as u64));
    if end < text.len() {
        let first_omitted = text[..end].matches('\n').count() as u64 + 1;
        projection.omitted_from_context.push(Omitted {
            pointer: None,
            lines: Some(format!("{first_omitted}-{line_count}")),
            reason: "the rest of the text: read it by evidence_ref".into(),
            rows: None,
            keys: None,
            bytes: (text.len() - end) as u64,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn r(s: &str) -> EvidenceRef {
        EvidenceRef::parse(s).unwrap()
    }

    fn spec() -> Spec {
        Spec::parse(
            br#"{"schema_version": "t/v1", "kinds": [{
                "kind": "k", "match": ["*.json"],
                "facts": ["/a", "/t/*/cols"],
                "omit": [{"pointer": "/rows", "reason": "rows"}],
                "known_unknowns": [{"pointer": "/t/*/stats", "note": "no stats"}, {"pointer": "/z"}],
                "blocked_decisions": [
                    {"decision": "d1", "pointer": "/src", "equals": "missing", "message": "m1"},
                    {"decision": "d2", "pointer": "/scope", "missing": true, "message": "m2"}],
                "claim_constraints": ["c"], "agent_space": ["s"]}]}"#,
        )
        .unwrap()
    }

    #[test]
    fn spec_projection() {
        let doc = json!({
            "a": 1.5, "rows": [[1], [2]], "src": "missing", "other": {"x": 1},
            "t": {"db.t1": {"cols": ["id"], "stats": null, "ddl": "create"}, "db.t2": {"cols": []}}
        });
        let p = project_parts(&r("x.json"), &Document::Json(doc.clone()), Some(&spec()), None).unwrap();
        assert_eq!(p.kind, "k");
        assert_eq!(p.schema_version, "t/v1");
        assert_eq!(p.facts.keys().collect::<Vec<_>>(), ["/a", "/t/db.t1/cols", "/t/db.t2/cols"]);
        let omitted: Vec<(&str, &str)> =
            p.omitted_from_context.iter().map(|o| (o.pointer.as_deref().unwrap(), &o.reason[..4])).collect();
        assert_eq!(
            omitted,
            [
                ("/rows", "rows"),
                ("/src", "not "),
                ("/other", "not "),
                ("/t/db.t1/stats", "not "),
                ("/t/db.t1/ddl", "not ")
            ]
        );
        assert_eq!(p.omitted_from_context[0].rows, Some(2));
        let unknowns: Vec<(&str, &str)> =
            p.known_unknowns.iter().map(|u| (u.pointer.as_str(), u.state.as_str())).collect();
        assert_eq!(unknowns, [("/t/db.t1/stats", "null"), ("/t/db.t2/stats", "missing"), ("/z", "missing")]);
        let blocked: Vec<&str> = p.blocked_decisions.iter().map(|b| b.decision.as_str()).collect();
        assert_eq!(blocked, ["d1", "d2"]);
        assert_eq!((&p.claim_constraints, &p.agent_space), (&vec!["c".to_string()], &vec!["s".to_string()]));

        // This document is shorter than its facts and omissions: it is given whole, and what
        // the spec says of it stays.
        let whole = project(&r("x.json"), &Document::Json(doc.clone()), Some(&spec()), None).unwrap();
        assert_eq!(whole.content, Some(doc));
        assert!(whole.facts.is_empty() && whole.omitted_from_context.is_empty());
        assert_eq!(
            (&whole.known_unknowns, &whole.blocked_decisions, &whole.claim_constraints, &whole.agent_space),
            (&p.known_unknowns, &p.blocked_decisions, &p.claim_constraints, &p.agent_space)
        );
        assert_eq!((&whole.kind, &whole.schema_version), (&p.kind, &p.schema_version));
        assert!(json_chars(&whole) < json_chars(&p));
    }

    #[test]
    fn default_projection_keeps_small_omits_large() {
        let rows: Vec<Value> = (0..100).map(|i| json!({"id": i, "name": format!("row {i}")})).collect();
        let doc = json!({"time_ms": 12, "sql": "x".repeat(300), "rows": rows, "meta": {"ok": true}});
        let p = project(&r("a.json"), &Document::Json(doc), None, None).unwrap();
        assert_eq!(p.kind, "json");
        assert_eq!(p.schema_version, DEFAULT_SCHEMA_VERSION);
        assert_eq!(p.facts.keys().collect::<Vec<_>>(), ["/time_ms", "/meta"]);
        let omitted: Vec<&str> =
            p.omitted_from_context.iter().map(|o| o.pointer.as_deref().unwrap()).collect();
        assert_eq!(omitted, ["/sql", "/rows"]);
        assert_eq!(p.omitted_from_context[1].rows, Some(100));
    }

    #[test]
    fn text_projection_keeps_the_head() {
        let text: String = (1..=50).map(|i| format!("line {i}\n")).collect();
        let p = project(&r("a.log"), &Document::Text(text.clone()), None, None).unwrap();
        assert_eq!(p.kind, "text");
        let head = p.facts["head"].as_str().unwrap();
        assert!(text.starts_with(head) && head.lines().count() == DEFAULT_HEAD_LINES);
        assert_eq!(p.facts["line_count"], json!(50));
        assert_eq!(p.omitted_from_context[0].lines.as_deref(), Some("21-50"));
        assert_eq!(p.omitted_from_context[0].bytes as usize, text.len() - head.len());

        let long = "é".repeat(5000);
        let p = project(&r("a.txt"), &Document::Text(long.clone()), None, None).unwrap();
        assert!(long.starts_with(p.facts["head"].as_str().unwrap()));
        assert_eq!(p.omitted_from_context[0].lines.as_deref(), Some("1-1"));
    }

    #[test]
    fn unknown_kind_is_an_error() {
        let err = project(&r("a.json"), &Document::Json(json!({})), Some(&spec()), Some("nope")).unwrap_err();
        assert!(err.contains("\"nope\"") && err.contains("k"), "{err}");
    }

    #[test]
    fn document_kinds() {
        assert!(matches!(Document::parse(b" {\"a\": 1}"), Document::Json(_)));
        assert!(matches!(Document::parse(b"{not json"), Document::Text(_)));
        assert!(matches!(Document::parse(b"42"), Document::Text(_)));
        assert!(matches!(Document::parse(b"\xff\xfe"), Document::Binary(2)));
    }

    fn json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            "[a-z é中/~_]{0,400}".prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 400, 80, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..80).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z/~_.]{0,6}", inner, 0..80)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The envelope `parts` would be with `doc` whole in it.
    fn with_content(parts: &Projection, content: Value) -> Projection {
        Projection {
            content: Some(content),
            facts: Map::new(),
            omitted_from_context: Vec::new(),
            ..parts.clone()
        }
    }

    /// Token estimate of a projection as stored and selected: compact JSON.
    fn tokens(projection: &Projection) -> u32 {
        use crate::tokens::TokenEstimator;
        crate::tokens::CharEstimator.estimate(&serde_json::to_string(projection).unwrap())
    }

    #[test]
    fn a_small_tool_output_is_given_whole() {
        use crate::tokens::TokenEstimator;
        let text = "test result: ok. 12 passed; 0 failed\n\n";
        assert_eq!(text.len(), 38);
        let reference = r("tool-output/s/call_1.txt");
        let p = project(&reference, &Document::Text(text.into()), None, None).unwrap();
        assert_eq!(p.content, Some(Value::from(text)), "the document exactly");
        let json = serde_json::to_string(&p).unwrap();
        let envelope = r#"{"schema_version":"ctxgate-evidence/v1","kind":"text","evidence_ref":"tool-output/s/call_1.txt","content":""}"#;
        assert_eq!(
            json,
            envelope.replace(r#""content":"""#, r#""content":"test result: ok. 12 passed; 0 failed\n\n""#)
        );
        // The document's estimate, its two escaped newlines and the fixed envelope.
        let estimate = |s: &str| crate::tokens::CharEstimator.estimate(s);
        assert!(tokens(&p) <= estimate(text) + estimate("\\\\") + estimate(envelope), "{json}");
        let parts = project_parts(&reference, &Document::Text(text.into()), None, None).unwrap();
        assert!(tokens(&p) < tokens(&parts), "the head, line count and size cost more");
        // Read back as it is stored: the keys left out are empty.
        assert_eq!(serde_json::from_str::<Projection>(&json).unwrap(), p);
    }

    #[test]
    fn a_small_json_document_is_given_whole() {
        use crate::tokens::TokenEstimator;
        let bytes = br#"{"ok": true}"#;
        assert_eq!(bytes.len(), 12);
        let doc = Document::parse(bytes);
        let p = project(&r("a.json"), &doc, None, None).unwrap();
        assert_eq!(p.content, Some(json!({"ok": true})), "the document exactly");
        assert!(p.facts.is_empty() && p.omitted_from_context.is_empty());
        let json = serde_json::to_string(&p).unwrap();
        let envelope =
            r#"{"schema_version":"ctxgate-evidence/v1","kind":"json","evidence_ref":"a.json","content":}"#;
        assert_eq!(json, envelope.replace(":}", r#":{"ok":true}}"#));
        let estimate = |s: &str| crate::tokens::CharEstimator.estimate(s);
        assert!(tokens(&p) <= estimate(std::str::from_utf8(bytes).unwrap()) + estimate(envelope), "{json}");
        assert_eq!(serde_json::from_str::<Projection>(&json).unwrap(), p);
    }

    #[test]
    fn text_is_given_whole_exactly_while_that_is_no_longer() {
        let (mut whole, mut headed) = (0, 0);
        for lines in 0..80 {
            let text: String = (1..=lines).map(|i| format!("step {i} finished\n")).collect();
            let doc = Document::Text(text.clone());
            let p = project(&r("run.log"), &doc, None, None).unwrap();
            let parts = project_parts(&r("run.log"), &doc, None, None).unwrap();
            let content = with_content(&parts, Value::from(text));
            assert_eq!(json_chars(&p), json_chars(&parts).min(json_chars(&content)), "{lines} lines");
            if p.content.is_some() {
                assert_eq!(p, content);
                whole += 1;
            } else {
                assert_eq!(p, parts);
                headed += 1;
            }
        }
        assert!(whole > 0 && headed > 0, "{whole} whole, {headed} by their head");
    }

    proptest::proptest! {
        /// The default projection of any document: facts are the values at their pointers,
        /// every leaf is in exactly one fact or omission, facts stay within their cap; the
        /// document is given whole exactly when that is no longer.
        #[test]
        fn default_projection_invariants(doc in json()) {
            let chosen = project(&r("x.json"), &Document::Json(doc.clone()), None, None).unwrap();
            let p = project_parts(&r("x.json"), &Document::Json(doc.clone()), None, None).unwrap();
            let whole = with_content(&p, doc.clone());
            proptest::prop_assert_eq!(json_chars(&chosen), json_chars(&p).min(json_chars(&whole)));
            proptest::prop_assert!(chosen == p || chosen == whole);
            let mut fact_bytes = 0;
            for (pointer, fact) in &p.facts {
                proptest::prop_assert_eq!(doc.pointer(pointer), Some(fact));
                fact_bytes += normalized_len(fact);
            }
            proptest::prop_assert!(fact_bytes <= DEFAULT_FACT_BYTES);
            let parts: Vec<Vec<String>> = p
                .facts
                .keys()
                .cloned()
                .chain(p.omitted_from_context.iter().map(|o| o.pointer.clone().unwrap()))
                .map(|q| pointer::segments(&q).unwrap())
                .collect();
            let mut stack = vec![(Vec::<String>::new(), &doc)];
            while let Some((path, node)) = stack.pop() {
                let children = pointer::children(node);
                if children.is_empty() {
                    let covering = parts.iter().filter(|q| path.starts_with(q)).count();
                    proptest::prop_assert_eq!(covering, 1, "{}", join(&path));
                }
                for (segment, child) in children {
                    let mut child_path = path.clone();
                    child_path.push(segment);
                    stack.push((child_path, child));
                }
            }
        }
    }
}
