//! Random sequences of operations on a real index file, checked against a model (a map of
//! sessions to their turns): adds, folds, forgets, compaction, reopening, evidence puts. After
//! every sequence the index holds exactly the model's turns, `verify` finds nothing wrong, and
//! a selection only ever returns turns of its own session.

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
                gk.compact().map_err(fail)?;
            }
            Op::Reopen => {
                drop(gk);
                gk = open().map_err(fail)?;
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
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn operation_sequences_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(&ops)?;
    }
}
