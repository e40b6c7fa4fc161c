//! Selection on real dialogue: does the context ctxgate selects for a query hold the turns its
//! answer draws on, what does it spend, and how much of it comes from another conversation?
//!
//! The dev data labels gates, not evidence, so evidence is derived from the recorded answer:
//! an anchor of the assistant's reply to the query is *evidence-marking* if it is rare in the
//! set (in at most [`EVIDENCE_MAX_DF`] turns: a name, a number, a particular thing) and an
//! earlier turn of the same dialogue has it; [`Evidence`] splits tasks by whether the query has
//! it too. The evidence turns of a task are those earlier turns, and a selected block counts
//! only if what was kept of it (after pruning) still holds a marking anchor. Tasks without
//! evidence are left out. A baseline computed in the same run, the latest whole turns that fit
//! the budget, puts the figures in proportion.
//!
//! Where dialogues are known (a spliced set's `switch` labels start the next chained dialogue;
//! in a chained history every source session is one), the share of selected tokens taken from
//! other dialogues measures cross-topic contamination on real data.

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
    /// Share of all selected tokens taken from another dialogue (where dialogues are known).
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

/// A task with its evidence turns and the anchors that mark them.
struct EvidenceTask<'t> {
    task: &'t Task,
    evidence: HashSet<u32>,
    marking: Vec<String>,
}

