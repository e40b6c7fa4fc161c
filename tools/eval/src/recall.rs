//! Recall on long conversations with annotated evidence (the eval-dev README's "Recall"
//! sections): does the context handed to the model hold the evidence turns of a question, and
//! the words of its answer?
//!
//! Every conversation goes into one fresh index (a long-lived index, through
//! [`Gatekeeper::import`]); each question is answered as `ctxgate select --as-of upto_turn` does,
//! per policy and budget, beside four baselines computed in the same run: bm25 over whole
//! turns, bm25 over half-turns (`bm25_msg`), the oracle (the evidence turns in order while they
//! fit) and recency (the newest turns that fit). A baseline turn costs
//! est(user + "\n" + assistant), a half-turn est(its side), est(text) = ceil(chars × 1.5);
//! ctxgate's cost is what its selection reports as used.
//!
//! Metrics, per method and budget, over all questions, categories 1–4 and each category:
//! - turn recall: |evidence ∩ selected turns| / |evidence| (a turn counts however much of it
//!   pruning kept; a turn of `bm25_msg` counts when either side is taken);
//! - full hit: every evidence turn selected;
//! - answer kept (categories 1–4): the share of the gold answer's content words (lower-cased
//!   ASCII letter and digit runs, minus [`STOP_WORDS`]) found among the words of the text
//!   handed to the model: ctxgate's kept user and assistant sentences, block times and evidence
//!   projections, a baseline's whole turns or half-turns (`bm25 + time`: bm25's turns, each
//!   with its time). A question whose answer has no content word is
//!   left out of this mean;
//! - for ctxgate, answer kept had its selected turns been handed over whole (what pruning
//!   cost);
//! - mean turns and est tokens selected, and empty selections (nothing handed over).

use crate::bm25::{self, Bm25};
use crate::data::{Conversations, RecallTask, Turn};
use anyhow::{Context, Result};
use ctxgate::{Gatekeeper, ImportOptions, Policy, SelectOptions};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Instant;

/// The README's budgets, in est tokens.
pub const BUDGETS: [u32; 3] = [1000, 2000, 4000];

/// The stop words left out of an answer's content words: the function words of
/// `ctxgate::anchor::STOP_WORDS` as of this evaluator's first version, frozen here so the metric
/// does not move when ctxgate's anchor rules do. (The README says only "a small list of English
/// stop words"; with this one its published answer-kept figures come out within 0.005.)
pub const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "again", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "each", "for",
    "from", "had", "has", "have", "having", "he", "her", "here", "hers", "him", "his", "how", "i", "if",
    "in", "into", "is", "it", "its", "just", "me", "more", "most", "my", "no", "nor", "not", "now", "of",
    "off", "on", "once", "only", "or", "other", "our", "ours", "out", "over", "own", "same", "she", "should",
    "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "then", "there", "these", "they",
    "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what",
    "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
];

/// One way of choosing context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// ctxgate's `select --as-of upto_turn --policy minimal`.
    CtxgateMinimal,
    /// ctxgate's `select --as-of upto_turn --policy fill`.
    CtxgateFill,
    /// BM25 over whole turns, taken in score order while they fit.
    Bm25,
    /// The same turns as `Bm25`, each handed over with its time (`time`, costed too), as
    /// ctxgate hands its blocks over: how much of ctxgate's answer kept the times alone explain.
    Bm25Time,
    /// BM25 over half-turns (each side scored and costed apart).
    Bm25Msg,
    /// The evidence turns only, in turn order while they fit: the ceiling the budget sets.
    Oracle,
    /// The newest turns that fit.
    Recency,
}

impl Method {
    /// Every method, in table order.
    pub const ALL: [Method; 7] = [
        Method::CtxgateMinimal,
        Method::CtxgateFill,
        Method::Bm25,
        Method::Bm25Time,
        Method::Bm25Msg,
        Method::Oracle,
        Method::Recency,
    ];

