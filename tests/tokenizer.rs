//! `--tokenizer`: budgets in a model's real tokens. With `cl100k` or `o200k` every count a
//! selection reports is the encoding's own (`bpe-openai`, counted here independently of
//! ctxgate), the selected text and the prompt never exceed the budget in it, and `chars` (the
//! default) is what it always was.

mod common;

use common::{PromptDoc, SelectDoc, TestEnv, TestResult, add_topics, estimate_tokens};
use ctxgate::server::Core;
use ctxgate::tokens::Tokenizer;
use ctxgate::{Gatekeeper, Options, Policy, SelectOptions};
use serde_json::{Value, json};
use std::path::Path;

const SESSION: &str = "billing-platform";

/// Questions on each topic of the fixture, English and Chinese, one about the evidence.
const QUERIES: [&str; 5] = [
    "What TTL should the Redis lock use, and how do I renew it?",
    "Why does the planner pick a Seq Scan on orders despite the index?",
    "Kubernetes 滚动更新 502 怎么解决？",
    "How do I put a timeout on the asyncio billing coroutine?",
    "Why did rollout 7781 halt on node pool gpu-b?",
];

/// The tokens of `text` in `tokenizer`, counted by the encoding itself (not by ctxgate).
fn count(tokenizer: &str, text: &str) -> u32 {
    let n = match tokenizer {
        "cl100k" => bpe_openai::cl100k_base().count(text),
        "o200k" => bpe_openai::o200k_base().count(text),
        "chars" => estimate_tokens(text) as usize,
        other => panic!("no tokenizer {other}"),
    };
    u32::try_from(n).expect("a count that fits u32")
}

