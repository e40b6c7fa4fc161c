//! JSON pointers (RFC 6901) with one extension for specs: a `*` segment matches every member
//! of an object or element of an array.

use serde_json::Value;

/// The segments of `pointer`, unescaped (`~1` → `/`, `~0` → `~`). `""` is the root.
///
/// # Errors
/// A message if the pointer is neither empty nor starts with `/`.
pub fn segments(pointer: &str) -> Result<Vec<String>, String> {
    if pointer.is_empty() {
        return Ok(Vec::new());
    }
    let Some(rest) = pointer.strip_prefix('/') else {
        return Err(format!("JSON pointer {pointer:?} must be empty or start with '/'"));
    };
    Ok(rest.split('/').map(|s| s.replace("~1", "/").replace("~0", "~")).collect())
}

/// The pointer of `segments`, escaped.
pub fn join(segments: &[String]) -> String {
    let mut out = String::new();
    for segment in segments {
        out.push('/');
        out.push_str(&segment.replace('~', "~0").replace('/', "~1"));
    }
    out
}

/// True if pattern segment `pattern` matches segment `actual`.
fn segment_matches(pattern: &str, actual: &str) -> bool {
    pattern == "*" || pattern == actual
}

/// True if `pattern` names exactly the node at `path`.
pub fn matches(pattern: &[String], path: &[String]) -> bool {
    pattern.len() == path.len() && pattern.iter().zip(path).all(|(p, a)| segment_matches(p, a))
}

/// True if `pattern` names a node strictly below the node at `path`.
pub fn is_below(pattern: &[String], path: &[String]) -> bool {
    pattern.len() > path.len() && pattern.iter().zip(path).all(|(p, a)| segment_matches(p, a))
}

/// The child of `value` named by `segment`: a member, or an element by decimal index.
pub fn child<'v>(value: &'v Value, segment: &str) -> Option<&'v Value> {
    match value {
        Value::Object(map) => map.get(segment),
        Value::Array(items) => {
            // RFC 6901: no leading zeros, no sign.
            if segment.len() > 1 && segment.starts_with('0') {
                return None;
            }
            segment.parse::<usize>().ok().and_then(|i| items.get(i))
        }
        _ => None,
    }
}

/// The children of a container with their segments, in document order.
pub fn children(value: &Value) -> Vec<(String, &Value)> {
    match value {
        Value::Object(map) => map.iter().map(|(k, v)| (k.clone(), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (i.to_string(), v)).collect(),
        _ => Vec::new(),
    }
}

/// Every concrete node `pattern` names in `doc`, in document order, with its value, or `None`
/// where a named member is absent. Wildcards expand over what exists; an absent node ends the
/// path there (reported with the rest of the pattern as written).
pub fn resolve<'v>(doc: &'v Value, pattern: &[String]) -> Vec<(Vec<String>, Option<&'v Value>)> {
    let mut out = Vec::new();
    resolve_from(doc, pattern, &mut Vec::new(), &mut out);
    out
}

fn resolve_from<'v>(
    node: &'v Value,
    rest: &[String],
    path: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, Option<&'v Value>)>,
) {
    let Some((first, tail)) = rest.split_first() else {
        out.push((path.clone(), Some(node)));
        return;
    };
    if first == "*" {
        for (segment, value) in children(node) {
            path.push(segment);
            resolve_from(value, tail, path, out);
            path.pop();
        }
        return;
    }
    match child(node, first) {
        Some(value) => {
            path.push(first.clone());
            resolve_from(value, tail, path, out);
            path.pop();
        }
        None => {
            let mut missing = path.clone();
            missing.extend(rest.iter().cloned());
            out.push((missing, None));
        }
    }
}

/// Bytes of `value` as normalized JSON (compact, members in document order).
pub fn normalized_len(value: &Value) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Serializing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn seg(p: &str) -> Vec<String> {
        segments(p).unwrap()
    }

    #[test]
    fn escape_round_trip() {
        let s = seg("/a~1b/c~0d/0");
        assert_eq!(s, ["a/b", "c~d", "0"]);
        assert_eq!(join(&s), "/a~1b/c~0d/0");
        assert_eq!(seg(""), Vec::<String>::new());
        assert!(segments("a/b").is_err());
    }

    #[test]
    fn resolve_expands_wildcards_and_reports_missing() {
        let doc = json!({"t": {"x": {"k": 1}, "y": {"k": null}, "z": {}}, "rows": [1, 2]});
        let found: Vec<(String, Option<Value>)> =
            resolve(&doc, &seg("/t/*/k")).into_iter().map(|(p, v)| (join(&p), v.cloned())).collect();
        assert_eq!(
            found,
            [
                ("/t/x/k".to_string(), Some(json!(1))),
                ("/t/y/k".to_string(), Some(Value::Null)),
                ("/t/z/k".to_string(), None)
            ]
        );
        assert_eq!(resolve(&doc, &seg("/rows/1"))[0].1, Some(&json!(2)));
        assert_eq!(resolve(&doc, &seg("/rows/01"))[0].1, None);
        assert_eq!(join(&resolve(&doc, &seg("/nope/*/k"))[0].0), "/nope/*/k");
    }

    #[test]
    fn pattern_relations() {
        assert!(matches(&seg("/a/*/c"), &seg("/a/b/c")));
        assert!(!matches(&seg("/a/*"), &seg("/a/b/c")));
        assert!(is_below(&seg("/a/*/c"), &seg("/a/b")));
        assert!(!is_below(&seg("/a/b"), &seg("/a/b")));
        assert_eq!(normalized_len(&json!({"a": [1, "x"]})), r#"{"a":[1,"x"]}"#.len() as u64);
    }
}