    /// How the method is shown in the table.
    pub fn label(self) -> &'static str {
        match self {
            Method::CtxgateMinimal => "ctxgate minimal",
            Method::CtxgateFill => "ctxgate fill",
            Method::Bm25 => "bm25",
            Method::Bm25Time => "bm25 + time",
            Method::Bm25Msg => "bm25_msg",
            Method::Oracle => "oracle",
            Method::Recency => "recency",
        }
    }

    fn policy(self) -> Option<Policy> {
        match self {
            Method::CtxgateMinimal => Some(Policy::Minimal),
            Method::CtxgateFill => Some(Policy::Fill),
            _ => None,
        }
    }
}

/// The questions a row averages over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every question.
    All,
    /// Categories 1–4 (all but adversarial).
    Categories1To4,
    /// One category.
    Category(u8),
}

impl Scope {
    /// Every scope, in table order.
    pub fn all() -> Vec<Scope> {
        let mut scopes = vec![Scope::All, Scope::Categories1To4];
        scopes.extend(RecallTask::CATEGORIES.iter().map(|&c| Scope::Category(c)));
        scopes
    }

    fn holds(self, category: u8) -> bool {
        match self {
            Scope::All => true,
            Scope::Categories1To4 => (1..=4).contains(&category),
            Scope::Category(c) => c == category,
        }
    }

    /// Answer kept is defined on categories 1–4 only (category 5's answer is adversarial).
    fn has_answer_kept(self) -> bool {
        !matches!(self, Scope::All | Scope::Category(5))
    }
}

/// The figures of one method at one budget over one scope.
#[derive(Debug, Clone, Serialize)]
pub struct RecallRow {
    /// The method.
    pub method: Method,
    /// Budget in est tokens.
    pub budget: u32,
    /// Which questions.
    pub scope: Scope,
    /// Questions in the scope.
    pub questions: usize,
    /// Mean share of a question's evidence turns selected.
    pub turn_recall: f64,
    /// Share of questions with every evidence turn selected.
    pub full_hit: f64,
    /// Mean share of the answer's content words in the text handed over (categories 1–4).
    pub answer_kept: Option<f64>,
    /// Questions whose answer has a content word (the answer-kept mean's denominator).
    pub answer_questions: usize,
    /// For ctxgate: answer kept had its selected turns been handed over whole, unpruned
    /// (evidence projections as selected).
    pub answer_kept_unpruned: Option<f64>,
    /// Mean distinct turns selected.
    pub turns: f64,
    /// Mean est tokens selected.
    pub tokens: f64,
    /// Questions for which nothing was selected.
    pub empty: usize,
    /// `empty` over `questions`.
    pub empty_share: f64,
}

/// The whole recall run.
#[derive(Debug, Clone, Serialize)]
pub struct RecallReport {
    /// Bumped when a field changes meaning; fields are only ever added.
    pub schema_version: u32,
    /// The conversations file.
    pub conversations: String,
    /// The tasks file.
    pub tasks_file: String,
    /// Sessions in the conversations file.
    pub sessions: usize,
    /// Turns in the conversations file.
    pub turns: usize,
    /// Turns the import stored.
    pub imported_turns: u64,
    /// Questions, and per category (1 to 5).
    pub questions: usize,
    /// Questions per category, 1 to 5.
    pub questions_by_category: Vec<usize>,
    /// One row per method, budget and scope, in [`Method::ALL`], [`BUDGETS`], [`Scope::all`]
    /// order.
    pub rows: Vec<RecallRow>,
    /// Seconds importing.
    pub import_seconds: f64,
    /// Seconds answering with ctxgate (both policies, every budget).
    pub select_seconds: f64,
    /// Seconds computing the baselines.
    pub baseline_seconds: f64,
    /// The precision protocol: each question of categories 1–4 in its own session and in
    /// another conversation's ([`crate::precision`]).
    pub precision: Vec<crate::precision::PrecisionRow>,
}

