//! Selection on real dialogue: does the context ctxgate selects for a query hold the turns its
//! answer draws on, what does it spend, and how much of it comes from another conversation?
//!
//! The dev data labels gates, not evidence, so evidence is derived from the recorded answer:
//! an anchor of the assistant's reply to the query is *evidence-marking* if the query does not
//! contain it, it is rare in the set (in at most [`EVIDENCE_MAX_DF`] turns: a name, a number, a
//! particular thing) and an earlier turn of the session has it. The evidence turns of a task
//! are those earlier turns. Tasks without one are left out. A baseline computed in the same
//! run, the latest turns that fit the budget, puts the figures in proportion.
//!
//! In the spliced sets every `switch` label starts the next chained dialogue, so each turn's
//! dialogue is known and the share of selected tokens taken from other dialogues measures
//! cross-topic contamination on real data.

use crate::data::{Conversations, Expected, Task, Turn};
use anyhow::{Context, Result};
use ctxgate::tokens::{CharEstimator, TokenEstimator};
use ctxgate::{Gatekeeper, Policy, SelectOptions};
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// How a task's evidence turns are found from its recorded answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Evidence {
    /// The query names a rare thing the answer also names, and earlier turns have it: can
    /// the selection find the turns about what was asked?
    Named,
    /// The answer names a rare thing the query does not (`book it` → `Booked at the Golden
    /// Wok`), and earlier turns have it: can the selection find what a follow-up leaves
    /// unsaid?
    Implicit,
}

impl Evidence {
    /// Both kinds, in table order.
    pub const ALL: [Evidence; 2] = [Evidence::Named, Evidence::Implicit];

    /// How the kind is shown in the table.
    pub fn label(self) -> &'static str {
        match self {
            Evidence::Named => "named",
            Evidence::Implicit => "implicit",
        }
    }
}

/// An anchor in more turns of the set than this is too common to mark evidence.
pub const EVIDENCE_MAX_DF: u32 = 20;

/// One way of choosing context, at one budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// ctxgate's `select` with a policy.
    Ctxgate(#[serde(with = "policy_name")] Policy),
    /// The latest whole turns that fit the budget.
    LatestTurns,
}

mod policy_name {
    use ctxgate::Policy;
    use serde::Serializer;

    pub fn serialize<S: Serializer>(policy: &Policy, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(super::policy_label(*policy))
    }
}

fn policy_label(policy: Policy) -> &'static str {
    match policy {
        Policy::Minimal => "minimal",
        Policy::Fill => "fill",
    }
}

impl Method {
    /// How the method is shown in the table.
    pub fn label(self) -> String {
        match self {
            Method::Ctxgate(policy) => format!("ctxgate {}", policy_label(policy)),
            Method::LatestTurns => "latest turns".to_string(),
        }
    }
}

/// The methods and budgets measured, in table order.
pub const RUNS: [(Method, u32); 6] = [
    (Method::Ctxgate(Policy::Minimal), 4000),
    (Method::Ctxgate(Policy::Fill), 1000),
    (Method::Ctxgate(Policy::Fill), 2000),
    (Method::LatestTurns, 500),
    (Method::LatestTurns, 1000),
    (Method::LatestTurns, 2000),
];

/// The figures of one method at one budget, averaged over the tasks with evidence.
#[derive(Debug, Clone, Serialize)]
pub struct SelectionResult {
    /// Which evidence.
    pub evidence: Evidence,
    /// The method.
    pub method: Method,
    /// Token budget.
    pub budget: u32,
    /// Mean share of a task's evidence turns selected.
    pub evidence_recall: f64,
    /// Share of tasks with at least one evidence turn selected.
    pub any_evidence: f64,
    /// Mean estimated tokens selected.
    pub tokens: f64,
    /// Share of all selected tokens taken from another dialogue (spliced sets only).
    pub other_dialogue_share: Option<f64>,
}

/// The selection figures of one set.
#[derive(Debug, Clone, Serialize)]
pub struct SelectionRun {
    /// Tasks with at least one evidence turn, per [`Evidence::ALL`] kind.
    pub tasks_with_evidence: Vec<usize>,
    /// Tasks in the set.
    pub tasks: usize,
    /// Mean evidence turns per task with evidence, per kind.
    pub evidence_turns: Vec<f64>,
    /// One row per kind and entry of [`RUNS`].
    pub results: Vec<SelectionResult>,
    /// Seconds spent selecting.
    pub seconds: f64,
}

/// A task with its evidence turns.
struct EvidenceTask<'t> {
    task: &'t Task,
    evidence: HashSet<u32>,
}

