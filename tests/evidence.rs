//! Evidence projection end to end (DESIGN §4): the fixture tree modelled on seed 003 and its
//! spec, through the library and the real binary.

mod common;

use common::{SelectDoc, TestEnv, TestResult, copy_tree};
use ctxgate::evidence::{self, Document, EvidenceRef, Projection, Spec, pointer};
use ctxgate::{EvidenceOptions, Gatekeeper, Options, SelectOptions};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture_tree() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/evidence/tree")
}

fn spec() -> Spec {
    Spec::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/evidence/spec.json"))
        .expect("fixture spec loads")
}

/// Every file of the tree with its ref.
fn documents(root: &Path) -> Vec<(EvidenceRef, Vec<u8>)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(EvidenceRef, Vec<u8>)>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let reference = EvidenceRef::from_relative_path(path.strip_prefix(root).unwrap()).unwrap();
                out.push((reference, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

/// Pointers of every leaf (scalar or empty container) of `value`.
fn leaves(value: &Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let children = pointer::children(value);
    if children.is_empty() {
        out.push(path.clone());
    }
    for (segment, child) in children {
        path.push(segment);
        leaves(child, path, out);
        path.pop();
    }
}

fn is_prefix(prefix: &[String], path: &[String]) -> bool {
    path.len() >= prefix.len() && path[..prefix.len()] == *prefix
}

/// The invariants of DESIGN §4 for one document and its projection.
fn check_invariants(reference: &EvidenceRef, doc: &Value, projection: &Projection, spec: Option<&Spec>) {
    // A document given whole is the document, with nothing beside it to cover.
    if let Some(content) = &projection.content {
        assert_eq!(content, doc, "{reference}: content is the document");
        assert!(projection.facts.is_empty() && projection.omitted_from_context.is_empty(), "{reference}");
    }
    // Facts are never rewritten: byte-for-byte the normalized value at the pointer.
    for (p, fact) in &projection.facts {
        let source = doc.pointer(p).unwrap_or_else(|| panic!("{reference}: fact {p} is not in the document"));
        assert_eq!(
            serde_json::to_string(fact).unwrap(),
            serde_json::to_string(source).unwrap(),
            "{reference}: fact {p}"
        );
    }
    // Every part not in facts is in omitted_from_context.
    let facts: Vec<Vec<String>> = projection.facts.keys().map(|p| pointer::segments(p).unwrap()).collect();
    let omitted: Vec<Vec<String>> = projection
        .omitted_from_context
        .iter()
        .map(|o| pointer::segments(o.pointer.as_deref().expect("JSON omissions have a pointer")).unwrap())
        .collect();
    let mut all = Vec::new();
    leaves(doc, &mut Vec::new(), &mut all);
    for leaf in all.into_iter().filter(|_| projection.content.is_none()) {
        let in_facts = facts.iter().any(|f| is_prefix(f, &leaf));
        let in_omitted = omitted.iter().any(|o| is_prefix(o, &leaf));
        assert!(
            in_facts ^ in_omitted,
            "{reference}: {} is in facts {in_facts}, omitted {in_omitted}",
            pointer::join(&leaf)
        );
    }
    for o in &projection.omitted_from_context {
        let value = doc.pointer(o.pointer.as_deref().unwrap()).expect("omitted part exists");
        assert_eq!(o.bytes, pointer::normalized_len(value), "{reference}: size of {:?}", o.pointer);
        assert_eq!(o.rows, value.as_array().map(|a| a.len() as u64));
    }
    let Some(rules) = spec.and_then(|s| s.kind(&projection.kind)) else { return };
    // Every spec'd unknown appears exactly when the field is missing or null.
    let mut expected_unknowns = Vec::new();
    for rule in &rules.known_unknowns {
        for (path, value) in pointer::resolve(doc, &pointer::segments(&rule.pointer).unwrap()) {
            if matches!(value, None | Some(Value::Null)) {
                expected_unknowns.push(pointer::join(&path));
            }
        }
    }
    let unknowns: Vec<String> = projection.known_unknowns.iter().map(|u| u.pointer.clone()).collect();
    assert_eq!(unknowns, expected_unknowns, "{reference}: known unknowns");
    // Blocked decisions appear exactly when their rule holds.
    let mut expected_blocked = Vec::new();
    for rule in &rules.blocked_decisions {
        for (_, value) in pointer::resolve(doc, &pointer::segments(&rule.pointer).unwrap()) {
            let holds = match &rule.equals {
                Some(v) => value == Some(v),
                None => matches!(value, None | Some(Value::Null)),
            };
            if holds {
                expected_blocked.push(rule.decision.clone());
            }
        }
    }
    let blocked: Vec<String> = projection.blocked_decisions.iter().map(|b| b.decision.clone()).collect();
    assert_eq!(blocked, expected_blocked, "{reference}: blocked decisions");
    assert_eq!(projection.claim_constraints, rules.claim_constraints);
    assert_eq!(projection.agent_space, rules.agent_space);
}

#[test]
fn every_fixture_projection_keeps_the_invariants_with_and_without_the_spec() {
    let spec = spec();
    let docs = documents(&fixture_tree());
    assert_eq!(docs.len(), 11, "the fixture tree");
    for (reference, bytes) in &docs {
        let doc = Document::parse(bytes);
        for spec in [Some(&spec), None] {
            let projection = evidence::project(reference, &doc, spec, None).unwrap();
            assert_eq!(projection.evidence_ref, reference.as_str());
            let again = evidence::project(reference, &Document::parse(bytes), spec, None).unwrap();
            assert_eq!(
                serde_json::to_vec(&projection).unwrap(),
                serde_json::to_vec(&again).unwrap(),
                "deterministic"
            );
            match &doc {
                Document::Json(value) => check_invariants(reference, value, &projection, spec),
                Document::Text(text) if projection.content.is_some() => {
                    assert_eq!(projection.content, Some(Value::from(text.as_str())), "{reference}");
                    assert!(projection.facts.is_empty() && projection.omitted_from_context.is_empty());
                }
                Document::Text(text) => {
                    let head = projection.facts["head"].as_str().unwrap();
                    assert!(text.starts_with(head), "{reference}: the head is an exact prefix");
                    assert_eq!(
                        projection.facts["line_count"],
                        Value::from(text.split_inclusive('\n').count())
                    );
                }
                Document::Binary(_) => panic!("{reference}: no binary fixtures"),
            }
        }
    }
}

#[test]
fn the_spec_reproduces_the_seed_rules() {
    let spec = spec();
    let project = |reference: &str| {
        let reference = EvidenceRef::parse(reference).unwrap();
        let bytes = std::fs::read(fixture_tree().join(reference.as_str())).unwrap();
        evidence::project(&reference, &Document::parse(&bytes), Some(&spec), None).unwrap()
    };
    let omitted = |p: &Projection| -> Vec<String> {
        p.omitted_from_context.iter().filter_map(|o| o.pointer.clone()).collect()
    };

    let baseline = project("round_1/baseline.json");
    assert_eq!(baseline.kind, "baseline_facts");
    assert_eq!(baseline.schema_version, "sqlopt-evidence/v1");
    assert!(
        omitted(&baseline).contains(&"/sql".to_string())
            && omitted(&baseline).contains(&"/result/rows".to_string())
    );
    assert_eq!(baseline.facts["/row_count"], Value::from(3000));
    // Round 1 has no fallback_reason at all; round 2 has one.
    assert!(baseline.known_unknowns.iter().any(|u| u.pointer == "/fallback_reason" && u.state == "missing"));
    let round2 = project("round_2/baseline.json");
    assert!(!round2.known_unknowns.iter().any(|u| u.pointer == "/fallback_reason"));

    let table_ctx = project("table_ctx.json");
    assert_eq!(table_ctx.kind, "table_ctx_facts");
    assert!(table_ctx.facts.contains_key("/distributed_context"), "distributed_context kept whole");
    let blocked: Vec<&str> = table_ctx.blocked_decisions.iter().map(|b| b.decision.as_str()).collect();
    assert_eq!(blocked, ["choose_shard_key", "assume_global_index"]);
    assert!(
        table_ctx
            .claim_constraints
            .iter()
            .any(|c| c.contains("has_cross_shard=true") && c.contains("has_full_shard_scan=true"))
    );
    assert!(table_ctx.known_unknowns.iter().any(|u| u.pointer == "/tables_schema/shop.customers/stats"));
    assert!(omitted(&table_ctx).contains(&"/table_info".to_string()));

    let execute = project("round_2/execute_result.json");
    assert_eq!(execute.kind, "execute_facts");
    for p in ["/org_result/rows", "/optimized_result/rows", "/org_sql", "/optimized_sql"] {
        assert!(omitted(&execute).contains(&p.to_string()), "{p} omitted");
    }
    assert!(execute.blocked_decisions.is_empty(), "result_identical is recorded");
}

#[test]
fn blocked_decisions_follow_their_rules() {
    let spec = spec();
    let reference = EvidenceRef::parse("table_ctx.json").unwrap();
    let bytes = std::fs::read(fixture_tree().join("table_ctx.json")).unwrap();
    let Document::Json(original) = Document::parse(&bytes) else { panic!("JSON fixture") };
    let cases: [(&str, Value, Vec<&str>); 4] = [
        ("/distributed_context/shard_key_source", Value::from("ddl"), vec!["assume_global_index"]),
        ("/distributed_context/index_scope", Value::from("global"), vec!["choose_shard_key"]),
        ("/distributed_context/index_scope", Value::Null, vec!["choose_shard_key"]),
        (
            "/distributed_context/shard_key_source",
            Value::from("missing"),
            vec!["choose_shard_key", "assume_global_index"],
        ),
    ];
    for (p, value, expected) in cases {
        let mut doc = original.clone();
        *doc.pointer_mut(p).unwrap() = value.clone();
        let projection =
            evidence::project(&reference, &Document::Json(doc.clone()), Some(&spec), None).unwrap();
        let blocked: Vec<&str> = projection.blocked_decisions.iter().map(|b| b.decision.as_str()).collect();
        assert_eq!(blocked, expected, "{p} = {value}");
        check_invariants(&reference, &doc, &projection, Some(&spec));
    }
    // A missing `result_identical` blocks claiming the same result.
    let reference = EvidenceRef::parse("round_2/execute_result.json").unwrap();
    let bytes = std::fs::read(fixture_tree().join(reference.as_str())).unwrap();
    let Document::Json(mut doc) = Document::parse(&bytes) else { panic!("JSON fixture") };
    doc.as_object_mut().unwrap().remove("result_identical");
    let projection = evidence::project(&reference, &Document::Json(doc.clone()), Some(&spec), None).unwrap();
    assert_eq!(projection.blocked_decisions.len(), 1);
    assert_eq!(projection.blocked_decisions[0].pointer, "/result_identical");
    check_invariants(&reference, &doc, &projection, Some(&spec));
}

#[test]
fn projections_cost_a_tenth_of_the_evidence_for_rows_and_plans() -> TestResult {
    let env = TestEnv::new()?;
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    let spec = spec();
    let report = gk.index_evidence(&fixture_tree(), &EvidenceOptions { spec: Some(&spec), kind: None })?;
    assert_eq!((report.indexed, report.skipped.len()), (11, 0), "{report:?}");
    let listed = gk.list_evidence()?;
    let (full, projected): (u64, u64) = listed
        .iter()
        .fold((0, 0), |(f, p), d| (f + u64::from(d.full_tokens), p + u64::from(d.projection_tokens)));
    assert!(projected * 10 <= full, "the tree: {projected} projected of {full} tokens");
    for d in listed.iter().filter(|d| d.kind == "baseline_facts" || d.kind == "execute_facts") {
        assert!(d.projection_tokens * 10 <= d.full_tokens, "{d:?}");
    }
    Ok(())
}

#[test]
fn index_is_incremental_and_follows_the_tree() -> TestResult {
    let env = TestEnv::new()?;
    let tree = env.dir.path().join("tree");
    copy_tree(&fixture_tree(), &tree)?;
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    let options = EvidenceOptions::default();
    let first = gk.index_evidence(&tree, &options)?;
    assert_eq!((first.indexed, first.unchanged, first.removed), (11, 0, 0));
    let again = gk.index_evidence(&tree, &options)?;
    assert_eq!((again.indexed, again.unchanged, again.removed), (0, 11, 0), "unchanged files are skipped");

    std::fs::write(tree.join("notes.log"), "deploy started\nrollback of shop.orders migration\n")?;
    std::fs::remove_file(tree.join("table_ctx/shop.orders/table_stats.json"))?;
    let third = gk.index_evidence(&tree, &options)?;
    assert_eq!((third.indexed, third.unchanged, third.removed), (1, 10, 1));
    let refs: Vec<String> = gk.list_evidence()?.into_iter().map(|d| d.evidence_ref).collect();
    assert!(refs.contains(&"notes.log".to_string()) && !refs.iter().any(|r| r.ends_with("table_stats.json")));

    // Another tree while this one is indexed is refused: refs are relative to one root.
    let other = env.dir.path().join("other");
    std::fs::create_dir(&other)?;
    let err = gk.index_evidence(&other, &options).unwrap_err();
    assert!(err.to_string().contains("evidence is under"), "{err}");
    Ok(())
}

#[test]
fn select_offers_relevant_projections_within_the_budget() -> TestResult {
    let env = TestEnv::new()?;
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    let spec = spec();
    gk.index_evidence(&fixture_tree(), &EvidenceOptions { spec: Some(&spec), kind: None })?;
    let s = gk.session("s")?;
    s.add_turn(
        "How do I renew a Redis lock before its TTL expires?",
        "Extend it with PEXPIRE from the holder.",
    )?;
    s.add_turn("Which index did the optimized query use?", "Let me run the comparison.")?;

    // Projections are large under the conservative estimate (1.5 tokens per character): an
    // agent that works from evidence gives itself a budget to match.
    let wide = SelectOptions { budget: Some(16_000), ..Default::default() };
    let selection = s.select_with("shard key of shop.orders, and the index scope", &wide)?;
    let refs: Vec<&str> = selection.evidence.iter().map(|e| e.evidence_ref.as_str()).collect();
    assert!(refs.contains(&"table_ctx.json"), "{refs:?}");
    let table_ctx = selection.evidence.iter().find(|e| e.evidence_ref == "table_ctx.json").unwrap();
    assert_eq!(table_ctx.projection["kind"], "table_ctx_facts");
    assert!(table_ctx.projection["blocked_decisions"].as_array().is_some_and(|b| b.len() == 2));

    let off = s.select_with(
        "shard key of shop.orders, and the index scope",
        &SelectOptions { no_evidence: true, ..Default::default() },
    )?;
    assert!(off.evidence.is_empty(), "--no-evidence");

    let unrelated = s.select("Redis lock TTL renewal")?;
    assert!(
        unrelated.evidence.is_empty(),
        "{:?}",
        unrelated.evidence.iter().map(|e| &e.evidence_ref).collect::<Vec<_>>()
    );
    assert_eq!(unrelated.blocks[0].turn_id, 0);

    // Never over the budget, whatever it is.
    for budget in [1, 50, 300, 800, 1500, 3000, 4000, 8000] {
        for query in [
            "shard key index scope",
            "execution time of the baseline",
            "improvement_percent verdict",
            "orders",
        ] {
            let sel = s.select_with(query, &SelectOptions { budget: Some(budget), ..Default::default() })?;
            let used: u32 = sel.blocks.iter().map(|b| b.tokens).sum::<u32>()
                + sel.evidence.iter().map(|e| e.tokens).sum::<u32>();
            assert_eq!(used, sel.budget.used);
            assert!(used <= budget, "{query:?} at {budget}: used {used}");
            let prompt = s.build_prompt_with(
                query,
                &SelectOptions { budget: Some(budget.max(100)), ..Default::default() },
            );
            if let Ok(prompt) = prompt {
                let tokens = gk_estimate(&prompt);
                assert!(tokens <= budget.max(100), "{query:?}: prompt of {tokens} tokens over {budget}");
            }
        }
    }
    let prompt = s.build_prompt_with("shard key of shop.orders, and the index scope", &wide)?;
    assert!(prompt.contains("\"evidence_ref\":\"table_ctx.json\""), "{prompt}");
    Ok(())
}

fn gk_estimate(text: &str) -> u32 {
    use ctxgate::tokens::TokenEstimator;
    ctxgate::tokens::CharEstimator.estimate(text)
}

#[test]
fn put_writes_the_full_document_and_prints_the_projection() -> TestResult {
    let env = TestEnv::new()?;
    let root = env.dir.path().join("evidence");
    let source = fixture_tree().join("round_1/baseline.json");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/evidence/spec.json");
    let root_arg = root.to_str().unwrap();
    let put = env
        .run([
            "--evidence-root",
            root_arg,
            "evidence",
            "put",
            "--ref",
            "round_1/baseline.json",
            "--spec",
            spec.to_str().unwrap(),
            source.to_str().unwrap(),
        ])?
        .ok()?;
    // Disk: the whole document, byte for byte. Stdout: the projection.
    assert_eq!(std::fs::read(root.join("round_1/baseline.json"))?, std::fs::read(&source)?);
    let projection: Projection = serde_json::from_str(&put.stdout)?;
    assert_eq!(projection.kind, "baseline_facts");
    assert!(put.stdout.len() * 10 < std::fs::metadata(&source)?.len() as usize);
    let again = env
        .run([
            "--evidence-root",
            root_arg,
            "evidence",
            "project",
            "round_1/baseline.json",
            "--spec",
            spec.to_str().unwrap(),
        ])?
        .ok()?;
    assert_eq!(again.stdout_bytes, put.stdout_bytes, "the same bytes every time");
    // Read by reference: one part, by pointer.
    let part = env
        .run([
            "--evidence-root",
            root_arg,
            "evidence",
            "show",
            "round_1/baseline.json",
            "--pointer",
            "/result/rows/2999/order_id",
        ])?
        .ok()?;
    assert_eq!(part.stdout.trim(), "902999");
    let whole = env.run(["--evidence-root", root_arg, "evidence", "show", "round_1/baseline.json"])?.ok()?;
    assert_eq!(whole.stdout_bytes, std::fs::read(&source)?);

    // The same bytes again: accepted. Other bytes under the ref: refused, the file unchanged.
    env.run([
        "--evidence-root",
        root_arg,
        "evidence",
        "put",
        "--ref",
        "round_1/baseline.json",
        source.to_str().unwrap(),
    ])?
    .ok()?;
    let other = env.dir.path().join("other.json");
    std::fs::write(&other, "{\"a\": 1}")?;
    let refused = env
        .run([
            "--evidence-root",
            root_arg,
            "--json",
            "evidence",
            "put",
            "--ref",
            "round_1/baseline.json",
            other.to_str().unwrap(),
        ])?
        .expect_code(1)?;
    assert_eq!(refused.json_error()?.error.kind, "evidence");
    assert_eq!(std::fs::read(root.join("round_1/baseline.json"))?, std::fs::read(&source)?);
    Ok(())
}

#[test]
fn a_tiny_document_is_selected_whole_and_costs_no_more_than_itself() -> TestResult {
    let env = TestEnv::new()?;
    let root = env.dir.path().join("evidence");
    let root_arg = root.to_str().ok_or("utf-8 path")?;
    let text = "rollout 7781 halted: quota exceeded!\n\n";
    let json = r#"{"node": 88}"#;
    assert_eq!((text.len(), json.len()), (38, 12));
    env.add("s", "We are rolling out the new build.", "Watching the dashboards.")?;
    for (reference, document, content, query) in [
        ("tool-output/s/rollout.txt", text, Value::from(text), "why was rollout 7781 halted"),
        ("probe.json", json, serde_json::json!({"node": 88}), "which node 88"),
    ] {
        let file = env.dir.path().join("doc");
        std::fs::write(&file, document)?;
        let put = env
            .run([
                "--evidence-root",
                root_arg,
                "evidence",
                "put",
                "--ref",
                reference,
                file.to_str().unwrap(),
            ])?
            .ok()?;
        // Printed, stored and selected alike: the document itself with its ref, nothing else.
        let printed: Value = serde_json::from_str(&put.stdout)?;
        let envelope = serde_json::json!({
            "schema_version": "ctxgate-evidence/v1", "kind": printed["kind"], "evidence_ref": reference,
            "content": content,
        });
        assert_eq!(printed, envelope);
        let fixed = serde_json::to_string(&serde_json::json!({
            "schema_version": "ctxgate-evidence/v1", "kind": printed["kind"], "evidence_ref": reference,
            "content": "",
        }))?;
        // The document, its escaped newlines, and the envelope's fixed keys: no more.
        let most = gk_estimate(document)
            + gk_estimate(&"\\".repeat(document.matches('\n').count()))
            + gk_estimate(&fixed);

        let doc: SelectDoc = env.select("s", &[], query)?;
        doc.check_invariants()?;
        let chosen = doc
            .evidence
            .iter()
            .find(|e| e.evidence_ref == reference)
            .ok_or_else(|| format!("{reference} not selected for {query:?}: {doc:#?}"))?;
        assert_eq!(chosen.projection, envelope);
        assert!(chosen.tokens <= most, "{reference}: {} tokens, at most {most}", chosen.tokens);
        let listed: Value = env.run(["--json", "evidence", "list"])?.ok()?.json()?;
        let listed = listed["documents"]
            .as_array()
            .and_then(|docs| docs.iter().find(|d| d["evidence_ref"] == reference))
            .ok_or("listed")?;
        assert_eq!(listed["projection_tokens"], chosen.tokens, "{listed}");
    }
    Ok(())
}

#[test]
fn rebuild_refits_a_projection_stored_before_small_documents_were_given_whole() -> TestResult {
    let env = TestEnv::new()?;
    let text = "rollout 7781 halted: quota exceeded!\n\n";
    let (now, listed) = {
        let gk = Gatekeeper::open(&env.db, Options::default())?;
        let now =
            gk.put_evidence("tool-output/s/rollout.txt", text.as_bytes(), &EvidenceOptions::default())?;
        (now, gk.list_evidence()?)
    };
    assert_eq!(now.content, Some(Value::from(text)));
    // The record as the version before stored it: head, line count and size, every list.
    let old = serde_json::json!({
        "schema_version": "ctxgate-evidence/v1", "kind": "text", "evidence_ref": "tool-output/s/rollout.txt",
        "facts": {"head": text, "line_count": 2, "bytes": 38},
        "omitted_from_context": [], "known_unknowns": [], "blocked_decisions": [],
        "claim_constraints": [], "agent_space": []
    })
    .to_string();
    {
        let options = ctxgate::store::StoreOptions {
            cache_bytes: 1 << 20,
            busy_timeout: std::time::Duration::from_secs(5),
            quick_repair: false,
        };
        let store = ctxgate::store::Store::open(&env.db, &options)?;
        store.write(|view| -> Result<(), ctxgate::store::Error> {
            let (_, mut record) = view.evidence_by_ref("tool-output/s/rollout.txt")?.expect("stored");
            record.projection_tokens = gk_estimate(&old);
            record.projection = old.clone();
            view.put_evidence(&record)?;
            Ok(())
        })?;
    }
    let stale = Gatekeeper::open(&env.db, Options::default())?.list_evidence()?;
    assert!(stale[0].projection_tokens > listed[0].projection_tokens, "{stale:?}");

    ctxgate::jobs::rebuild(&env.db, &Options::default())?;
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    assert_eq!(gk.list_evidence()?, listed, "as stored now");
    gk.session("s")?.add_turn("We roll out the build.", "Watching.")?;
    let selected = gk.session("s")?.select("why was rollout 7781 halted")?;
    assert_eq!(selected.evidence.len(), 1, "{selected:#?}");
    assert_eq!(selected.evidence[0].projection, serde_json::to_value(&now)?);
    Ok(())
}

#[test]
fn refs_cannot_escape_the_root() -> TestResult {
    let env = TestEnv::new()?;
    let root = env.dir.path().join("evidence");
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&outside)?;
    std::fs::write(outside.join("secret.json"), "{\"password\": \"hunter2\"}")?;
    #[cfg(unix)]
    std::os::unix::fs::symlink(&outside, root.join("link"))?;
    let input = env.dir.path().join("doc.json");
    std::fs::write(&input, "{\"a\": 1}")?;
    let root_arg = root.to_str().unwrap();
    let mut refs = vec![
        "/tmp/x.json".to_string(),
        "../x.json".to_string(),
        "a/../../x.json".to_string(),
        outside.join("y.json").display().to_string(),
    ];
    if cfg!(unix) {
        refs.push("link/new.json".to_string());
    }
    for reference in &refs {
        let run = env
            .run([
                "--evidence-root",
                root_arg,
                "--json",
                "evidence",
                "put",
                "--ref",
                reference,
                input.to_str().unwrap(),
            ])?
            .expect_code(1)?;
        assert_eq!(run.json_error()?.error.kind, "bad_ref", "{reference}: {}", run.stderr);
    }
    assert_eq!(std::fs::read_dir(&outside)?.count(), 1, "nothing written outside the root");
    assert!(!env.dir.path().join("x.json").exists());
    if cfg!(unix) {
        let run = env
            .run(["--evidence-root", root_arg, "--json", "evidence", "show", "link/secret.json"])?
            .expect_code(1)?;
        assert_eq!(run.json_error()?.error.kind, "bad_ref");
        assert!(!run.stdout.contains("hunter2"));
        // Indexing the tree skips the link with the reason.
        let gk = Gatekeeper::open(&env.db, Options::default())?;
        let report = gk.index_evidence(&root, &EvidenceOptions::default())?;
        assert!(report.skipped.iter().any(|s| s.path.ends_with("link")), "{report:?}");
        assert!(gk.list_evidence()?.iter().all(|d| !d.evidence_ref.starts_with("link")));
    }
    Ok(())
}

/// Refs that print as blank or as another name are refused with the reason, and nothing is
/// written (issue 54, finding 22).
#[test]
fn blank_and_invisible_refs_are_refused() -> TestResult {
    let env = TestEnv::new()?;
    let root = env.dir.path().join("evidence");
    let input = env.dir.path().join("doc.json");
    std::fs::write(&input, "{\"a\": 1}")?;
    let root_arg = root.to_str().ok_or("root")?;
    for (reference, why) in [
        (" ", "only whitespace"),
        ("runs/ /a.json", "only whitespace"),
        ("\u{202E}nosj.exe", "bidirectional override"),
        ("a\u{200B}.json", "zero-width"),
        ("a\u{7f}.json", "control character"),
    ] {
        let args = ["--evidence-root", root_arg, "--json", "evidence", "put", "--ref", reference];
        let run = env.run(args.iter().copied().chain([input.to_str().ok_or("input")?]))?.expect_code(1)?;
        let error = run.json_error()?.error;
        assert_eq!(error.kind, "bad_ref", "{reference:?}: {}", run.stderr);
        assert!(error.message.contains(why), "{reference:?}: {}", error.message);
    }
    let stored = if root.exists() { walk_files(&root)? } else { Vec::new() };
    assert!(stored.is_empty(), "nothing stored: {stored:?}");
    Ok(())
}

/// The regular files under `dir`, recursively.
fn walk_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(walk_files(&path)?);
        } else {
            out.push(path);
        }
    }
    Ok(out)
}