/// What one method handed over for one question at one budget.
#[derive(Debug, Default)]
struct Pick {
    turns: BTreeSet<u32>,
    tokens: u64,
    /// Every text handed over, words to be found in.
    texts: Vec<String>,
    /// For ctxgate: the texts with each selected turn whole.
    unpruned: Option<Vec<String>>,
}

impl Pick {
    fn is_empty(&self) -> bool {
        self.texts.is_empty()
    }
}

/// Imports `conversations_path` into a fresh index and measures every method on `tasks`.
/// With `dump`, every ctxgate selection is also written there, one JSON line each.
pub fn run(conversations_path: &Path, tasks_path: &Path, dump: Option<&Path>) -> Result<RecallReport> {
    let conversations = Conversations::read(conversations_path)?;
    let tasks = RecallTask::read_all(tasks_path, &conversations)?;

    let dir = tempfile::tempdir().context("cannot create a temporary directory for the index")?;
    let gatekeeper = Gatekeeper::open(dir.path().join("recall.redb"), ctxgate::Options::default())?;
    let started = Instant::now();
    let report = gatekeeper
        .import(&[conversations_path.to_path_buf()], &ImportOptions::default())
        .with_context(|| format!("cannot import {}", conversations_path.display()))?;
    let import_seconds = started.elapsed().as_secs_f64();
    if report.new_turns != conversations.turn_count() as u64 {
        eprintln!(
            "eval: recall: imported {} turns but the file has {}",
            report.new_turns,
            conversations.turn_count()
        );
    }

    let mut totals: HashMap<(Method, u32, Scope), Totals> = HashMap::new();
    let mut record = |method, budget, task: &RecallTask, pick: &Pick| {
        let question = Question::of(task, pick);
        for scope in Scope::all().into_iter().filter(|s| s.holds(task.category)) {
            totals.entry((method, budget, scope)).or_default().add(&question, scope.has_answer_kept());
        }
    };

    let mut dump = match dump {
        Some(path) => Some(std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let started = Instant::now();
    for task in &tasks {
        let session = gatekeeper.session(&task.session)?;
        for method in [Method::CtxgateMinimal, Method::CtxgateFill] {
            for budget in BUDGETS {
                let options = SelectOptions {
                    budget: Some(budget),
                    as_of: Some(task.upto_turn),
                    policy: method.policy(),
                    ..SelectOptions::default()
                };
                let selection = session.select_with(&task.query, &options).with_context(|| {
                    format!(
                        "question {}: select {:?} in session {:?} as of turn {}",
                        task.qa_id, task.query, task.session, task.upto_turn
                    )
                })?;
                let history = &conversations.sessions[&task.session];
                let mut pick = Pick { tokens: u64::from(selection.budget.used), ..Pick::default() };
                let mut unpruned = Vec::new();
                for block in &selection.blocks {
                    pick.turns.insert(block.turn_id);
                    pick.texts.push(format!("{}\n{}", block.user, block.assistant));
                    pick.texts.extend(block.time.clone());
                    unpruned.push(history.get(block.turn_id as usize).map(turn_text).with_context(|| {
                        format!("question {}: selected turn {} is not in the file", task.qa_id, block.turn_id)
                    })?);
                    unpruned.extend(block.time.clone());
                }
                for evidence in &selection.evidence {
                    pick.texts.push(evidence.projection.to_string());
                    unpruned.push(evidence.projection.to_string());
                }
                pick.unpruned = Some(unpruned);
                if let Some(dump) = dump.as_mut() {
                    write_dump(dump, task, method, budget, &selection)?;
                }
                record(method, budget, task, &pick);
            }
        }
    }
    let precision = crate::precision::run(&gatekeeper, &conversations, &tasks)?;
    let select_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let mut indexes: HashMap<(&str, u32), Baselines> = HashMap::new();
    for task in &tasks {
        let history = &conversations.sessions[&task.session][..task.upto_turn as usize];
        let baselines =
            indexes.entry((task.session.as_str(), task.upto_turn)).or_insert_with(|| Baselines::of(history));
        let query = bm25::words(&task.query);
        for budget in BUDGETS {
            record(Method::Bm25, budget, task, &baselines.bm25(history, &query, budget));
            record(Method::Bm25Time, budget, task, &baselines.bm25_time(history, &query, budget));
            record(Method::Bm25Msg, budget, task, &baselines.bm25_msg(history, &query, budget));
            record(Method::Oracle, budget, task, &oracle(history, &task.evidence_turns, budget));
            record(Method::Recency, budget, task, &recency(history, budget));
        }
    }
    let baseline_seconds = started.elapsed().as_secs_f64();

    let mut rows = Vec::new();
    for method in Method::ALL {
        for budget in BUDGETS {
            for scope in Scope::all() {
                let t = totals.remove(&(method, budget, scope)).unwrap_or_default();
                rows.push(t.row(method, budget, scope));
            }
        }
    }
    Ok(RecallReport {
        schema_version: 1,
        conversations: conversations_path.display().to_string(),
        tasks_file: tasks_path.display().to_string(),
        sessions: conversations.sessions.len(),
        turns: conversations.turn_count(),
        imported_turns: report.new_turns,
        questions: tasks.len(),
        questions_by_category: RecallTask::CATEGORIES
            .iter()
            .map(|&c| tasks.iter().filter(|t| t.category == c).count())
            .collect(),
        rows,
        import_seconds,
        select_seconds,
        baseline_seconds,
        precision,
    })
}

/// One selection as a JSON line of `--dump`.
fn write_dump(
    out: &mut impl std::io::Write,
    task: &RecallTask,
    method: Method,
    budget: u32,
    selection: &ctxgate::Selection,
) -> Result<()> {
    let line = serde_json::json!({
        "qa": task.qa_id,
        "method": method.label(),
        "budget": budget,
        "decision": selection.decision.topic,
        "anchors": selection.anchors,
        "blocks": selection.blocks,
        "evidence": selection.evidence.iter().map(|e| e.projection.to_string()).collect::<Vec<_>>(),
        "used": selection.budget.used,
    });
    writeln!(out, "{line}")?;
    Ok(())
}

/// est(text) = ceil(chars × 1.5), the README's estimate (ctxgate's `CharEstimator`).
fn est(text: &str) -> u64 {
    (text.chars().count() * 3).div_ceil(2) as u64
}

/// A whole turn as a baseline hands it over, and its cost.
fn turn_text(turn: &Turn) -> String {
    format!("{}\n{}", turn.user, turn.assistant)
}

/// Takes `(turn, text)` items in the given order, each that still fits `budget` (one that does
/// not fit is passed over, and smaller ones after it may still be taken).
fn take_while_fits<'a>(items: impl IntoIterator<Item = (u32, &'a str)>, budget: u32) -> Pick {
    let mut pick = Pick::default();
    for (turn, text) in items {
        let cost = est(text);
        if pick.tokens + cost <= u64::from(budget) {
            pick.tokens += cost;
            pick.turns.insert(turn);
            pick.texts.push(text.to_string());
        }
    }
    pick
}