/// Measures [`RUNS`] on `gatekeeper`, which holds `conversations` imported whole.
/// `dialogues`, where known, bounds evidence to the query's own dialogue and measures the
/// context taken from others.
pub fn run(
    gatekeeper: &Gatekeeper,
    conversations: &Conversations,
    tasks: &[Task],
    dialogues: Option<&Dialogues>,
) -> Result<SelectionRun> {
    let started = std::time::Instant::now();
    let anchors = TurnAnchors::of(conversations);
    let mut results = Vec::new();
    let (mut tasks_with_evidence, mut evidence_turns) = (Vec::new(), Vec::new());
    for kind in Evidence::ALL {
        let with_evidence: Vec<EvidenceTask> = tasks
            .iter()
            .filter_map(|task| evidence_of(kind, task, conversations, &anchors, dialogues))
            .collect();
        for (method, budget) in RUNS {
            let mut totals = Totals::default();
            for t in &with_evidence {
                let picked = match method {
                    Method::Ctxgate(policy) => ctxgate_pick(gatekeeper, t.task, policy, budget)?,
                    Method::LatestTurns => latest_turns(conversations, t.task, budget),
                };
                totals.add(t, &picked, dialogues);
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

/// A selected turn: its id, estimated tokens, and the text kept of it.
struct Pick {
    turn: u32,
    tokens: u32,
    text: String,
}

type Picked = Vec<Pick>;

fn ctxgate_pick(gatekeeper: &Gatekeeper, task: &Task, policy: Policy, budget: u32) -> Result<Picked> {
    let options = SelectOptions {
        budget: Some(budget),
        as_of: Some(task.upto_turn),
        policy: Some(policy),
        no_evidence: true,
        ..SelectOptions::default()
    };
    let selection = gatekeeper
        .session(&task.session)?
        .select_with(&task.query, &options)
        .with_context(|| format!("select in session {:?} at turn {}", task.session, task.upto_turn))?;
    Ok(selection
        .blocks
        .into_iter()
        .map(|b| Pick { turn: b.turn_id, tokens: b.tokens, text: format!("{}\n{}", b.user, b.assistant) })
        .collect())
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
        picked.push(Pick { turn: turn as u32, tokens: cost, text: format!("{}\n{}", t.user, t.assistant) });
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
        let holds_evidence = |p: &Pick| {
            t.evidence.contains(&p.turn) && {
                let kept = anchors_of(&p.text);
                t.marking.iter().any(|a| kept.contains(a))
            }
        };
        let hits = picked.iter().filter(|p| holds_evidence(p)).count();
        self.recall += hits as f64 / t.evidence.len() as f64;
        self.any += u64::from(hits > 0);
        for p in picked {
            self.tokens += u64::from(p.tokens);
            if let Some(d) = dialogues
                && d.of(&t.task.session, p.turn) != d.of(&t.task.session, t.task.upto_turn)
            {
                self.other_dialogue_tokens += u64::from(p.tokens);
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

/// The task with its evidence: the earlier turns of its dialogue holding an anchor of its
/// recorded answer that is rare in the set, and in the query ([`Evidence::Named`]) or not
/// ([`Evidence::Implicit`]).
fn evidence_of<'t>(
    kind: Evidence,
    task: &'t Task,
    conversations: &Conversations,
    anchors: &TurnAnchors,
    dialogues: Option<&Dialogues>,
) -> Option<EvidenceTask<'t>> {
    let Turn { assistant, .. } = conversations.turn(&task.session, task.upto_turn)?;
    let query = anchors_of(&task.query);
    let marking: Vec<String> = anchors_of(assistant)
        .into_iter()
        .filter(|a| {
            query.contains(a) == (kind == Evidence::Named)
                && anchors.df.get(a).is_some_and(|&df| df <= EVIDENCE_MAX_DF)
        })
        .collect();
    let dialogue = dialogues.map(|d| d.of(&task.session, task.upto_turn));
    let evidence: HashSet<u32> = (0..task.upto_turn)
        .filter(|&turn| {
            dialogue.is_none_or(|own| dialogues.is_some_and(|d| d.of(&task.session, turn) == own))
        })
        .filter(|&turn| {
            anchors.turn(&task.session, turn).is_some_and(|set| marking.iter().any(|a| set.contains(a)))
        })
        .collect();
    (!evidence.is_empty()).then_some(EvidenceTask { task, evidence, marking })
}

/// The dialogue of each turn, from where dialogues start in each session.
pub struct Dialogues {
    starts: HashMap<String, Vec<u32>>,
}

impl Dialogues {
    /// Dialogue boundaries of a spliced set: each `switch` label starts the next dialogue.
    pub fn from_switches(tasks: &[Task]) -> Self {
        Self::from_starts(
            tasks.iter().filter(|t| t.expected == Expected::Switch).map(|t| (&t.session, t.upto_turn)),
        )
    }

    /// Dialogue boundaries from `(session, first turn)` pairs, in any order.
    pub fn from_starts<'a>(starts: impl Iterator<Item = (&'a String, u32)>) -> Self {
        let mut by_session: HashMap<String, Vec<u32>> = HashMap::new();
        for (session, turn) in starts {
            by_session.entry(session.clone()).or_default().push(turn);
        }
        by_session.values_mut().for_each(|s| {
            s.sort_unstable();
            s.dedup();
        });
        Dialogues { starts: by_session }
    }

    fn of(&self, session: &str, turn: u32) -> usize {
        self.starts.get(session).map_or(0, |starts| starts.partition_point(|&s| s <= turn))
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
        let turn = |u: &str, a: &str| Turn { user: u.into(), assistant: a.into(), time: None };
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
        let turns = |kind, t: &Task| evidence_of(kind, t, &conversations, &anchors, None).map(|e| e.evidence);
        let implicit = |t: &Task| turns(Evidence::Implicit, t);
        let named = |t: &Task| turns(Evidence::Named, t);
        assert_eq!(implicit(&t), Some(HashSet::from([0])));
        assert_eq!(named(&t), None, "the query names nothing the answer and history share");
        // a query that names the thing itself: named evidence, nothing implicit left
        t.query = "book the golden wok for four".into();
        assert_eq!(implicit(&t), None);
        assert_eq!(named(&t), Some(HashSet::from([0])));
        // evidence stays in the query's dialogue
        let apart = Dialogues::from_starts([(&"s".to_string(), 1)].into_iter());
        assert!(evidence_of(Evidence::Named, &t, &conversations, &anchors, Some(&apart)).is_none());
    }

    #[test]
    fn latest_turns_fit_the_budget() {
        let mut conversations = Conversations::default();
        let turn = Turn { user: "abcd".into(), assistant: "abcd".into(), time: None }; // 6 + 6 tokens
        conversations.sessions.insert("s".into(), vec![turn.clone(), turn.clone(), turn]);
        let t = task("s", 3, Expected::Continue);
        let picked: Vec<(u32, u32)> =
            latest_turns(&conversations, &t, 30).iter().map(|p| (p.turn, p.tokens)).collect();
        assert_eq!(picked, [(2, 12), (1, 12)]);
        assert!(latest_turns(&conversations, &t, 11).is_empty());
    }
}