#[test]
fn select_json_reports_evidence_with_its_ref() -> TestResult {
    let env = TestEnv::new()?;
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/evidence/spec.json");
    env.run(["evidence", "index", fixture_tree().to_str().unwrap(), "--spec", spec.to_str().unwrap()])?
        .ok()?;
    env.add("s", "We are tuning the orders query.", "The baseline ran first.")?;
    let doc: SelectDoc = env.select("s", &[], "improvement_percent and verdict of the optimized query")?;
    doc.check_invariants()?;
    let refs: Vec<&str> = doc.evidence.iter().map(|e| e.evidence_ref.as_str()).collect();
    assert!(refs.contains(&"round_2/execute_result.json"), "{refs:?}");
    let off: SelectDoc =
        env.select("s", &["--no-evidence"], "improvement_percent and verdict of the optimized query")?;
    assert!(off.evidence.is_empty());
    Ok(())
}

#[test]
fn verify_checks_evidence_and_rebuild_keeps_it() -> TestResult {
    let env = TestEnv::new()?;
    let tree = env.dir.path().join("tree");
    copy_tree(&fixture_tree(), &tree)?;
    let spec = spec();
    let options = EvidenceOptions { spec: Some(&spec), kind: None };
    let query = "shard key of shop.orders, and the index scope";
    let wide = SelectOptions { budget: Some(16_000), ..Default::default() };
    let (before, listed) = {
        let gk = Gatekeeper::open(&env.db, Options::default())?;
        gk.index_evidence(&tree, &options)?;
        gk.session("s")?
            .add_turn("We tune the orders query on the sharded cluster.", "First the table context.")?;
        gk.forget_evidence(&["table_ctx/shop.orders/indexes.json".to_string()])?;
        let verified = gk.verify()?;
        assert!(verified.is_ok(), "{:?}", verified.problems);
        assert_eq!(verified.evidence, 10);
        (gk.session("s")?.select_with(query, &wide)?, gk.list_evidence()?)
    };
    assert!(!before.evidence.is_empty());

    // A document frequency off by one is reported by key.
    {
        let redb = redb::Database::open(&env.db)?;
        let terms = redb::TableDefinition::<u64, u32>::new("evidence_terms");
        let txn = redb.begin_write()?;
        {
            let mut table = txn.open_table(terms)?;
            let (hash, df) = {
                use redb::ReadableTable;
                let first = table.first()?.ok_or("no evidence terms")?;
                (first.0.value(), first.1.value())
            };
            table.insert(hash, df + 1)?;
        }
        txn.commit()?;
    }
    let report = Gatekeeper::open(&env.db, Options::default())?.verify()?;
    assert!(report.problems.iter().any(|p| p.key.starts_with("evidence_terms ")), "{:?}", report.problems);

    // Rebuild derives it all again: anchors from the files, or from the projection of a file
    // that changed since it was indexed.
    std::fs::write(tree.join("table_ctx/shop.orders/ddl.sql"), "CREATE TABLE changed (id INT);\n")?;
    let rebuilt = ctxgate::jobs::rebuild(&env.db, &Options::default())?;
    assert_eq!((rebuilt.evidence, rebuilt.evidence_from_projection), (9, 1));
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    // The changed file is the one problem verify finds: its bytes are not the indexed ones
    // (`evidence show` refuses it), and the rest derived again agrees.
    let verified = gk.verify()?;
    let keys: Vec<&str> = verified.problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["evidence table_ctx/shop.orders/ddl.sql"], "{:?}", verified.problems);
    let err = gk.read_evidence("table_ctx/shop.orders/ddl.sql", None).expect_err("a changed file is refused");
    assert_eq!(err.kind(), "evidence_changed", "{err}");
    assert_eq!(gk.list_evidence()?, listed);
    let after = gk.session("s")?.select_with(query, &wide)?;
    assert_eq!(after.blocks, before.blocks);
    // Scores move a little (the changed file's length); the projections chosen do not.
    let chosen = |s: &ctxgate::Selection| -> Vec<(String, Value)> {
        s.evidence.iter().map(|e| (e.evidence_ref.clone(), e.projection.clone())).collect()
    };
    assert_eq!(chosen(&after), chosen(&before));
    Ok(())
}

