//! The dev data: conversations (one turn per line), gate tasks and recall tasks, read from their
//! paths.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::HashMap;
use std::path::Path;

/// One line of `conversations/<set>.jsonl`; other fields (`topic`) are ignored.
#[derive(Debug, Deserialize)]
struct TurnLine {
    session: String,
    turn: u32,
    user: String,
    assistant: String,
    #[serde(default)]
    time: Option<String>,
}

/// One turn's texts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Turn {
    /// The user's text.
    pub user: String,
    /// The assistant's text.
    pub assistant: String,
    /// When it was said, if the file says (`time`).
    pub time: Option<String>,
}

/// Every turn of a set, by session, in turn order.
#[derive(Debug, Default)]
pub struct Conversations {
    /// Turns of each session; the index is the turn number.
    pub sessions: HashMap<String, Vec<Turn>>,
}

impl Conversations {
    /// Reads a conversations file, checking that each session's turns come in order from 0.
    pub fn read(path: &Path) -> Result<Conversations> {
        let mut conversations = Conversations::default();
        for_each_line(path, |line_no, line: TurnLine| {
            let turns = conversations.sessions.entry(line.session.clone()).or_default();
            if line.turn as usize != turns.len() {
                bail!(
                    "{}:{line_no}: turn {} of session {:?} where turn {} was expected",
                    path.display(),
                    line.turn,
                    line.session,
                    turns.len()
                );
            }
            turns.push(Turn { user: line.user, assistant: line.assistant, time: line.time });
            Ok(())
        })?;
        Ok(conversations)
    }

    /// All turns of all sessions.
    pub fn turns(&self) -> impl Iterator<Item = &Turn> {
        self.sessions.values().flatten()
    }

    /// The number of turns.
    pub fn turn_count(&self) -> usize {
        self.sessions.values().map(Vec::len).sum()
    }

    /// Every session chained into one, in name order, and the tasks moved along: the long
    /// history of a person who keeps one session for everything. A task's history is then
    /// everything before it.
    /// Also returns where each source session starts in the chain.
    pub fn chained(&self, tasks: &[Task], name: &str) -> (Conversations, Vec<Task>, Vec<u32>) {
        let mut names: Vec<&String> = self.sessions.keys().collect();
        names.sort();
        let mut offsets = HashMap::new();
        let mut turns = Vec::with_capacity(self.turn_count());
        for session in names {
            offsets.insert(session.clone(), turns.len() as u32);
            turns.extend(self.sessions[session].iter().cloned());
        }
        let tasks = tasks
            .iter()
            .map(|t| Task {
                session: name.to_string(),
                upto_turn: offsets[&t.session] + t.upto_turn,
                ..t.clone()
            })
            .collect();
        let mut starts: Vec<u32> = offsets.into_values().collect();
        starts.sort_unstable();
        (Conversations { sessions: HashMap::from([(name.to_string(), turns)]) }, tasks, starts)
    }

    /// Writes the turns as canonical JSONL (`ctxgate import`'s input), sessions in name order.
    pub fn write_jsonl(&self, path: &Path) -> Result<()> {
        let mut names: Vec<&String> = self.sessions.keys().collect();
        names.sort();
        let mut out = String::new();
        for session in names {
            for (turn, t) in self.sessions[session].iter().enumerate() {
                let line = serde_json::json!({"session": session, "turn": turn, "user": t.user, "assistant": t.assistant});
                out.push_str(&line.to_string());
                out.push('\n');
            }
        }
        std::fs::write(path, out).with_context(|| format!("cannot write {}", path.display()))
    }

    /// Turn `turn` of `session`, if there is one.
    pub fn turn(&self, session: &str, turn: u32) -> Option<&Turn> {
        self.sessions.get(session)?.get(turn as usize)
    }
}

/// The expected gate answer of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Expected {
    /// The query continues the topic of the history.
    Continue,
    /// The query moves to another topic.
    Switch,
}

/// One line of `gate/<set>.jsonl`: is `query`, after turns `0..upto_turn`, a switch?
#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    /// The session whose history is replayed.
    pub session: String,
    /// The history is turns `0..upto_turn`; the query is turn `upto_turn`'s user text.
    pub upto_turn: u32,
    /// The new user message.
    pub query: String,
    /// The labelled answer.
    pub expected: Expected,
}

impl Task {
    /// Reads a tasks file, checking each task's history against `conversations`: the session
    /// exists, has at least one turn before the query, and enough turns.
    pub fn read_all(path: &Path, conversations: &Conversations) -> Result<Vec<Task>> {
        let mut tasks = Vec::new();
        for_each_line(path, |line_no, task: Task| {
            let turns = conversations.sessions.get(&task.session).map_or(0, Vec::len);
            if task.upto_turn == 0 || task.upto_turn as usize > turns {
                bail!(
                    "{}:{line_no}: upto_turn {} but session {:?} has {turns} turns in the conversations file",
                    path.display(),
                    task.upto_turn,
                    task.session
                );
            }
            tasks.push(task);
            Ok(())
        })?;
        Ok(tasks)
    }
}

/// One line of `recall/tasks.jsonl`: a question asked after turns `0..upto_turn`, with the turns
/// that hold its annotated evidence. Other fields (`category_name`) are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct RecallTask {
    /// The question's id (`conv-26:q0`).
    pub qa_id: String,
    /// The session whose history is asked about.
    pub session: String,
    /// The question.
    pub query: String,
    /// The history is turns `0..upto_turn`.
    pub upto_turn: u32,
    /// The turns holding the annotated evidence, each below `upto_turn`.
    pub evidence_turns: Vec<u32>,
    /// LoCoMo's category: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub category: u8,
    /// The gold answer.
    pub answer: String,
}

impl RecallTask {
    /// The categories, in table order.
    pub const CATEGORIES: [u8; 5] = [1, 2, 3, 4, 5];

    /// Reads a recall tasks file, checking each task against `conversations`: the session
    /// exists with at least `upto_turn` turns, the evidence is a non-empty set of turns of the
    /// history, and the category is one of [`RecallTask::CATEGORIES`].
    pub fn read_all(path: &Path, conversations: &Conversations) -> Result<Vec<RecallTask>> {
        let mut tasks = Vec::new();
        for_each_line(path, |line_no, mut task: RecallTask| {
            let turns = conversations.sessions.get(&task.session).map_or(0, Vec::len);
            if task.upto_turn as usize > turns {
                bail!(
                    "{}:{line_no}: upto_turn {} but session {:?} has {turns} turns in the conversations file",
                    path.display(),
                    task.upto_turn,
                    task.session
                );
            }
            task.evidence_turns.sort_unstable();
            task.evidence_turns.dedup();
            if task.evidence_turns.is_empty() || task.evidence_turns.iter().any(|&t| t >= task.upto_turn) {
                bail!(
                    "{}:{line_no}: evidence turns {:?} must be a non-empty set of turns below upto_turn {}",
                    path.display(),
                    task.evidence_turns,
                    task.upto_turn
                );
            }
            if !Self::CATEGORIES.contains(&task.category) {
                bail!("{}:{line_no}: category {} is not 1 to 5", path.display(), task.category);
            }
            tasks.push(task);
            Ok(())
        })?;
        Ok(tasks)
    }
}

fn for_each_line<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut each: impl FnMut(u64, T) -> Result<()>,
) -> Result<()> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    for (number, raw) in text.lines().enumerate() {
        let line_no = number as u64 + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let value = serde_json::from_str(raw)
            .with_context(|| format!("{}:{line_no}: invalid line", path.display()))?;
        each(line_no, value)?;
    }
    Ok(())
}