/// Measures [`RUNS`] on `gatekeeper`, which holds `conversations` imported whole.
/// `spliced` says the set's switches are the starts of chained dialogues.
pub fn run(
    gatekeeper: &Gatekeeper,
    conversations: &Conversations,
    tasks: &[Task],
    spliced: bool,
) -> Result<SelectionRun> {
    let started = std::time::Instant::now();
    let anchors = TurnAnchors::of(conversations);
    let dialogues = spliced.then(|| Dialogues::from_switches(tasks));
    let mut results = Vec::new();
    let (mut tasks_with_evidence, mut evidence_turns) = (Vec::new(), Vec::new());
    for kind in Evidence::ALL {
        let with_evidence: Vec<EvidenceTask> = tasks
            .iter()
            .filter_map(|task| {
                let evidence = evidence_turns_of(kind, task, conversations, &anchors)?;
                Some(EvidenceTask { task, evidence })
            })
            .collect();
        for (method, budget) in RUNS {
            let mut totals = Totals::default();
            for t in &with_evidence {
                let picked = match method {
                    Method::Ctxgate(policy) => ctxgate_pick(gatekeeper, t.task, policy, budget)?,
                    Method::LatestTurns => latest_turns(conversations, t.task, budget),
                };
                totals.add(t, &picked, dialogues.as_ref());
            }
            results.push(totals.result(kind, method, budget, with_evidence.len(), dialogues.is_some()));
        }
        let turns = with_evidence.iter().map(|t| t.evidence.len()).sum::<usize>() as f64;
        evidence_turns.push(turns / with_evidence.len().max(1) as f64);
        tasks_with_evidence.push(with_evidence.len());
    }
    Ok(SelectionRun {
        tasks_with_evidence,
        tasks: tasks.len(),
        evidence_turns,
        results,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Selected turns with their estimated tokens.
type Picked = Vec<(u32, u32)>;

fn ctxgate_pick(gatekeeper: &Gatekeeper, task: &Task, policy: Policy, budget: u32) -> Result<Picked> {
    let options = SelectOptions {
        budget: Some(budget),
        as_of: Some(task.upto_turn),
        policy: Some(policy),
        no_evidence: true,
    };
    let selection = gatekeeper
        .session(&task.session)?
        .select_with(&task.query, &options)
        .with_context(|| format!("select in session {:?} at turn {}", task.session, task.upto_turn))?;
    Ok(selection.blocks.iter().map(|b| (b.turn_id, b.tokens)).collect())
}

/// The latest whole turns of the history that fit `budget`, newest first, stopping at the
/// first that does not fit.
fn latest_turns(conversations: &Conversations, task: &Task, budget: u32) -> Picked {
    let history = &conversations.sessions[&task.session][..task.upto_turn as usize];
    let mut picked = Vec::new();
    let mut used = 0u32;
    for (turn, t) in history.iter().enumerate().rev() {
        let cost = CharEstimator.estimate(&t.user) + CharEstimator.estimate(&t.assistant);
        if used + cost > budget {
            break;
        }
        used += cost;
        picked.push((turn as u32, cost));
    }
    picked
}

#[derive(Default)]
struct Totals {
    recall: f64,
    any: u64,
    tokens: u64,
    other_dialogue_tokens: u64,
}

impl Totals {
    fn add(&mut self, t: &EvidenceTask, picked: &Picked, dialogues: Option<&Dialogues>) {
        let hits = picked.iter().filter(|(turn, _)| t.evidence.contains(turn)).count();
        self.recall += hits as f64 / t.evidence.len() as f64;
        self.any += u64::from(hits > 0);
        for &(turn, tokens) in picked {
            self.tokens += u64::from(tokens);
            if let Some(d) = dialogues
                && d.of(&t.task.session, turn) != d.of(&t.task.session, t.task.upto_turn)
            {
                self.other_dialogue_tokens += u64::from(tokens);
            }
        }
    }

    fn result(
        &self,
        evidence: Evidence,
        method: Method,
        budget: u32,
        tasks: usize,
        spliced: bool,
    ) -> SelectionResult {
        let n = tasks.max(1) as f64;
        SelectionResult {
            evidence,
            method,
            budget,
            evidence_recall: self.recall / n,
            any_evidence: self.any as f64 / n,
            tokens: self.tokens as f64 / n,
            other_dialogue_share: spliced.then(|| {
                if self.tokens == 0 { 0.0 } else { self.other_dialogue_tokens as f64 / self.tokens as f64 }
            }),
        }
    }
}

/// The distinct anchors of every turn, and in how many turns each anchor occurs.
struct TurnAnchors {
    by_turn: HashMap<(String, u32), HashSet<String>>,
    df: HashMap<String, u32>,
}

impl TurnAnchors {
    fn of(conversations: &Conversations) -> Self {
        let mut by_turn = HashMap::new();
        let mut df: HashMap<String, u32> = HashMap::new();
        for (session, turns) in &conversations.sessions {
            for (turn, t) in turns.iter().enumerate() {
                let set = anchors_of(&format!("{}\n{}", t.user, t.assistant));
                for a in &set {
                    *df.entry(a.clone()).or_default() += 1;
                }
                by_turn.insert((session.clone(), turn as u32), set);
            }
        }
        TurnAnchors { by_turn, df }
    }

    fn turn(&self, session: &str, turn: u32) -> Option<&HashSet<String>> {
        self.by_turn.get(&(session.to_string(), turn))
    }
}

fn anchors_of(text: &str) -> HashSet<String> {
    ctxgate::anchor::extract(text).anchors().map(str::to_string).collect()
}

/// The earlier turns holding an evidence-marking anchor of the task's recorded answer: rare
/// in the set, and in the query ([`Evidence::Named`]) or not ([`Evidence::Implicit`]).
fn evidence_turns_of(
    kind: Evidence,
    task: &Task,
    conversations: &Conversations,
    anchors: &TurnAnchors,
) -> Option<HashSet<u32>> {
    let Turn { assistant, .. } = conversations.turn(&task.session, task.upto_turn)?;
    let query = anchors_of(&task.query);
    let marking: Vec<String> = anchors_of(assistant)
        .into_iter()
        .filter(|a| {
            query.contains(a) == (kind == Evidence::Named)
                && anchors.df.get(a).is_some_and(|&df| df <= EVIDENCE_MAX_DF)
        })
        .collect();
    let evidence: HashSet<u32> = (0..task.upto_turn)
        .filter(|&turn| {
            anchors.turn(&task.session, turn).is_some_and(|set| marking.iter().any(|a| set.contains(a)))
        })
        .collect();
    (!evidence.is_empty()).then_some(evidence)
}

/// The dialogue of each turn of a spliced set: a `switch` label starts the next one.
struct Dialogues {
    starts: HashMap<String, Vec<u32>>,
}

impl Dialogues {
    fn of(&self, session: &str, turn: u32) -> usize {
        self.starts.get(session).map_or(0, |starts| starts.partition_point(|&s| s <= turn))
    }
}

impl Dialogues {
    /// Dialogue boundaries of a spliced set: each `switch` label starts the next dialogue.
    fn from_switches(tasks: &[Task]) -> Self {
        let mut starts: HashMap<String, Vec<u32>> = HashMap::new();
        for task in tasks.iter().filter(|t| t.expected == Expected::Switch) {
            starts.entry(task.session.clone()).or_default().push(task.upto_turn);
        }
        starts.values_mut().for_each(|s| s.sort_unstable());
        Dialogues { starts }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(session: &str, upto_turn: u32, expected: Expected) -> Task {
        Task { session: session.into(), upto_turn, query: String::new(), expected }
    }

    #[test]
    fn switches_start_dialogues_in_spliced_sets() {
        let tasks = [
            task("x-spliced:0", 1, Expected::Continue),
            task("x-spliced:0", 2, Expected::Switch),
            task("x-spliced:0", 3, Expected::Continue),
            task("x-spliced:0", 4, Expected::Switch),
        ];
        let d = Dialogues::from_switches(&tasks);
        let of: Vec<usize> = (0..6).map(|t| d.of("x-spliced:0", t)).collect();
        assert_eq!(of, [0, 0, 1, 1, 2, 2]);
    }

    #[test]
    fn evidence_is_an_earlier_turn_with_a_rare_answer_word() {
        let mut conversations = Conversations::default();
        let turn = |u: &str, a: &str| Turn { user: u.into(), assistant: a.into() };
        conversations.sessions.insert(
            "s".into(),
            vec![
                turn("find me a restaurant", "The Golden Wok serves chinese food"),
                turn("what area", "It is in the north"),
                turn("book it for four", "Booked a table at the golden wok"),
            ],
        );
        let anchors = TurnAnchors::of(&conversations);
        let mut t = task("s", 2, Expected::Continue);
        t.query = "book it for four".into();
        let implicit = |t: &Task| evidence_turns_of(Evidence::Implicit, t, &conversations, &anchors);
        let named = |t: &Task| evidence_turns_of(Evidence::Named, t, &conversations, &anchors);
        assert_eq!(implicit(&t), Some(HashSet::from([0])));
        assert_eq!(named(&t), None, "the query names nothing the answer and history share");
        // a query that names the thing itself: named evidence, nothing implicit left
        t.query = "book the golden wok for four".into();
        assert_eq!(implicit(&t), None);
        assert_eq!(named(&t), Some(HashSet::from([0])));
    }

    #[test]
    fn latest_turns_fit_the_budget() {
        let mut conversations = Conversations::default();
        let turn = Turn { user: "abcd".into(), assistant: "abcd".into() }; // 6 + 6 tokens
        conversations.sessions.insert("s".into(), vec![turn.clone(), turn.clone(), turn]);
        let t = task("s", 3, Expected::Continue);
        assert_eq!(latest_turns(&conversations, &t, 30), [(2, 12), (1, 12)]);
        assert!(latest_turns(&conversations, &t, 11).is_empty());
    }
}