/// The multi-topic example conversation (Redis locks, Postgres, Kubernetes in Chinese, asyncio),
/// the three topics of `common` in a second session, and one evidence document.
fn fixture() -> TestResult<TestEnv> {
    let env = TestEnv::new()?;
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/example/conversation.jsonl");
    env.run(["import".as_ref(), log.as_os_str()])?.ok()?;
    add_topics(&env, "ops")?;
    let report = json!({
        "rollout": 7781, "status": "halted", "node_pool": "gpu-b",
        "reason": "quota exceeded: 64 of 64 GPUs in use", "retries": [1, 2, 3],
    });
    let file = env.dir.path().join("rollout.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&report)?)?;
    env.run(["evidence", "put", "--ref", "rollouts/7781.json", file.to_str().ok_or("path")?])?.ok()?;
    Ok(env)
}

/// Everything a selection in `tokenizer` with `limit` must satisfy, counted independently.
fn check_counts(tokenizer: &str, doc: &SelectDoc, limit: u32) -> TestResult {
    doc.check_invariants()?; // used == the sum of block and evidence tokens, used <= limit
    assert_eq!(doc.budget.limit, limit);
    let mut handed_over = 0;
    for block in &doc.blocks {
        let exact = count(tokenizer, &block.user) + count(tokenizer, &block.assistant);
        assert_eq!(block.tokens, exact, "{tokenizer}: turn {} of {:?}", block.turn_id, doc.query);
        handed_over += exact;
    }
    for evidence in &doc.evidence {
        let exact = count(tokenizer, &serde_json::to_string(&evidence.projection)?);
        assert_eq!(evidence.tokens, exact, "{tokenizer}: {} for {:?}", evidence.evidence_ref, doc.query);
        handed_over += exact;
    }
    assert_eq!(handed_over, doc.budget.used, "{tokenizer} {limit}: {doc:#?}");
    assert!(handed_over <= limit, "{tokenizer}: {handed_over} tokens handed over, budget {limit}");
    Ok(())
}

#[test]
fn the_binary_keeps_selections_and_prompts_within_real_token_budgets() -> TestResult {
    let env = fixture()?;
    for tokenizer in ["o200k", "cl100k"] {
        let mut selected_any = 0;
        for budget in [40u32, 120, 400, 4000] {
            let limit = budget.to_string();
            for (i, query) in QUERIES.iter().enumerate() {
                // The policies alternate over the queries so that both see every budget.
                let policy = if (i + budget as usize).is_multiple_of(2) { "fill" } else { "minimal" };
                let flags = ["--tokenizer", tokenizer];
                let select = ["select", "-s", SESSION, "--budget", &limit, "--policy", policy, "--", query];
                let doc: SelectDoc = env.run(["--json"].iter().chain(&flags).chain(&select))?.ok()?.json()?;
                check_counts(tokenizer, &doc, budget)?;
                selected_any += usize::from(!doc.blocks.is_empty() || !doc.evidence.is_empty());

                let prompt = ["prompt", "-s", SESSION, "--budget", &limit, "--policy", policy, "--", query];
                let run = env.run(flags.iter().chain(&prompt))?;
                let question = count(tokenizer, &format!("Current question:\n{query}\n"));
                if question > budget {
                    assert_eq!(run.code, Some(1), "the question alone is over the budget: {run:?}");
                    assert!(run.stderr.contains("over the budget"), "{}", run.stderr);
                    continue;
                }
                let text = run.ok()?.stdout;
                let tokens = count(tokenizer, &text);
                assert!(
                    tokens <= budget,
                    "{tokenizer} {policy}: a prompt of {tokens} tokens, budget {budget}:\n{text}"
                );
                assert!(text.ends_with(&format!("Current question:\n{query}\n")), "{text}");
            }
        }
        assert!(selected_any >= 12, "{tokenizer}: only {selected_any} selections chose anything");
    }
    Ok(())
}

#[test]
fn prompts_fit_every_budget_through_the_library() -> TestResult {
    let env = fixture()?;
    for tokenizer in [Tokenizer::O200k, Tokenizer::Cl100k] {
        // Set per index (`Options`) and per call (`SelectOptions`): the same counts.
        let gk = Gatekeeper::open_read_only(&env.db, Options { tokenizer, ..Options::default() })?;
        let chars = Gatekeeper::open_read_only(&env.db, Options::default())?;
        let session = gk.session(SESSION)?;
        for query in QUERIES {
            let question = count(tokenizer.name(), &format!("Current question:\n{query}\n"));
            let mut grew = 0;
            let mut last_len = 0;
            for budget in (question..question + 700).step_by(9) {
                for policy in [Policy::Minimal, Policy::Fill] {
                    let options =
                        SelectOptions { budget: Some(budget), policy: Some(policy), ..Default::default() };
                    let prompt = session.build_prompt_with(query, &options)?;
                    let tokens = count(tokenizer.name(), &prompt);
                    assert!(
                        tokens <= budget,
                        "{tokenizer} {policy:?}: {tokens} tokens, budget {budget}:\n{prompt}"
                    );
                    let per_call = SelectOptions { tokenizer: Some(tokenizer), ..options };
                    assert_eq!(chars.session(SESSION)?.build_prompt_with(query, &per_call)?, prompt);

                    let selection = session.select_with(query, &options)?;
                    let doc: SelectDoc = serde_json::from_value(with_version(&selection)?)?;
                    check_counts(tokenizer.name(), &doc, budget)?;
                    if policy == Policy::Fill && prompt.len() > last_len {
                        grew += 1;
                        last_len = prompt.len();
                    }
                }
            }
            assert!(grew >= 2, "{tokenizer}: the prompt for {query:?} never grew with the budget");
        }
    }
    Ok(())
}

/// A library `Selection` as the CLI prints it (`schema_version` added).
fn with_version(selection: &ctxgate::Selection) -> TestResult<Value> {
    let mut value = serde_json::to_value(selection)?;
    value.as_object_mut().ok_or("an object")?.insert("schema_version".into(), json!(1));
    Ok(value)
}

#[test]
fn chars_is_the_default_and_prints_what_it_always_did() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let query = "Redis lock TTL for a crashed worker";
    let plain = env.run(["--json", "select", "-s", "s", "--", query])?.ok()?;
    let flagged = env.run(["--json", "--tokenizer", "chars", "select", "-s", "s", "--", query])?.ok()?;
    let by_env = common::ctxgate()
        .env("CTXGATE_TOKENIZER", "chars")
        .args(["--db".as_ref(), env.db.as_os_str()])
        .args(["--json", "select", "-s", "s", "--", query])
        .output()?;
    assert_eq!(flagged.stdout_bytes, plain.stdout_bytes);
    assert_eq!(by_env.stdout, plain.stdout_bytes);
    // The seed's estimate: characters × 1.5, rounded up, per side; turn 0 is the one.
    let doc: SelectDoc = plain.json()?;
    assert_eq!(doc.turn_ids(), [0]);
    let block = &doc.blocks[0];
    assert_eq!(block.tokens, estimate_tokens(&block.user) + estimate_tokens(&block.assistant));
    assert_eq!(doc.budget, common::Budget { limit: 4000, used: block.tokens });
    // A real encoding counts the same text in fewer tokens.
    let real: SelectDoc =
        env.run(["--json", "--tokenizer", "o200k", "select", "-s", "s", "--", query])?.ok()?.json()?;
    assert_eq!(real.turn_ids(), [0]);
    assert_eq!(real.blocks[0].user, block.user);
    assert!(real.budget.used * 3 < doc.budget.used, "{} vs {}", real.budget.used, doc.budget.used);
    Ok(())
}

