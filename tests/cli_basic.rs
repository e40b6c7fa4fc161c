//! The `ctxgate` binary on the happy path: add, select, gate, prompt, sessions, stats, and the
//! index persisting across processes. Every test spawns the real binary on a fresh index.

mod common;

use common::{
    AddDoc, GateDoc, Policy, PromptDoc, SessionDoc, SessionsDoc, TOPICS, TestEnv, TestResult, Topic,
    add_topics, estimate_tokens,
};

#[test]
fn add_prints_turn_ids_counted_per_session() -> TestResult {
    let env = TestEnv::new()?;
    assert_eq!(env.add("alpha", "first question about redis", "first answer")?, 0);
    assert_eq!(env.add("alpha", "second question about redis", "")?, 1);
    assert_eq!(env.add("beta", "", "an assistant-only turn in another session")?, 0, "sessions count apart");
    assert_eq!(env.add("alpha", "third question", "third answer")?, 2);
    assert_eq!(env.add("beta", "beta's second turn", "ok")?, 1);
    assert_eq!(env.add("beta", "beta's third turn", "ok")?, 2);
    Ok(())
}

#[test]
fn add_json_prints_session_turn_id_and_schema_version() -> TestResult {
    let env = TestEnv::new()?;
    for expected in 0..3 {
        let doc: AddDoc = env
            .run(["--json", "add", "-s", "json session", "-u", "a question", "-a", "an answer"])?
            .ok()?
            .json()?;
        assert_eq!(doc.session, "json session");
        assert_eq!(doc.turn_id, expected);
        assert_eq!(doc.schema_version, 1);
    }
    let other: AddDoc = env.run(["--json", "add", "-s", "other", "-u", "hello"])?.ok()?.json()?;
    assert_eq!((other.session.as_str(), other.turn_id), ("other", 0));
    Ok(())
}

#[test]
fn select_json_has_the_documented_shape_and_invariants() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    for query in [
        "Redis lock TTL renewal",
        "ingress certificate 502",
        "vacuum orders table",
        "something entirely unrelated to everything",
        "it still fails",
        "这个怎么办",
    ] {
        let doc = env.select("s", &[], query)?;
        doc.check_invariants().map_err(|e| format!("query {query:?}: {e}"))?;
        assert_eq!(doc.session, "s");
        assert_eq!(doc.query, query);
        assert_eq!(doc.policy, Policy::Minimal, "minimal is the default policy");
        assert_eq!(doc.budget.limit, 4000, "4000 is the default budget");
        for anchor in &doc.anchors {
            assert!(anchor.idf.is_finite() && anchor.idf > 0.0, "{query:?}: anchor {anchor:?}");
        }
        for block in &doc.blocks {
            assert!(block.turn_id < 3, "{query:?}: {block:?}");
            assert!(block.score.is_finite(), "{query:?}: {block:?}");
            assert!(
                !block.user.is_empty() || !block.assistant.is_empty(),
                "{query:?}: empty block {block:?}"
            );
        }
    }
    Ok(())
}

#[test]
fn select_finds_the_turn_that_talks_about_the_query() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    for (query, turn) in
        [("Redis lock TTL renewal", 0), ("Kubernetes ingress 502 certificate", 1), ("Postgres vacuum", 2)]
    {
        let doc = env.select("s", &[], query)?;
        doc.check_invariants()?;
        assert!(doc.turn_ids().contains(&turn), "{query:?} should select turn {turn}: {doc:#?}");
        assert!(doc.coverage > 0.0, "{query:?}: the selected turn covers some anchors: {doc:#?}");
        let block = doc.blocks.iter().find(|b| b.turn_id == turn).ok_or("block")?;
        let (user, assistant) = TOPICS[turn as usize];
        assert!(
            user.contains(block.user.as_str()) && assistant.contains(block.assistant.as_str()),
            "a block holds sentences of its own turn: {block:#?}"
        );
    }
    Ok(())
}

#[test]
fn select_with_budget_1_selects_nothing() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let doc = env.select("s", &["--budget", "1"], "Redis lock TTL renewal")?;
    doc.check_invariants()?;
    assert_eq!(doc.budget.limit, 1);
    assert_eq!(doc.budget.used, 0);
    assert!(doc.blocks.is_empty(), "no turn fits in one token: {doc:#?}");
    assert_eq!(doc.empty_because.map(|e| e.reason).as_deref(), Some("none_fits"));
    // The text output says why in one line.
    let text = env.run(["select", "--session", "s", "--budget", "1", "Redis lock TTL renewal"])?.ok()?.stdout;
    assert!(text.lines().any(|l| l.starts_with("nothing   ") && l.contains("budget")), "{text}");
    Ok(())
}