/// The bm25 indexes of one history: whole turns, and half-turns (the non-empty sides).
struct Baselines {
    turns: Bm25,
    turn_texts: Vec<String>,
    halves: Bm25,
    /// Each half-turn's turn and side (`true` for the assistant's), in index order.
    half_of: Vec<(u32, bool)>,
}

impl Baselines {
    fn of(history: &[Turn]) -> Baselines {
        let turn_texts: Vec<String> = history.iter().map(turn_text).collect();
        let turns = Bm25::new(turn_texts.iter().map(|t| bm25::words(t)));
        // An empty side (a sitting opened or closed by the other speaker) is no message.
        let half_of: Vec<(u32, bool)> = history
            .iter()
            .enumerate()
            .flat_map(|(i, t)| [(i as u32, false, &t.user), (i as u32, true, &t.assistant)])
            .filter(|(_, _, text)| !text.is_empty())
            .map(|(i, side, _)| (i, side))
            .collect();
        let halves = Bm25::new(half_of.iter().map(|&(i, side)| bm25::words(side_text(history, i, side))));
        Baselines { turns, turn_texts, halves, half_of }
    }

    fn bm25(&self, history: &[Turn], query: &[String], budget: u32) -> Pick {
        debug_assert_eq!(history.len(), self.turn_texts.len());
        let ranked = self.turns.ranked(query);
        take_while_fits(ranked.into_iter().map(|d| (d as u32, self.turn_texts[d].as_str())), budget)
    }

