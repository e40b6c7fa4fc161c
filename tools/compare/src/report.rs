//! The figures as a markdown table (with ratios ctxgate / peer and the targets) or JSON.

use crate::ENGINES;
use crate::common::{Figures, Setup};
use std::collections::BTreeMap;
use std::fmt::Write;

/// How a row shows its figure.
#[derive(Clone, Copy)]
enum Unit {
    PerSecond,
    Bytes,
    MiB,
    Ms,
    /// A mean count, such as hits per query.
    Count,
}

/// One row: a label, how to read the figure for ctxgate and for the peers.
struct Row {
    label: String,
    unit: Unit,
    ctxgate: Source,
    peer: Source,
}

#[derive(Clone)]
enum Source {
    Key(String),
    TurnsPerSecond,
    MbPerSecond,
    BytesPerTurn,
    AllocatedBytesPerTurn,
    CompactedBytesPerTurn,
    Kib(&'static str),
}

fn value(figures: &Figures, source: &Source) -> Option<f64> {
    let get = |k: &str| figures.get(k).copied();
    match source {
        Source::Key(key) => get(key),
        Source::TurnsPerSecond => Some(get("bulk.turns")? / get("bulk.seconds")?),
        Source::MbPerSecond => Some(get("bulk.text_bytes")? / 1e6 / get("bulk.seconds")?),
        Source::BytesPerTurn => Some(get("bulk.index_bytes")? / get("bulk.turns")?),
        Source::AllocatedBytesPerTurn => Some(get("bulk.allocated_bytes")? / get("bulk.turns")?),
        Source::CompactedBytesPerTurn => Some(get("bulk.compacted_bytes")? / get("bulk.turns")?),
        Source::Kib(key) => Some(get(key)? / 1024.0),
    }
}

fn rows() -> Vec<Row> {
    let same = |label: &str, unit, source: Source| Row {
        label: label.to_string(),
        unit,
        ctxgate: source.clone(),
        peer: source,
    };
    let mut rows = vec![
        same("bulk import, turns/s", Unit::PerSecond, Source::TurnsPerSecond),
        same("bulk import, MB/s of text", Unit::PerSecond, Source::MbPerSecond),
        same("index bytes per turn (file length)", Unit::Bytes, Source::BytesPerTurn),
        same("index bytes per turn (allocated on disk)", Unit::Bytes, Source::AllocatedBytesPerTurn),
        Row {
            label: "index bytes per turn, ctxgate after `compact`".into(),
            unit: Unit::Bytes,
            ctxgate: Source::CompactedBytesPerTurn,
            peer: Source::BytesPerTurn,
        },
        same("peak RSS, bulk import (MiB)", Unit::MiB, Source::Kib("bulk.peak_rss_kib")),
        same("peak RSS, queries (MiB)", Unit::MiB, Source::Kib("query.peak_rss_kib")),
        same("durable add, p50 ms", Unit::Ms, Source::Key("add.p50_ms".into())),
        same("durable add, p99 ms", Unit::Ms, Source::Key("add.p99_ms".into())),
    ];
    for scope in ["session", "global"] {
        for state in ["warm", "reopen"] {
            for q in ["p50", "p99"] {
                let key = format!("{scope}.{state}.{q}_ms");
                rows.push(same(&format!("top-20 {scope}, {state}, {q} ms"), Unit::Ms, Source::Key(key)));
            }
        }
    }
    for state in ["warm", "reopen"] {
        for q in ["p50", "p99"] {
            rows.push(Row {
                label: format!(
                    "ctxgate top-20 global scoring every posting, {state}, {q} ms vs peers' global"
                ),
                unit: Unit::Ms,
                ctxgate: Source::Key(format!("scan.global.{state}.{q}_ms")),
                peer: Source::Key(format!("global.{state}.{q}_ms")),
            });
        }
    }
    for (name, label) in [("select", "select (full)"), ("gate_postings", "gate + postings (as_of=0)")] {
        for state in ["warm", "reopen"] {
            for q in ["p50", "p99"] {
                rows.push(Row {
                    label: format!("ctxgate {label} session, {state}, {q} ms vs peers' top-20"),
                    unit: Unit::Ms,
                    ctxgate: Source::Key(format!("{name}.session.{state}.{q}_ms")),
                    peer: Source::Key(format!("session.{state}.{q}_ms")),
                });
            }
        }
    }
    rows
}

fn show(value: Option<f64>, unit: Unit) -> String {
    match (value, unit) {
        (None, _) => "–".to_string(),
        (Some(v), Unit::PerSecond) if v >= 100.0 => format!("{v:.0}"),
        (Some(v), Unit::PerSecond) => format!("{v:.2}"),
        (Some(v), Unit::Bytes) => format!("{v:.0}"),
        (Some(v), Unit::MiB) => format!("{v:.1}"),
        (Some(v), Unit::Ms) => format!("{v:.3}"),
        (Some(v), Unit::Count) => format!("{v:.2}"),
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// The results' key of the extraction floor (`compare child extract anchors`).
pub const EXTRACT: &str = "anchor extraction";

/// The line under the table: what extracting the anchors alone takes.
fn extraction_line(results: &BTreeMap<String, Figures>) -> Option<String> {
    let figures = results.get(EXTRACT)?;
    let (seconds, turns) = (figures.get("extract.seconds")?, figures.get("extract.turns")?);
    let rss = figures.get("extract.peak_rss_kib").map_or("–".into(), |k| format!("{:.0} MiB", k / 1024.0));
    Some(format!(
        "Anchor extraction alone (read, parse and extract on the rayon pool, nothing indexed; every \
         engine above indexes these anchors): {:.0} turns/s, peak RSS {rss}.\n",
        turns / seconds
    ))
}

/// The results' key of redb's durable commit floor (`compare child floor redb`).
pub const FLOOR: &str = "redb commit floor";

/// The line under the table: redb's own durable commit of one turn's text, in the mode
/// ctxgate's index uses and in redb's default mode, beside ctxgate's add and FTS5's commit.
fn floor_line(results: &BTreeMap<String, Figures>) -> Option<String> {
    let floor = results.get(FLOOR)?;
    let multi = *floor.get("floor.multi_writer.p50_ms")?;
    let exclusive = floor.get("floor.exclusive.p50_ms").map_or("–".into(), |v| format!("{v:.3} ms"));
    let times = |engine: &str| {
        let add = results.get(engine).and_then(|f| f.get("add.p50_ms"))?;
        Some(format!("{engine}'s durable add {:.2}x", add / multi))
    };
    let against: Vec<String> = ["ctxgate", "fts5"].into_iter().filter_map(times).collect();
    Some(format!(
        "redb's own durable commit of one turn's text (one row in one table, a file of its own), \
         p50: {multi:.3} ms in the multi-writer mode ctxgate opens its index in (two-phase), \
         {exclusive} in redb's default exclusive-writer mode (one-phase){}.\n",
        if against.is_empty() {
            String::new()
        } else {
            format!("; against the multi-writer floor: {}", against.join(", "))
        }
    ))
}

fn with_turns(setup: &Setup, results: &BTreeMap<String, Figures>) -> BTreeMap<String, Figures> {
    results
        .iter()
        .map(|(engine, figures)| {
            let mut figures = figures.clone();
            figures.insert("bulk.turns".into(), setup.turns as f64);
            (engine.clone(), figures)
        })
        .collect()
}

pub fn markdown(setup: &Setup, results: &BTreeMap<String, Figures>) -> String {
    let results = with_turns(setup, results);
    let engines: Vec<&str> = ENGINES.iter().copied().filter(|e| results.contains_key(*e)).collect();
    let peers: Vec<&str> = engines.iter().copied().filter(|e| *e != "ctxgate").collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## {} turns, {} sessions (session-scoped queries in one of {} turns), {} queries, {} adds, seed {}\n",
        setup.turns,
        setup.sessions,
        setup.long_turns(),
        setup.samples,
        setup.adds,
        setup.seed
    );
    let mut header = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for engine in &engines {
        let _ = write!(header, " {engine} |");
        rule.push_str("---:|");
    }
    if results.contains_key("ctxgate") {
        for peer in &peers {
            let _ = write!(header, " ctxgate/{peer} |");
            rule.push_str("---:|");
        }
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for row in rows() {
        let mut line = format!("| {} |", row.label);
        let ctxgate = results.get("ctxgate").and_then(|f| value(f, &row.ctxgate));
        for engine in &engines {
            let source = if *engine == "ctxgate" { &row.ctxgate } else { &row.peer };
            let v = results.get(*engine).and_then(|f| value(f, source));
            let _ = write!(line, " {} |", show(v, row.unit));
        }
        if results.contains_key("ctxgate") {
            for peer in &peers {
                let p = results.get(*peer).and_then(|f| value(f, &row.peer));
                let _ = write!(line, " {} |", ratio(ctxgate, p).map_or("–".into(), |r| format!("{r:.2}")));
            }
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(line) = extraction_line(&results) {
        let _ = write!(out, "\n{line}");
    }
    if let Some(line) = floor_line(&results) {
        let _ = write!(out, "\n{line}");
    }
    let _ = writeln!(out, "\n{}", targets(&results));
    out
}

/// The targets that one run can check (the 1M ones are checked at this scale).
fn targets(results: &BTreeMap<String, Figures>) -> String {
    let get = |engine: &str, source: Source| results.get(engine).and_then(|f| value(f, &source));
    let key = |k: &str| Source::Key(k.to_string());
    let mut out = String::from("Targets (ratio ctxgate / peer, or figure):\n");
    let mut check = |what: &str, measured: Option<f64>, limit: f64, at_least: bool| {
        let verdict = match measured {
            None => "not measured".to_string(),
            Some(m) if (at_least && m >= limit) || (!at_least && m <= limit) => format!("met ({m:.2})"),
            Some(m) => format!("MISSED ({m:.2}, limit {limit})"),
        };
        let _ = writeln!(out, "- {what}: {verdict}");
    };
    check(
        "bulk import turns/s >= tantivy's",
        ratio(get("ctxgate", Source::TurnsPerSecond), get("tantivy", Source::TurnsPerSecond)),
        1.0,
        true,
    );
    check(
        "index bytes per turn <= FTS5's",
        ratio(get("ctxgate", Source::BytesPerTurn), get("fts5", Source::BytesPerTurn)),
        1.0,
        false,
    );
    check(
        "index bytes per turn on disk, as the import leaves it, <= tantivy's",
        ratio(get("ctxgate", Source::AllocatedBytesPerTurn), get("tantivy", Source::AllocatedBytesPerTurn)),
        1.0,
        false,
    );
    check(
        "bulk import peak RSS <= 2x tantivy's",
        ratio(
            get("ctxgate", Source::Kib("bulk.peak_rss_kib")),
            get("tantivy", Source::Kib("bulk.peak_rss_kib")),
        ),
        2.0,
        false,
    );
    check(
        "durable add p50 <= FTS5's per-turn commit",
        ratio(get("ctxgate", key("add.p50_ms")), get("fts5", key("add.p50_ms"))),
        1.0,
        false,
    );
    check(
        "session-scoped select p50 <= 1 ms (warm)",
        get("ctxgate", key("select.session.warm.p50_ms")),
        1.0,
        false,
    );
    check(
        "session-scoped select p50 <= 3x tantivy's session top-20 (warm)",
        ratio(get("ctxgate", key("select.session.warm.p50_ms")), get("tantivy", key("session.warm.p50_ms"))),
        3.0,
        false,
    );
    check(
        "global top-20 p50 <= 3x tantivy's (warm)",
        ratio(get("ctxgate", key("global.warm.p50_ms")), get("tantivy", key("global.warm.p50_ms"))),
        3.0,
        false,
    );
    out
}

pub fn json(setup: &Setup, results: &BTreeMap<String, Figures>) -> serde_json::Value {
    let results = with_turns(setup, results);
    let mut engines = serde_json::Map::new();
    for (engine, figures) in &results {
        let mut derived = figures.clone();
        for (name, source) in [
            ("bulk.turns_per_s", Source::TurnsPerSecond),
            ("bulk.mb_per_s", Source::MbPerSecond),
            ("bulk.bytes_per_turn", Source::BytesPerTurn),
            ("bulk.allocated_bytes_per_turn", Source::AllocatedBytesPerTurn),
        ] {
            if let Some(v) = value(figures, &source) {
                derived.insert(name.into(), v);
            }
        }
        engines.insert(engine.clone(), serde_json::to_value(derived).unwrap_or_default());
    }
    let team = setup.team.map(|t| {
        serde_json::json!({ "projects": t.projects, "sessions_per_project": t.sessions_per_project,
            "turns_per_session": t.turns_per_session })
    });
    serde_json::json!({
        "layout": team,
        "turns": setup.turns,
        "sessions": setup.sessions,
        "long_session_turns": setup.long_turns(),
        "queries": setup.samples,
        "adds": setup.adds,
        "seed": setup.seed,
        "engines": engines,
    })
}

/// The team layout's rows: every figure the issue asks for, from each engine's phases.
fn team_rows() -> Vec<(String, Unit, Source)> {
    let mut rows = vec![
        ("import, turns/s".to_string(), Unit::PerSecond, Source::TurnsPerSecond),
        ("index bytes per turn (file length)".into(), Unit::Bytes, Source::BytesPerTurn),
        ("index bytes per turn (allocated on disk)".into(), Unit::Bytes, Source::AllocatedBytesPerTurn),
        ("import peak RSS (MiB)".into(), Unit::MiB, Source::Kib("bulk.peak_rss_kib")),
    ];
    let kinds = [
        ("session", "own session: ctxgate `select`, peers top-20"),
        ("others", "project's other sessions, top 3"),
        ("global", "global top-20"),
    ];
    for (kind, label) in kinds {
        for state in ["warm", "reopen"] {
            for q in ["p50", "p99"] {
                let key = format!("{kind}.{state}.{q}_ms");
                rows.push((format!("{label}, {state}, {q} ms"), Unit::Ms, Source::Key(key)));
            }
        }
        rows.push((format!("{label}, hits per query"), Unit::Count, Source::Key(format!("{kind}.hits"))));
        rows.push((format!("{label}, peak RSS (MiB)"), Unit::MiB, Source::Kib(peak_key(kind))));
    }
    rows.push((
        "UserPromptSubmit hook end to end, p50 ms".into(),
        Unit::Ms,
        Source::Key("hook.p50_ms".into()),
    ));
    rows.push((
        "UserPromptSubmit hook end to end, p95 ms".into(),
        Unit::Ms,
        Source::Key("hook.p95_ms".into()),
    ));
    rows
}

fn peak_key(kind: &str) -> &'static str {
    match kind {
        "session" => "session.peak_rss_kib",
        "others" => "others.peak_rss_kib",
        _ => "global.peak_rss_kib",
    }
}

/// The team layout's table: each engine's figure, then each engine's ratio to tantivy (on
/// ctxgate's anchors) in the same run.
pub fn team_markdown(setup: &Setup, results: &BTreeMap<String, Figures>, engines: &[String]) -> String {
    let results = with_turns(setup, results);
    let shape = setup.team.map_or((0, 0, 0), |t| (t.projects, t.sessions_per_project, t.turns_per_session));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Team layout: {} projects x {} sessions x {} turns = {} turns, {} queries, seed {}\n",
        shape.0, shape.1, shape.2, setup.turns, setup.samples, setup.seed
    );
    let others: Vec<&String> = engines.iter().filter(|e| *e != "tantivy").collect();
    let mut header = "| figure |".to_string();
    let mut rule = "|---|".to_string();
    for engine in engines {
        let _ = write!(header, " {engine} |");
        rule.push_str("---:|");
    }
    if results.contains_key("tantivy") {
        for engine in &others {
            let _ = write!(header, " {engine}/tantivy |");
            rule.push_str("---:|");
        }
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for (label, unit, source) in team_rows() {
        let mut line = format!("| {label} |");
        for engine in engines {
            let v = results.get(engine).and_then(|f| value(f, &source));
            let _ = write!(line, " {} |", show(v, unit));
        }
        if let Some(tantivy) = results.get("tantivy") {
            let base = value(tantivy, &source);
            for engine in &others {
                let v = results.get(*engine).and_then(|f| value(f, &source));
                let _ = write!(line, " {} |", ratio(v, base).map_or("–".into(), |r| format!("{r:.2}")));
            }
        }
        let _ = writeln!(out, "{line}");
    }
    if let Some(ctxgate) = results.get("ctxgate")
        && let (Some(pool), Some(project)) =
            (ctxgate.get("others.pool_sessions"), ctxgate.get("others.pool_project_sessions"))
    {
        let _ = writeln!(
            out,
            "\nctxgate's other-sessions query: the hook's search hits span {pool:.1} sessions a query \
             (the bearing is computed for each), {project:.1} of them other sessions of the prompt's project."
        );
    }
    if let Some(first) = results.get("ctxgate").and_then(|f| f.get("hook.first_read_ms")) {
        let _ = writeln!(
            out,
            "\nThe hook's first read of the live session's transcript (a `Stop` hook, untimed above): {first:.1} ms."
        );
    }
    out
}