#[test]
fn imported_tool_output_becomes_evidence_of_its_session() -> TestResult {
    let env = TestEnv::new()?;
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/import/claude-code/session.jsonl");
    let gk = Gatekeeper::open(&env.db, Options::default())?;
    let report = gk.import(std::slice::from_ref(&log), &ctxgate::ImportOptions::default())?;
    assert!(report.tool_outputs >= 4, "{report:?}");
    let session = gk.sessions()?.remove(0).name;
    let listed = gk.list_evidence()?;
    assert_eq!(listed.len() as u64, report.tool_outputs);
    for d in &listed {
        assert!(d.evidence_ref.starts_with(&format!("tool-output/{session}/")), "{d:?}");
        assert_eq!(d.session.as_deref(), Some(session.as_str()));
    }
    // The full output is on disk under the evidence root, readable by ref.
    let failing = listed
        .iter()
        .find(|d| {
            String::from_utf8_lossy(&gk.read_evidence(&d.evidence_ref, None).unwrap()).contains("left: 5400s")
        })
        .ok_or("the failing test output is stored")?;
    assert!(gk.evidence_root()?.join(&failing.evidence_ref).is_file());

    // A selection in the session can offer it.
    let selection = gk.session(&session)?.select_with(
        "duration hours assertion failed 5400s",
        &SelectOptions { budget: Some(16_000), ..Default::default() },
    )?;
    assert!(selection.evidence.iter().any(|e| e.evidence_ref == failing.evidence_ref), "{selection:#?}");
    // Another session does not see it.
    gk.session("other")?.add_turn("duration hours 5400s", "unrelated")?;
    let other = gk.session("other")?.select("duration hours assertion failed 5400s")?;
    assert!(other.evidence.is_empty());

    // Importing again stores nothing new; forgetting the session drops its evidence.
    let again = gk.import(std::slice::from_ref(&log), &ctxgate::ImportOptions::default())?;
    assert_eq!((again.new_turns, again.tool_outputs), (0, 0));
    let forgotten = gk.forget_session(&session)?;
    assert_eq!(forgotten.evidence, report.tool_outputs);
    assert!(gk.list_evidence()?.is_empty());
    assert!(gk.verify()?.is_ok());

    // --no-evidence: turns only.
    let env2 = TestEnv::new()?;
    let gk2 = Gatekeeper::open(&env2.db, Options::default())?;
    let without = gk2.import(&[log], &ctxgate::ImportOptions { evidence: false, ..Default::default() })?;
    assert_eq!(without.tool_outputs, 0);
    assert!(gk2.list_evidence()?.is_empty());
    Ok(())
}