    fn bm25_time(&self, history: &[Turn], query: &[String], budget: u32) -> Pick {
        let ranked = self.turns.ranked(query);
        let texts: Vec<(u32, String)> = ranked
            .into_iter()
            .map(|d| {
                let time = history[d].time.as_deref().map(|t| format!("{t}\n")).unwrap_or_default();
                (d as u32, format!("{time}{}", self.turn_texts[d]))
            })
            .collect();
        take_while_fits(texts.iter().map(|(t, text)| (*t, text.as_str())), budget)
    }

    fn bm25_msg(&self, history: &[Turn], query: &[String], budget: u32) -> Pick {
        let ranked = self.halves.ranked(query);
        take_while_fits(
            ranked.into_iter().map(|d| {
                let (turn, side) = self.half_of[d];
                (turn, side_text(history, turn, side))
            }),
            budget,
        )
    }
}

fn side_text(history: &[Turn], turn: u32, assistant: bool) -> &str {
    let t = &history[turn as usize];
    if assistant { &t.assistant } else { &t.user }
}

/// The evidence turns, in turn order, each that still fits.
fn oracle(history: &[Turn], evidence: &[u32], budget: u32) -> Pick {
    let texts: Vec<(u32, String)> = evidence.iter().map(|&t| (t, turn_text(&history[t as usize]))).collect();
    take_while_fits(texts.iter().map(|(t, text)| (*t, text.as_str())), budget)
}

/// The newest turns, each that still fits.
fn recency(history: &[Turn], budget: u32) -> Pick {
    let texts: Vec<(u32, String)> =
        history.iter().enumerate().rev().map(|(i, t)| (i as u32, turn_text(t))).collect();
    take_while_fits(texts.iter().map(|(t, text)| (*t, text.as_str())), budget)
}

/// The content words of `text`: lower-cased runs of ASCII letters and digits, minus
/// [`STOP_WORDS`].
pub fn content_words(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP_WORDS.contains(w))
        .map(str::to_string)
        .collect()
}

/// The share of `answer`'s content words among the words of `texts`; `None` if the answer has
/// no content word.
pub fn answer_kept(answer: &str, texts: &[String]) -> Option<f64> {
    let wanted = content_words(answer);
    if wanted.is_empty() {
        return None;
    }
    let mut found = BTreeSet::new();
    for text in texts {
        found.extend(content_words(text).into_iter().filter(|w| wanted.contains(w)));
    }
    Some(found.len() as f64 / wanted.len() as f64)
}

/// One question's figures for one pick.
struct Question {
    recall: f64,
    full_hit: bool,
    answer_kept: Option<f64>,
    answer_kept_unpruned: Option<f64>,
    turns: usize,
    tokens: u64,
    empty: bool,
}