#[test]
fn select_as_of_never_returns_later_turns() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    // Turn 2 mentions the query; without --as-of it is selected, so the cut is what removes it.
    let query = "Postgres vacuum orders table";
    let all = env.select("s", &[], query)?;
    assert!(all.turn_ids().contains(&2), "{all:#?}");
    for as_of in 0..=3u32 {
        let doc = env.select("s", &["--as-of", &as_of.to_string()], query)?;
        doc.check_invariants()?;
        assert!(
            doc.blocks.iter().all(|b| b.turn_id < as_of),
            "--as-of {as_of} returned later turns: {doc:#?}"
        );
    }
    let as_of_3 = env.select("s", &["--as-of", "3"], query)?;
    assert_eq!(as_of_3, all, "--as-of equal to the turn count is the same as no --as-of");
    Ok(())
}

#[test]
fn select_fill_uses_at_least_as_many_tokens_as_minimal() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    env.add("s", "Redis lock renewal failed again after a network partition.", "Use a fencing token.")?;
    env.add("s", "Can Redis replication lose the lock?", "Yes, failover can lose a lock: consider Redlock.")?;
    for query in ["Redis lock", "ingress certificate", "Redis lock TTL renewal with fencing token"] {
        let minimal = env.select("s", &["--policy", "minimal"], query)?;
        let fill = env.select("s", &["--policy", "fill"], query)?;
        minimal.check_invariants()?;
        fill.check_invariants()?;
        assert_eq!(minimal.policy, Policy::Minimal);
        assert_eq!(fill.policy, Policy::Fill);
        assert!(
            fill.budget.used >= minimal.budget.used,
            "{query:?}: fill used {} < minimal used {}",
            fill.budget.used,
            minimal.budget.used
        );
        assert!(fill.blocks.len() >= minimal.blocks.len(), "{query:?}: {minimal:#?}\n{fill:#?}");
    }
    // With room to spare, fill spends it on more turns than the smallest cover.
    let minimal = env.select("s", &["--policy", "minimal"], "Redis lock")?;
    let fill = env.select("s", &["--policy", "fill"], "Redis lock")?;
    assert!(fill.budget.used > minimal.budget.used, "{minimal:#?}\n{fill:#?}");
    Ok(())
}

#[test]
fn select_human_output_explains_the_selection() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let run = env.run(["select", "-s", "s", "Redis lock TTL renewal"])?.ok()?;
    assert!(run.stdout.starts_with("gate "), "{}", run.stdout);
    assert!(run.stdout.contains("anchors "), "{}", run.stdout);
    assert!(run.stdout.contains("of 4000 tokens"), "{}", run.stdout);
    assert!(run.stdout.contains("── turn 0"), "{}", run.stdout);
    assert!(run.stdout.contains("Redis lock"), "{}", run.stdout);
    assert!(run.stderr.is_empty(), "nothing on stderr on success: {}", run.stderr);
    Ok(())
}

#[test]
fn gate_reports_deictic_patterns() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    for (query, word) in [("it still fails", "it"), ("这个怎么办", "这个")] {
        let doc: GateDoc = env.run(["--json", "gate", "-s", "s", query])?.ok()?.json()?;
        assert_eq!(doc.session, "s");
        assert_eq!(doc.query, query);
        assert_eq!(doc.schema_version, 1);
        let pattern = doc.decision.deictic.as_deref().ok_or(format!("{query:?}: no deictic pattern"))?;
        assert!(pattern.contains(word), "{query:?}: pattern {pattern:?}");
        assert_eq!(doc.decision.topic, Topic::Continue, "a deictic query continues: {doc:#?}");

        let human = env.run(["gate", "-s", "s", query])?.ok()?;
        assert!(human.stdout.starts_with("continue"), "{}", human.stdout);
        assert!(human.stdout.contains(&format!("deictic {pattern}")), "{}", human.stdout);

        let selected = env.select("s", &[], query)?;
        assert_eq!(selected.decision, doc.decision, "select and gate decide alike");
    }
    let plain: GateDoc = env.run(["--json", "gate", "-s", "s", "Postgres vacuum"])?.ok()?.json()?;
    assert_eq!(plain.decision.deictic, None, "{plain:#?}");
    Ok(())
}

