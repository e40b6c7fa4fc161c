//! Random sequences of operations on a real index file, checked against a model (a map of
//! sessions to their turns): adds, imports, folds, forgets, compaction, rebuilds, reopening,
//! evidence puts. After every sequence the index holds exactly the model's turns, `verify`
//! (postings, df and N against the turns) finds nothing wrong, a selection only returns turns
//! of its own session, answers are the same before and after each compaction and rebuild, and
//! one scoring thread answers as two do.

use ctxgate::{EvidenceOptions, Gatekeeper, Options};
use proptest::prelude::*;
use std::collections::BTreeMap;

const WORDS: &[&str] = &[
    "redis",
    "lock",
    "ttl",
    "postgres",
    "vacuum",
    "index",
    "kafka",
    "lag",
    "分布式",
    "锁",
    "续期",
    "证书",
    "ingress",
    "502",
    "v1.2.3",
    "timeout",
    "retry",
];

#[derive(Debug, Clone)]
enum Op {
    Add { session: usize, user: Vec<usize>, assistant: Vec<usize> },
    Fold,
    Forget { session: usize },
    Compact,
    Reopen,
    Rebuild,
    Import { session: usize, turns: Vec<(Vec<usize>, Vec<usize>)> },
    PutEvidence { name: usize, words: Vec<usize> },
}

fn op() -> impl Strategy<Value = Op> {
    let text = || proptest::collection::vec(0..WORDS.len(), 1..8);
    prop_oneof![
        8 => (0usize..3, text(), text()).prop_map(|(session, user, assistant)| Op::Add { session, user, assistant }),
        1 => Just(Op::Fold),
        1 => (0usize..3).prop_map(|session| Op::Forget { session }),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Rebuild),
        1 => (0usize..3, proptest::collection::vec((text(), text()), 1..4))
            .prop_map(|(session, turns)| Op::Import { session, turns }),
        1 => (0usize..4, text()).prop_map(|(name, words)| Op::PutEvidence { name, words }),
    ]
}

fn sentence(words: &[usize]) -> String {
    words.iter().map(|&w| WORDS[w]).collect::<Vec<_>>().join(" ") + "."
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let path = dir.path().join("index.redb");
    let open = || Gatekeeper::open(&path, Options { threads: 1, ..Options::default() });
    let mut gk = open().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut model: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    let mut evidence: BTreeMap<String, String> = BTreeMap::new();
    let fail = |e: ctxgate::Error| TestCaseError::fail(e.to_string());
    for op in ops {
        match op {
            Op::Add { session, user, assistant } => {
                let name = format!("s{session}");
                let (user, assistant) = (sentence(user), sentence(assistant));
                let id = gk.session(&name).map_err(fail)?.add_turn(&user, &assistant).map_err(fail)?;
                let turns = model.entry(name).or_default();
                prop_assert_eq!(id as usize, turns.len());
                turns.push((user, assistant));
            }
            Op::Fold => gk.fold_pending().map_err(fail)?,
            Op::Forget { session } => {
                let name = format!("s{session}");
                let result = gk.forget_session(&name);
                match model.remove(&name) {
                    Some(turns) => prop_assert_eq!(result.map_err(fail)?.turns, turns.len() as u64),
                    None => {
                        let unknown = matches!(result, Err(ctxgate::Error::UnknownSession { .. }));
                        prop_assert!(unknown, "forgetting a session that does not exist");
                    }
                }
            }
            Op::Compact => {
                let before = answers(&gk, &model)?;
                gk.compact().map_err(fail)?;
                prop_assert_eq!(answers(&gk, &model)?, before, "answers after compact");
            }
            Op::Reopen => {
                drop(gk);
                gk = open().map_err(fail)?;
            }
            Op::Rebuild => {
                let before = answers(&gk, &model)?;
                drop(gk);
                ctxgate::jobs::rebuild(&path, &Options::default()).map_err(fail)?;
                gk = open().map_err(fail)?;
                prop_assert_eq!(answers(&gk, &model)?, before, "answers after rebuild");
            }
            Op::Import { session, turns } => {
                // A log holding the session's stored turns and then new ones: only those are added.
                let name = format!("s{session}");
                let mut all = model.get(&name).cloned().unwrap_or_default();
                all.extend(turns.iter().map(|(u, a)| (sentence(u), sentence(a))));
                let log = dir.path().join("log.jsonl");
                let lines: String = all
                    .iter()
                    .map(|(u, a)| {
                        serde_json::json!({"session": name, "user": u, "assistant": a}).to_string() + "\n"
                    })
                    .collect();
                std::fs::write(&log, lines).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let report = gk.import(&[log], &ctxgate::ImportOptions::default()).map_err(fail)?;
                prop_assert_eq!(report.new_turns, turns.len() as u64);
                model.insert(name, all);
            }
            Op::PutEvidence { name, words } => {
                let reference = format!("notes/{name}.txt");
                let text = sentence(words);
                let result = gk.put_evidence(&reference, text.as_bytes(), &EvidenceOptions::default());
                match evidence.get(&reference) {
                    // Evidence is never modified: other bytes under a stored ref are refused.
                    Some(stored) if *stored != text => prop_assert!(result.is_err()),
                    _ => {
                        result.map_err(fail)?;
                        evidence.insert(reference, text);
                    }
                }
            }
        }
    }
    // The index holds exactly the model.
    let sessions: BTreeMap<String, u32> =
        gk.sessions().map_err(fail)?.into_iter().map(|s| (s.name, s.turns)).collect();
    let expected: BTreeMap<String, u32> = model.iter().map(|(k, v)| (k.clone(), v.len() as u32)).collect();
    prop_assert_eq!(sessions, expected);
    for (name, turns) in &model {
        let session = gk.session(name).map_err(fail)?;
        for (i, (user, assistant)) in turns.iter().enumerate() {
            let stored =
                session.turn(i as u32).map_err(fail)?.ok_or_else(|| TestCaseError::fail("turn missing"))?;
            prop_assert_eq!((&stored.user, &stored.assistant), (user, assistant));
        }
        let selection = session.select("redis lock ttl 分布式 锁").map_err(fail)?;
        for block in &selection.blocks {
            prop_assert!((block.turn_id as usize) < turns.len());
        }
        prop_assert!(selection.budget.used <= selection.budget.limit);
    }
    let listed: Vec<String> = gk.list_evidence().map_err(fail)?.into_iter().map(|d| d.evidence_ref).collect();
    prop_assert_eq!(listed, evidence.keys().cloned().collect::<Vec<_>>());
    let report = gk.verify().map_err(fail)?;
    prop_assert!(report.is_ok(), "{:?}", report.problems);
    // One scoring thread answers as two do.
    let one = answers(&gk, &model)?;
    drop(gk);
    let two = Gatekeeper::open(&path, Options { threads: 2, ..Options::default() }).map_err(fail)?;
    prop_assert_eq!(answers(&two, &model)?, one, "1 thread == 2 threads");
    Ok(())
}

/// Every session's answer to a fixed query.
fn answers(
    gk: &Gatekeeper,
    model: &BTreeMap<String, Vec<(String, String)>>,
) -> Result<Vec<ctxgate::Selection>, TestCaseError> {
    model
        .keys()
        .map(|name| {
            gk.session(name)
                .and_then(|s| s.select("redis lock ttl 分布式 锁 kafka lag"))
                .map_err(|e| TestCaseError::fail(e.to_string()))
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn operation_sequences_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}