impl Question {
    fn of(task: &RecallTask, pick: &Pick) -> Question {
        let hits = task.evidence_turns.iter().filter(|t| pick.turns.contains(t)).count();
        Question {
            recall: hits as f64 / task.evidence_turns.len() as f64,
            full_hit: hits == task.evidence_turns.len(),
            answer_kept: answer_kept(&task.answer, &pick.texts),
            answer_kept_unpruned: pick.unpruned.as_ref().and_then(|texts| answer_kept(&task.answer, texts)),
            turns: pick.turns.len(),
            tokens: pick.tokens,
            empty: pick.is_empty(),
        }
    }
}

/// Sums over the questions of one row.
#[derive(Debug, Default)]
struct Totals {
    questions: usize,
    recall: f64,
    full_hits: usize,
    answer_kept: f64,
    answer_questions: usize,
    answer_kept_unpruned: Option<f64>,
    turns: usize,
    tokens: u64,
    empty: usize,
}

impl Totals {
    fn add(&mut self, q: &Question, with_answer_kept: bool) {
        self.questions += 1;
        self.recall += q.recall;
        self.full_hits += usize::from(q.full_hit);
        if with_answer_kept && let Some(kept) = q.answer_kept {
            self.answer_kept += kept;
            self.answer_questions += 1;
            if let Some(unpruned) = q.answer_kept_unpruned {
                *self.answer_kept_unpruned.get_or_insert(0.0) += unpruned;
            }
        }
        self.turns += q.turns;
        self.tokens += q.tokens;
        self.empty += usize::from(q.empty);
    }