#[test]
fn gate_says_switch_for_a_brand_new_topic() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let query = "Terraform provider plugin checksum mismatch";
    let doc: GateDoc = env.run(["--json", "gate", "-s", "s", query])?.ok()?.json()?;
    assert_eq!(doc.decision.topic, Topic::Switch, "{doc:#?}");
    assert_eq!(doc.decision.deictic, None);
    assert!(doc.decision.overlap < 0.2 && doc.decision.new_ratio > 0.7, "{doc:#?}");
    let human = env.run(["gate", "-s", "s", query])?.ok()?;
    assert!(human.stdout.starts_with("switch"), "{}", human.stdout);
    // The last turn is about Postgres vacuum: a query on it continues.
    let same: GateDoc =
        env.run(["--json", "gate", "-s", "s", "Postgres vacuum orders autovacuum"])?.ok()?.json()?;
    assert_eq!(same.decision.topic, Topic::Continue, "{same:#?}");
    Ok(())
}

#[test]
fn prompt_holds_the_selected_turn_and_the_query() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let query = "How should I renew the Redis lock TTL?";
    let run = env.run(["prompt", "-s", "s", query])?.ok()?;
    assert!(run.stdout.contains("How do I expire a Redis lock"), "{}", run.stdout);
    assert!(run.stdout.contains(query), "{}", run.stdout);
    assert!(!run.stdout.contains("Kubernetes"), "an unrelated turn is left out: {}", run.stdout);

    let doc: PromptDoc = env.run(["--json", "prompt", "-s", "s", query])?.ok()?.json()?;
    assert_eq!((doc.session.as_str(), doc.query.as_str(), doc.schema_version), ("s", query, 1));
    assert_eq!(doc.prompt, run.stdout, "the JSON prompt is the printed prompt");
    Ok(())
}

#[test]
fn prompt_respects_the_budget() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    env.add(
        "s",
        "The Redis lock sometimes expires before the job ends. The job takes two minutes. Why?",
        "The TTL is shorter than the job. Renew the lock TTL from a watchdog thread every ten seconds. \
         Or raise the TTL above the longest job. Store a token so only the owner renews it.",
    )?;
    let query = "Redis lock TTL renewal watchdog";
    let full = env.run(["prompt", "-s", "s", query])?.ok()?;
    let full_tokens = estimate_tokens(&full.stdout);
    assert!(full.stdout.contains("[turn 3]"), "{}", full.stdout);
    let question_only = estimate_tokens(&format!(
        "Earlier conversation (selected by ctxgate, pruned to the relevant sentences):\n\n\
         Current question:\n{query}\n"
    ));
    let mut budgets: Vec<u32> = (question_only..full_tokens + 40).step_by(37).collect();
    budgets.push(full_tokens);
    for budget in budgets {
        let run = env.run(["prompt", "-s", "s", "--budget", &budget.to_string(), query])?.ok()?;
        let tokens = estimate_tokens(&run.stdout);
        assert!(tokens <= budget, "--budget {budget}: the prompt is ~{tokens} tokens:\n{}", run.stdout);
        assert!(run.stdout.contains(query), "--budget {budget}: the question is always there");
    }
    Ok(())
}