#[test]
fn the_environment_sets_the_tokenizer_and_a_bad_name_is_a_usage_error() -> TestResult {
    let env = TestEnv::new()?;
    add_topics(&env, "s")?;
    let query = "ingress 502 after certificate rotation";
    let flagged = env.run(["--json", "--tokenizer", "cl100k", "select", "-s", "s", "--", query])?.ok()?;
    let by_env = common::ctxgate()
        .env("CTXGATE_TOKENIZER", "cl100k")
        .args(["--db".as_ref(), env.db.as_os_str()])
        .args(["--json", "select", "-s", "s", "--", query])
        .output()?;
    assert_eq!(by_env.stdout, flagged.stdout_bytes);
    let doc: SelectDoc = flagged.json()?;
    check_counts("cl100k", &doc, 4000)?;
    assert_eq!(doc.turn_ids(), [1]);

    let bad = env.run(["--tokenizer", "gpt2", "select", "-s", "s", "--", query])?.expect_code(2)?;
    assert!(bad.stderr.contains("[possible values: chars, cl100k, o200k]"), "{}", bad.stderr);
    Ok(())
}

#[test]
fn the_mcp_tools_take_a_tokenizer() -> TestResult {
    let env = fixture()?;
    let core = Core::new(env.db.clone(), Options::default());
    let query = QUERIES[0];
    for tokenizer in ["o200k", "cl100k"] {
        let args = json!({"session": SESSION, "query": query, "budget": 300, "tokenizer": tokenizer});
        let selected = core.call("select_context", args.as_object().cloned()).map_err(|e| e.message)?;
        let doc: SelectDoc = serde_json::from_value(selected.clone())?;
        check_counts(tokenizer, &doc, 300)?;
        assert!(!doc.blocks.is_empty(), "{doc:#?}");
        // The document the CLI prints for the same request.
        let cli = env.run([
            "--json",
            "--tokenizer",
            tokenizer,
            "select",
            "-s",
            SESSION,
            "--budget",
            "300",
            "--",
            query,
        ])?;
        // (Counts and blocks compared: an f64 parsed back from JSON may differ in its last bit.)
        let cli: SelectDoc = cli.ok()?.json()?;
        let counts =
            |d: &SelectDoc| (d.budget, d.blocks.iter().map(|b| (b.turn_id, b.tokens)).collect::<Vec<_>>());
        assert_eq!(counts(&cli), counts(&doc));

        let args = json!({"session": SESSION, "query": query, "budget": 120, "tokenizer": tokenizer});
        let prompted = core.call("build_prompt", args.as_object().cloned()).map_err(|e| e.message)?;
        let doc: PromptDoc = serde_json::from_value(prompted)?;
        assert!(doc.prompt.contains("[turn "), "{}", doc.prompt);
        assert!(count(tokenizer, &doc.prompt) <= 120, "{}", doc.prompt);
    }
    // Without the argument, the server's own tokenizer (`serve --tokenizer`) counts.
    let o200k = Core::new(env.db.clone(), Options { tokenizer: Tokenizer::O200k, ..Options::default() });
    let args = json!({"session": SESSION, "query": query});
    let by_server = o200k.call("select_context", args.as_object().cloned()).map_err(|e| e.message)?;
    let args = json!({"session": SESSION, "query": query, "tokenizer": "o200k"});
    let by_call = core.call("select_context", args.as_object().cloned()).map_err(|e| e.message)?;
    assert_eq!(by_server, by_call);
    let args = json!({"session": SESSION, "query": query, "tokenizer": "o200k_base"});
    let err = core.call("build_prompt", args.as_object().cloned()).err().ok_or("accepted o200k_base")?;
    assert_eq!(err.kind, "bad_input", "{}", err.message);
    Ok(())
}
