//! The text a document is indexed by: keys and values of JSON, the text itself otherwise.

use super::projection::Document;
use serde_json::Value;

/// Most bytes of a document's text that are indexed (the head of a longer one).
pub const MAX_INDEXED_BYTES: usize = 8 * 1024 * 1024;

/// The indexable text of `doc`: for JSON every key and scalar value, one per line, and each
/// `snake_case`, `kebab-case` or dotted key again split into words, so `execution_time` is
/// found by "execution time". At most [`MAX_INDEXED_BYTES`].
pub fn indexed_text(doc: &Document) -> String {
    let mut out = String::new();
    match doc {
        Document::Json(value) => push_json(value, &mut out),
        Document::Text(text) => out.push_str(&text[..text.floor_char_boundary(MAX_INDEXED_BYTES)]),
        Document::Binary(_) => {}
    }
    if out.len() > MAX_INDEXED_BYTES {
        out.truncate(out.floor_char_boundary(MAX_INDEXED_BYTES));
    }
    out
}

fn push_json(value: &Value, out: &mut String) {
    if out.len() > MAX_INDEXED_BYTES {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                out.push_str(key);
                if key.contains(['_', '-', '.']) {
                    out.push(' ');
                    out.extend(key.chars().map(|c| if matches!(c, '_' | '-' | '.') { ' ' } else { c }));
                }
                out.push('\n');
                push_json(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| push_json(item, out)),
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Number(n) => {
            out.push_str(&n.to_string());
            out.push('\n');
        }
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_and_values() {
        let doc = Document::Json(json!({"execution_time": 12, "rows": [{"city": "北京"}], "ok": true}));
        let text = indexed_text(&doc);
        for part in ["execution_time", "execution time", "12", "city", "北京"] {
            assert!(text.contains(part), "{part:?} in {text:?}");
        }
        assert!(!text.contains("true"));
        assert_eq!(indexed_text(&Document::Binary(9)), "");
    }
}