#[test]
fn sessions_and_stats_reflect_the_adds() -> TestResult {
    let env = TestEnv::new()?;
    // No index yet: `sessions` does not create one (tests/read_only.rs has the rest).
    env.run(["sessions"])?.expect_code(6)?;
    assert!(!env.db.exists());
    env.add("gone", "hello", "hi")?;
    env.run(["forget", "--session", "gone"])?.ok()?;
    let empty: SessionsDoc = env.run(["--json", "sessions"])?.ok()?.json()?;
    assert!(empty.sessions.is_empty());
    assert!(env.run(["sessions"])?.ok()?.stdout.contains("no sessions"));

    add_topics(&env, "first")?;
    env.add("second", "hello", "hi")?;

    let doc: SessionsDoc = env.run(["--json", "sessions"])?.ok()?.json()?;
    assert_eq!(doc.schema_version, 1);
    let names: Vec<(&str, u32)> = doc.sessions.iter().map(|s| (s.name.as_str(), s.turns)).collect();
    assert_eq!(names, [("first", 3), ("second", 1)], "sessions in creation order with their turn counts");
    for SessionDoc { segment_start, turns, .. } in &doc.sessions {
        assert!(segment_start < turns, "{doc:#?}");
    }
    let human = env.run(["sessions"])?.ok()?;
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", human.stdout);
    assert!(lines[0].trim_start().starts_with("3 turns") && lines[0].ends_with("first"), "{}", human.stdout);
    assert!(lines[1].trim_start().starts_with("1 turns") && lines[1].ends_with("second"), "{}", human.stdout);

    let stats = env.stats()?;
    assert_eq!((stats.sessions, stats.turns, stats.schema_version), (2, 4, 1), "{stats:#?}");
    assert!(stats.file_bytes > 0, "{stats:#?}");
    assert!(stats.anchors > 0 && stats.postings >= stats.anchors, "{stats:#?}");
    assert!(stats.pending_turns <= stats.turns, "{stats:#?}");
    assert_eq!(stats.index, env.db.display().to_string());
    let file_len = std::fs::metadata(&env.db)?.len();
    assert_eq!(stats.file_bytes, file_len, "file_bytes is the index file's size");

    let human = env.run(["stats"])?.ok()?;
    assert!(human.stdout.contains(&env.db.display().to_string()), "{}", human.stdout);
    let field = |name: &str| -> Option<String> {
        human.stdout.lines().find_map(|l| l.strip_prefix(name)).map(|rest| rest.trim().to_string())
    };
    assert_eq!(field("sessions").as_deref(), Some("2"), "{}", human.stdout);
    assert!(field("turns").is_some_and(|t| t.starts_with("4 ")), "{}", human.stdout);
    assert!(human.stdout.contains(&format!("({} bytes)", stats.file_bytes)), "{}", human.stdout);
    assert!(!human.stdout.contains("fragmented"), "tables only when asked: {}", human.stdout);

    // --tables: the bytes of each table, as redb counts them; rows as the index holds them.
    let doc: serde_json::Value = env.run(["--json", "stats", "--tables"])?.ok()?.json()?;
    let tables = doc["tables"].as_array().ok_or("no tables")?;
    let rows = |name: &str| tables.iter().find(|t| t["table"] == name).and_then(|t| t["rows"].as_u64());
    assert_eq!((rows("turns"), rows("sessions")), (Some(4), Some(2)), "{doc:#}");
    let in_tables: u64 = tables
        .iter()
        .map(|t| {
            ["stored_bytes", "metadata_bytes", "fragmented_bytes"]
                .iter()
                .map(|k| t[k].as_u64().unwrap_or(0))
                .sum::<u64>()
        })
        .sum();
    assert!(in_tables > 0 && in_tables <= file_len, "{in_tables} bytes in tables, file {file_len}: {doc:#}");
    let human = env.run(["stats", "--tables"])?.ok()?;
    let mut below_header = human.stdout.lines().skip_while(|l| !l.starts_with("table "));
    assert!(below_header.next().is_some_and(|h| h.contains("fragmented")), "{}", human.stdout);
    let turns_line = below_header.find(|l| l.starts_with("turns ")).ok_or("no turns line")?;
    assert_eq!(turns_line.split_whitespace().nth(1), Some("4"), "{}", human.stdout);
    Ok(())
}

#[test]
fn index_persists_across_processes_and_selection_is_deterministic() -> TestResult {
    let env = TestEnv::new()?;
    // Every add is its own process; the last select sees them all.
    add_topics(&env, "s")?;
    env.add(
        "s",
        "The Redis lock TTL renewal thread died.",
        "Restart the watchdog and alert on renewal failure.",
    )?;
    let sessions: SessionsDoc = env.run(["--json", "sessions"])?.ok()?.json()?;
    assert_eq!(sessions.sessions.len(), 1);
    assert_eq!(sessions.sessions[0].turns, 4);

    for query in ["Redis lock TTL renewal", "ingress 502", "it still fails", "这个怎么办"] {
        let args = ["--json", "select", "-s", "s", "--policy", "fill", "--", query];
        let first = env.run(args)?.ok()?;
        let second = env.run(args)?.ok()?;
        assert_eq!(first.stdout, second.stdout, "{query:?}: the same query twice gives the same JSON");
        let one = env.run(["--threads", "1"].iter().chain(args.iter()))?.ok()?;
        let two = env.run(["--threads", "2"].iter().chain(args.iter()))?.ok()?;
        assert_eq!(one.stdout, two.stdout, "{query:?}: --threads 1 and --threads 2 agree");
        assert_eq!(one.stdout, first.stdout, "{query:?}: the default thread count agrees too");
    }
    let doc = env.select("s", &[], "Redis lock TTL renewal")?;
    assert!(doc.turn_ids().contains(&3), "a turn added by an earlier process is found: {doc:#?}");
    Ok(())
}