    fn row(&self, method: Method, budget: u32, scope: Scope) -> RecallRow {
        let n = self.questions.max(1) as f64;
        RecallRow {
            method,
            budget,
            scope,
            questions: self.questions,
            turn_recall: self.recall / n,
            full_hit: self.full_hits as f64 / n,
            answer_kept: (scope.has_answer_kept() && self.answer_questions > 0)
                .then(|| self.answer_kept / self.answer_questions as f64),
            answer_questions: self.answer_questions,
            answer_kept_unpruned: self
                .answer_kept_unpruned
                .filter(|_| scope.has_answer_kept() && self.answer_questions > 0)
                .map(|sum| sum / self.answer_questions as f64),
            turns: self.turns as f64 / n,
            tokens: self.tokens as f64 / n,
            empty: self.empty,
            empty_share: self.empty as f64 / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(user: &str, assistant: &str) -> Turn {
        Turn { user: user.into(), assistant: assistant.into(), time: None }
    }

    fn task(evidence: &[u32], category: u8, answer: &str) -> RecallTask {
        RecallTask {
            qa_id: "q".into(),
            session: "s".into(),
            query: "when did caroline paint".into(),
            upto_turn: 4,
            evidence_turns: evidence.to_vec(),
            category,
            answer: answer.into(),
        }
    }

    #[test]
    fn estimate_is_ceil_of_one_and_a_half_chars() {
        assert_eq!(est(""), 0);
        assert_eq!(est("abc"), 5);
        assert_eq!(est("ab\ncd"), 8, "a turn's newline costs like any character");
        assert_eq!(est("分布式锁"), 6);
    }

    #[test]
    fn a_turn_that_does_not_fit_is_passed_over() {
        // costs 15, 150, 15: the second does not fit 40, the third still does
        let big = "x".repeat(100);
        let pick = take_while_fits([(0, "0123456789"), (1, big.as_str()), (2, "0123456789")], 40);
        assert_eq!(pick.turns, BTreeSet::from([0, 2]));
        assert_eq!(pick.tokens, 30);
        assert!(take_while_fits([(0, "0123456789")], 14).is_empty());
    }

    #[test]
    fn bm25_msg_takes_one_side_and_counts_its_turn() {
        let long_reply = "and then we talked about many other unrelated things for a long while ".repeat(5);
        let history = vec![
            turn("hi", "hello"),
            turn("I painted a sunrise in 2022", &long_reply),
            turn("", "nice weather today"),
            turn("see you", ""),
        ];
        let baselines = Baselines::of(&history);
        assert_eq!(baselines.half_of.len(), 6, "empty sides are no half-turns");
        let query = bm25::words("When did Melanie paint the sunrise?");
        let budget = 60;
        let whole = baselines.bm25(&history, &query, budget);
        assert!(!whole.turns.contains(&1), "turn 1 whole costs more than {budget}: {:?}", whole.turns);
        let halves = baselines.bm25_msg(&history, &query, budget);
        assert!(halves.turns.contains(&1), "its user side fits alone: {:?}", halves.turns);
        assert!(
            halves.texts.iter().all(|t| !t.contains("unrelated")),
            "only the matching side is handed over"
        );
    }

    #[test]
    fn oracle_and_recency() {
        let history = vec![turn("aa", "bb"), turn("cc", "dd"), turn("ee", "ff")];
        let oracle = oracle(&history, &[0, 2], 100);
        assert_eq!(oracle.turns, BTreeSet::from([0, 2]));
        assert_eq!(oracle.tokens, 16, "each turn is est(\"aa\\nbb\") = 8");
        assert_eq!(recency(&history, 17).turns, BTreeSet::from([1, 2]), "newest first");
    }

    #[test]
    fn answer_kept_is_the_share_of_content_words_found() {
        let texts = vec!["Caroline went on 7 May".to_string(), "in 2023, to the group".to_string()];
        assert_eq!(answer_kept("7 May 2023", &texts), Some(1.0));
        assert_eq!(
            answer_kept("The 8th of May, 2023", &texts),
            Some(2.0 / 3.0),
            "8th, may, 2023; the/of are stop words"
        );
        assert_eq!(answer_kept("Mayday", &texts), Some(0.0), "words, not substrings");
        assert_eq!(answer_kept("it is", &texts), None, "no content word");
        assert_eq!(answer_kept("May", &[]), Some(0.0));
    }

    #[test]
    fn rows_average_per_scope_and_leave_answer_kept_out_of_category_5() {
        let pick = Pick {
            turns: BTreeSet::from([1, 3]),
            tokens: 100,
            texts: vec!["painted in 2022".into()],
            unpruned: None,
        };
        let mut all = Totals::default();
        let mut adversarial = Totals::default();
        for t in [task(&[1, 2], 2, "2022"), task(&[3], 5, "2022")] {
            let q = Question::of(&t, &pick);
            all.add(&q, Scope::All.has_answer_kept());
            if t.category == 5 {
                adversarial.add(&q, Scope::Category(5).has_answer_kept());
            }
        }
        let row = all.row(Method::Bm25, 1000, Scope::All);
        assert_eq!((row.questions, row.turn_recall, row.full_hit), (2, 0.75, 0.5));
        assert_eq!(row.answer_kept, None, "answer kept is defined on categories 1–4 only");
        let row = adversarial.row(Method::Bm25, 1000, Scope::Category(5));
        assert_eq!((row.turn_recall, row.answer_kept, row.empty), (1.0, None, 0));
        let mut four = Totals::default();
        four.add(&Question::of(&task(&[1], 4, "2022 sunrise"), &Pick::default()), true);
        let row = four.row(Method::Bm25, 1000, Scope::Categories1To4);
        assert_eq!((row.answer_kept, row.empty, row.empty_share), (Some(0.0), 1, 1.0));
        assert_eq!(row.answer_kept_unpruned, None, "only ctxgate's picks have an unpruned text");
        let pruned = Pick {
            turns: BTreeSet::from([1]),
            tokens: 10,
            texts: vec!["a sunrise".into()],
            unpruned: Some(vec!["a sunrise, painted in 2022".into()]),
        };
        let mut ctxgate = Totals::default();
        ctxgate.add(&Question::of(&task(&[1], 4, "2022 sunrise"), &pruned), true);
        let row = ctxgate.row(Method::CtxgateFill, 1000, Scope::Categories1To4);
        assert_eq!((row.answer_kept, row.answer_kept_unpruned), (Some(0.5), Some(1.0)));
    }
}
