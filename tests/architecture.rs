//! The directions `docs/ARCHITECTURE.md` promises, read off the `crate::` paths of `src/`.
//!
//! Every file of `src/` belongs to a component (its first folder, or its name at the root), and
//! every component has a layer. A path from a component to one of a higher layer is an upward
//! import. Four directions must never occur:
//! - `postings/` uses only leaves (and its own error), `store/` only leaves and `postings/`;
//! - `import/` uses only leaves;
//! - `query/` never uses `write/` or `jobs/`;
//! - `hook/`, `server/` and `sync/` use only the public API, and the CLI (`src/cli`, its own crate)
//!   none of the modules public only with the `internals` feature.
//!
//! Nothing below the facade uses `gatekeeper` or `session`, no import runs upward, and a circle
//! of the component graph never spans two layers. Test modules (`#[cfg(test)] mod`) and comments
//! are left out. The test prints the upward imports and the circles (`--nocapture`), the figures
//! `docs/ARCHITECTURE.md` quotes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Components by layer, lowest first. A component missing here fails the test: place it.
const LAYERS: &[&[&str]] = &[
    // Leaves: pure functions and types every layer may use.
    &[
        "anchor",
        "error_kind",
        "evidence::pure",
        "gate",
        "limits",
        "names",
        "redact",
        "text",
        "tokens",
        "types",
    ],
    &["postings"],
    &["store", "import"],
    &["error"],
    &["options", "index"],
    &["evidence", "query", "write", "jobs"],
    &["gatekeeper", "session"],
    &["hook", "server", "sync", "fuzzing"],
];

/// The pure part of `evidence/` (refs, specs, projections, the root's file access): no index.
const EVIDENCE_PURE: &[&str] = &["anchors", "error", "pointer", "projection", "reference", "root", "spec"];

/// Modules public only with the `internals` feature (`lib.rs`).
const INTERNAL_MODULES: &[&str] = &["anchor", "gate", "query", "store", "text"];

fn layer(component: &str) -> usize {
    LAYERS
        .iter()
        .position(|layer| layer.contains(&component))
        .unwrap_or_else(|| panic!("component {component:?} has no layer in tests/architecture.rs: place it"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file's code without its test module and comments.
fn code_of(text: &str) -> String {
    let mut code = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|next| next.trim_start().starts_with("mod "))
        {
            break;
        }
        let line = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        code.push_str(line);
        code.push('\n');
    }
    code
}

/// The paths after each `prefix` (`crate::`), with `prefix{a, b::c}` split into its parts.
fn paths_after(code: &str, prefix: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + prefix.len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if rest.starts_with('{') {
            paths.extend(group_paths(rest));
        } else {
            let end =
                rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
            paths.push(rest[..end].trim_end_matches(':').to_string());
        }
    }
    paths
}

/// The paths of a `{a, b::{c, d}, e}` group at the start of `text` (`a`, `b::c`, `b::d`, `e`),
/// read with its braces balanced.
fn group_paths(text: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let mut stack = vec![String::new()]; // the prefix at each depth
    let mut item = String::new();
    for c in text.chars().skip(1) {
        match c {
            '{' => {
                let prefix = format!("{}{}", stack.last().map_or("", String::as_str), item.trim());
                stack.push(prefix);
                item.clear();
            }
            ',' | '}' => {
                let prefix = stack.last().map_or("", String::as_str);
                if !item.trim().is_empty() {
                    paths.push(format!("{prefix}{}", item.trim()));
                }
                item.clear();
                if c == '}' {
                    stack.pop();
                    if stack.is_empty() {
                        break;
                    }
                }
            }
            _ => item.push(c),
        }
    }
    paths.into_iter().map(|p| p.split(" as ").next().unwrap_or("").trim().to_string()).collect()
}

/// What `lib.rs` re-exports at the crate root, by name, with the module each comes from.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut exports = BTreeMap::new();
    for statement in code_of(lib).split(';') {
        let Some(path) = statement.trim().strip_prefix("pub use ") else { continue };
        let module = path.split("::").next().unwrap_or("").to_string();
        let names = match (path.find('{'), path.rfind('}')) {
            (Some(open), Some(close)) => path[open + 1..close].split(',').map(str::to_string).collect(),
            _ => vec![path.rsplit("::").next().unwrap_or("").to_string()],
        };
        for name in names {
            let name = name.split(" as ").last().unwrap_or("").trim().to_string();
            if !name.is_empty() {
                exports.insert(name, module.clone());
            }
        }
    }
    exports
}

/// The component a `crate::` path leads to (`None`: the crate root itself, as `crate::{...}`
/// lists resolve item by item).
fn target(path: &str, exports: &BTreeMap<String, String>) -> Option<String> {
    let mut parts = path.split("::");
    let first = parts.next()?.trim();
    if first == "evidence" && parts.next().is_some_and(|second| EVIDENCE_PURE.contains(&second)) {
        return Some("evidence::pure".into());
    }
    match exports.get(first) {
        Some(module) => Some(module.clone()),
        None => Some(first.to_string()),
    }
}

struct Graph {
    /// (from component, file) → components it uses.
    edges: Vec<(String, String, BTreeSet<String>)>,
    /// Raw first segments of each file's paths: what the public-API rule reads.
    raw: Vec<(String, String, BTreeSet<String>)>,
    exports: BTreeMap<String, String>,
}

fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let exports = root_exports(&std::fs::read_to_string(root.join("lib.rs")).expect("lib.rs"));
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut edges = Vec::new();
    let mut raw = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&root).expect("under src").to_string_lossy().replace('\\', "/");
        let component = match relative.split('/').collect::<Vec<_>>().as_slice() {
            ["lib.rs" | "main.rs"] => continue,
            ["cli", ..] => "cli".to_string(),
            ["evidence", file] if EVIDENCE_PURE.contains(&file.trim_end_matches(".rs")) => {
                "evidence::pure".to_string()
            }
            [single] => single.trim_end_matches(".rs").to_string(),
            [folder, ..] => folder.to_string(),
            [] => continue,
        };
        let code = code_of(&std::fs::read_to_string(&file).expect("read"));
        let prefix = if component == "cli" { "ctxgate::" } else { "crate::" };
        let paths = paths_after(&code, prefix);
        let firsts: BTreeSet<String> =
            paths.iter().filter_map(|p| p.split("::").next()).map(|p| p.trim().to_string()).collect();
        let targets: BTreeSet<String> =
            paths.iter().filter_map(|p| target(p, &exports)).filter(|t| *t != component).collect();
        raw.push((component.clone(), relative.clone(), firsts));
        edges.push((component, relative, targets));
    }
    Graph { edges, raw, exports }
}

/// Strongly connected components of more than one component (Tarjan's algorithm).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut members = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                members.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if members.len() > 1 {
                members.sort();
                s.found.push(members);
            }
        }
    }
    let mut state = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !state.index.contains_key(v.as_str()) {
            visit(&mut state, v);
        }
    }
    state.found
}

#[test]
fn forbidden_directions_never_occur() {
    let Graph { edges, raw, exports } = graph();
    let mut broken = Vec::new();
    for (component, file, targets) in &edges {
        if component == "cli" {
            continue;
        }
        let own = layer(component);
        for t in targets {
            let rule = match component.as_str() {
                "postings" | "import" if layer(t) > 0 => "uses only leaves",
                "store" if layer(t) > layer("postings") => "uses only leaves and postings/",
                "query" if t == "write" || t == "jobs" => "never uses write/ or jobs/",
                _ if own < layer("gatekeeper") && (t == "gatekeeper" || t == "session") => {
                    "is below the facade and never uses it"
                }
                _ => continue,
            };
            broken.push(format!("{file}: {component} {rule}, but uses {t}"));
        }
    }
    let public: BTreeSet<&str> =
        ["evidence", "hook", "import", "jobs", "limits", "redact", "tokens", "server"].into_iter().collect();
    for (component, file, firsts) in &raw {
        let outside = match component.as_str() {
            "hook" | "server" | "sync" => firsts
                .iter()
                .filter(|f| !public.contains(f.as_str()) && !exports.contains_key(f.as_str()))
                .cloned()
                .collect::<Vec<_>>(),
            "cli" => firsts.iter().filter(|f| INTERNAL_MODULES.contains(&f.as_str())).cloned().collect(),
            _ => continue,
        };
        for f in outside {
            broken.push(format!("{file}: {component} uses only the public API, but uses crate::{f}"));
        }
    }
    assert!(broken.is_empty(), "directions that must never occur:\n{}", broken.join("\n"));
}

#[test]
fn upward_imports_and_circles_are_counted() {
    let Graph { edges, .. } = graph();
    let mut upward = Vec::new();
    let mut components: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (component, file, targets) in &edges {
        if component == "cli" {
            continue;
        }
        for t in targets {
            if layer(t) > layer(component) {
                upward.push(format!("{file} -> {t}"));
            }
            components.entry(component.clone()).or_default().insert(t.clone());
        }
    }
    let circles = circles(&components);
    println!("upward imports: {}", upward.len());
    for u in &upward {
        println!("  {u}");
    }
    println!("circles: {}", circles.len());
    for c in &circles {
        println!("  {}", c.join(" <-> "));
    }
    // Sanity of the reading itself: the facade's own file reaches what it sits on.
    let facade = edges.iter().find(|(_, file, _)| file == "gatekeeper.rs").expect("gatekeeper.rs");
    assert!(facade.2.contains("index"), "the path reading lost gatekeeper.rs -> index: {:?}", facade.2);
    // A circle may tie siblings of one layer (`Gatekeeper` makes a `Session`, which reports a
    // `SessionInfo`), never two layers: that would be an upward import.
    for c in &circles {
        let layers: BTreeSet<usize> = c.iter().map(|m| layer(m)).collect();
        assert_eq!(layers.len(), 1, "a circle across layers: {}", c.join(" <-> "));
    }
    assert!(upward.is_empty(), "upward imports: {upward:#?}");
}

#[test]
fn the_reading_finds_grouped_and_nested_paths() {
    let code = code_of(
        "use crate::{a, b::c};\nlet x = crate::d::e(); // crate::f\n#[cfg(test)]\nmod tests { crate::g }",
    );
    assert_eq!(paths_after(&code, "crate::"), vec!["a", "b::c", "d::e"]);
    let nested = code_of("use crate::{store::{Store, View as V}, write::W};");
    assert_eq!(paths_after(&nested, "crate::"), vec!["store::Store", "store::View", "write::W"]);
}
