//! Live agent logs read again from where their last import left them (`write::resume`): a
//! transcript that grows is read from its checkpoint, and the index ends exactly as one import
//! of the whole file leaves it; a file that changed before the checkpoint, or grew a branch
//! from before it, is read whole, with the whole read's outcome.

use ctxgate::{ErrorKind, Format, Gatekeeper, ImportOptions, ImportReport, Options};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::{Path, PathBuf};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A Claude Code session file grown a record at a time, each record the child of the one
/// before (as Claude Code links them), with a tool call and its result in every turn.
struct Transcript {
    path: PathBuf,
    records: usize,
    last_uuid: Option<String>,
}

impl Transcript {
    fn new(path: PathBuf) -> Self {
        Transcript { path, records: 0, last_uuid: None }
    }

    fn uuid(n: usize) -> String {
        format!("00000000-0000-4000-8000-{n:012}")
    }

    /// Appends a record whose parent is `parent` (by default the record before).
    fn append(&mut self, kind: &str, content: Value, parent: Option<String>) -> std::io::Result<String> {
        self.records += 1;
        let uuid = Self::uuid(self.records);
        let record = json!({
            "type": kind, "uuid": uuid, "parentUuid": parent.or_else(|| self.last_uuid.clone()),
            "sessionId": "5e55-10n", "isSidechain": false,
            "timestamp": format!("2025-11-02T10:{:02}:{:02}.000Z", self.records / 60 % 60, self.records % 60),
            "message": { "role": kind, "content": content },
        });
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&self.path)?;
        writeln!(file, "{record}")?;
        self.last_uuid = Some(uuid.clone());
        Ok(uuid)
    }

    fn prompt(&mut self, n: usize) -> std::io::Result<String> {
        self.append("user", json!(format!("Step {n}: check the cache expiry of shard {n}")), None)
    }

    /// Turns `steps`, each a prompt and its reply; with `each`, imported after each one.
    fn turns(
        &mut self,
        steps: std::ops::Range<usize>,
        each: Option<(&Gatekeeper, bool)>,
    ) -> Result<(), Box<dyn std::error::Error>> {
        for n in steps {
            self.prompt(n)?;
            self.reply(n)?;
            if let Some((gk, evidence)) = each {
                import(gk, &self.path, evidence)?;
            }
        }
        Ok(())
    }

    /// The reply to the open prompt: a call, its result and the answer.
    fn reply(&mut self, n: usize) -> std::io::Result<()> {
        let id = format!("toolu_{n:04}");
        let call = json!([{ "type": "tool_use", "id": id, "name": "Bash", "input": { "command": format!("redis-cli ttl shard-{n}") } }]);
        self.append("assistant", call, None)?;
        let result = json!([{ "type": "tool_result", "tool_use_id": id, "content": format!("(integer) {}", 300 + n) }]);
        self.append("user", result, None)?;
        self.append(
            "assistant",
            json!([{ "type": "text", "text": format!("Shard {n} expires in {} s.", 300 + n) }]),
            None,
        )?;
        Ok(())
    }
}

/// Where a test writes the states of a transcript for a second index: same file name, so the
/// same session.
fn copy_path(dir: &Path) -> std::io::Result<PathBuf> {
    let copy = dir.join("copy").join("5e55-10n.jsonl");
    std::fs::create_dir_all(dir.join("copy"))?;
    Ok(copy)
}

fn open(dir: &Path, name: &str) -> Result<Gatekeeper, ctxgate::Error> {
    Gatekeeper::open(dir.join(name), Options::default())
}

fn import(gk: &Gatekeeper, path: &Path, evidence: bool) -> Result<ImportReport, ctxgate::Error> {
    let options = ImportOptions { format: Format::ClaudeCode, evidence, ..ImportOptions::default() };
    gk.import(&[path.to_path_buf()], &options)
}

/// Every stored turn (text, time, tools with their result sizes) and the evidence refs.
fn dump(gk: &Gatekeeper) -> Result<Vec<String>, ctxgate::Error> {
    let mut out = Vec::new();
    for info in gk.sessions()? {
        gk.session(&info.name)?.for_each_turn(|t| {
            let tools: Vec<(String, u64)> =
                t.tools.iter().map(|c| (c.name.clone(), c.result_bytes)).collect();
            out.push(format!(
                "{} {} {:?} {:?} {:?} {:?}",
                info.name, t.turn_id, t.user, t.assistant, t.time, tools
            ));
            Ok(())
        })?;
    }
    Ok(out)
}

/// The evidence documents stored, by ref.
fn evidence_refs(gk: &Gatekeeper) -> Result<Vec<String>, ctxgate::Error> {
    let mut refs: Vec<String> = gk.list_evidence()?.into_iter().map(|d| d.evidence_ref).collect();
    refs.sort();
    Ok(refs)
}

#[test]
fn a_growing_transcript_is_read_from_its_checkpoint_and_ends_as_one_whole_read() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let resumed_index = open(dir.path(), "resumed.redb")?;
    let mut read_from = Vec::new();
    for n in 0..24 {
        transcript.prompt(n)?;
        // The prompt hook's import (no evidence) sees the prompt before its reply; every
        // third step the Stop hook's import (with evidence) follows the reply.
        let before = import(&resumed_index, &transcript.path, false)?;
        assert_eq!(before.files[0].sessions[0].held_back, 1, "the open prompt waits");
        read_from.push((false, before.files[0].read_from));
        transcript.reply(n)?;
        if n % 3 == 2 {
            let after = import(&resumed_index, &transcript.path, true)?;
            read_from.push((true, after.files[0].read_from));
            assert_eq!(after.files[0].tool_outputs_failed, 0);
        }
    }
    let last = import(&resumed_index, &transcript.path, true)?;
    assert_eq!(last.new_turns + last.existing_turns, 24, "{last:?}");

    let whole_index = open(dir.path(), "whole.redb")?;
    let whole = import(&whole_index, &transcript.path, true)?;
    assert_eq!(whole.files[0].read_from, None, "a first import reads the file whole");
    assert_eq!(dump(&resumed_index)?, dump(&whole_index)?);
    assert_eq!(evidence_refs(&resumed_index)?, evidence_refs(&whole_index)?);
    assert_eq!(evidence_refs(&whole_index)?.len(), 24, "one result a turn");

    // Once a turn is stored, every import reads from a checkpoint: without evidence from the
    // last stored turn (where it was if the import before stored none); with evidence from the last turn whose results are
    // stored, once an import with evidence has stored them (the first one reads whole).
    let prompts: Vec<Option<u64>> = read_from.iter().filter(|(e, _)| !e).map(|(_, r)| *r).collect();
    let evidence: Vec<Option<u64>> = read_from.iter().filter(|(e, _)| *e).map(|(_, r)| *r).collect();
    assert_eq!(prompts[..2], [None, None], "{read_from:?}");
    let starts: Vec<u64> =
        prompts[2..].iter().map(|r| r.ok_or("a prompt import read whole")).collect::<Result<_, _>>()?;
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");
    assert!(starts.last() > starts.first(), "{starts:?}");
    assert_eq!(evidence[0], None, "{read_from:?}");
    assert!(evidence[1..].iter().all(Option::is_some), "{read_from:?}");
    Ok(())
}

#[test]
fn a_transcript_changed_before_its_checkpoint_is_read_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    transcript.turns(0..5, None)?;
    import(&gk, &transcript.path, false)?;
    let stored = dump(&gk)?;
    // The first prompt edited in place: the whole read finds the conflict at turn 0.
    let text = std::fs::read_to_string(&transcript.path)?;
    std::fs::write(&transcript.path, text.replacen("Step 0: check", "Step 0: purge", 1))?;
    transcript.turns(5..6, None)?;
    let error = import(&gk, &transcript.path, false).expect_err("the history differs");
    assert_eq!(error.kind(), ErrorKind::Conflict, "{error}");
    assert!(error.to_string().contains("turn 0"), "{error}");
    assert_eq!(dump(&gk)?, stored, "a refused file changes nothing");
    Ok(())
}

#[test]
fn a_branch_from_before_the_checkpoint_is_read_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    let mut prompts = Vec::new();
    for n in 0..4 {
        prompts.push(transcript.prompt(n)?);
        transcript.reply(n)?;
    }
    import(&gk, &transcript.path, false)?;
    // A rewind to the last turn's prompt: a sibling of the record the checkpoint starts at.
    // The resumed read can follow it (same parent), and the branch replaces the last turn.
    let parent_of_last = Transcript::uuid(4 * (prompts.len() - 1));
    transcript.append("user", json!("Step 3 again: check shard 30 instead"), Some(parent_of_last))?;
    transcript.reply(30)?;
    let sibling = import(&gk, &transcript.path, false);
    // A rewind further back: the branch's parent is before the checkpoint.
    transcript.append("user", json!("Back to step 1: check shard 10"), Some(prompts[1].clone()))?;
    transcript.reply(10)?;
    let earlier = import(&gk, &transcript.path, false);

    // Each outcome is the whole read's: the same file imported into a second index that held
    // the same turns before.
    let second = open(dir.path(), "second.redb")?;
    let text = std::fs::read_to_string(&transcript.path)?;
    let lines: Vec<&str> = text.lines().collect();
    let at = |records: usize| lines[..records].join("\n") + "\n";
    let copy = copy_path(dir.path())?;
    std::fs::write(&copy, at(16))?;
    import(&second, &copy, false)?;
    std::fs::write(&copy, at(20))?;
    let second_sibling = import(&second, &copy, false);
    std::fs::write(&copy, at(24))?;
    let second_earlier = import(&second, &copy, false);
    let outcome = |r: &Result<ImportReport, ctxgate::Error>| match r {
        Ok(report) => Ok((report.new_turns, report.existing_turns)),
        Err(e) => Err(e.kind()),
    };
    assert_eq!(outcome(&sibling), outcome(&second_sibling));
    assert_eq!(outcome(&earlier), outcome(&second_earlier));
    assert_eq!(outcome(&earlier), Err(ErrorKind::Conflict), "the stored turns are no longer the file's");
    let turns = |gk: &Gatekeeper| -> Result<Vec<String>, ctxgate::Error> {
        Ok(dump(gk)?
            .into_iter()
            .map(|t| t.split_once(' ').map_or(t.clone(), |(_, rest)| rest.to_string()))
            .collect())
    };
    assert_eq!(turns(&gk)?, turns(&second)?);
    Ok(())
}

#[test]
fn a_growing_codex_rollout_is_read_from_its_checkpoint() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("rollout-2025-11-02T10-00-00-0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d.jsonl");
    let line = |kind: &str, payload: Value| json!({ "timestamp": "2025-11-02T10:00:00.000Z", "type": kind, "payload": payload });
    let mut text =
        line("session_meta", json!({ "id": "0199a3c4-5e6f-7a8b-9c0d-1e2f3a4b5c6d", "cwd": "/src/app" }))
            .to_string()
            + "\n";
    let gk = open(dir.path(), "index.redb")?;
    let options = ImportOptions { format: Format::Codex, evidence: false, ..ImportOptions::default() };
    let mut read_from = Vec::new();
    for n in 0..10 {
        let message = |role: &str, kind: &str, said: String| {
            line(
                "response_item",
                json!({ "type": "message", "role": role, "content": [{ "type": kind, "text": said }] }),
            )
        };
        text +=
            &(message("user", "input_text", format!("Which port does service {n} use?")).to_string() + "\n");
        let call = json!({ "type": "function_call", "name": "shell", "call_id": format!("call_{n}"), "arguments": "{}" });
        text += &(line("response_item", call).to_string() + "\n");
        let output = json!({ "type": "function_call_output", "call_id": format!("call_{n}"), "output": format!("{}", 8000 + n) });
        text += &(line("response_item", output).to_string() + "\n");
        text += &(message("assistant", "output_text", format!("Service {n} listens on {}.", 8000 + n))
            .to_string()
            + "\n");
        std::fs::write(&path, &text)?;
        let report = gk.import(std::slice::from_ref(&path), &options)?;
        assert_eq!(report.new_turns, 1, "{report:?}");
        read_from.push(report.files[0].read_from);
    }
    assert_eq!(read_from[0], None);
    assert!(read_from[1..].iter().all(Option::is_some), "{read_from:?}");
    let whole = open(dir.path(), "whole.redb")?;
    whole.import(std::slice::from_ref(&path), &options)?;
    assert_eq!(dump(&gk)?, dump(&whole)?);
    Ok(())
}

/// A file cut at its checkpoint and written again from there: the record at the checkpoint
/// has the same words but another parent (a rewind to before it). The resumed read cannot see
/// that; the checkpoint's hash, which covers that record, sends the import to the whole read.
#[test]
fn a_transcript_cut_at_its_checkpoint_and_rewritten_is_read_whole() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    transcript.turns(0..4, None)?;
    import(&gk, &transcript.path, false)?;
    let original = std::fs::read_to_string(&transcript.path)?;
    // Turn 3 began at record 13, the child of record 12; it now hangs from record 8 (turn 1's
    // answer), so the file's branch is turns 0, 1, 3.
    let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
    lines[12] = lines[12].replacen(&Transcript::uuid(12), &Transcript::uuid(8), 1);
    assert_ne!(lines[12], original.lines().nth(12).ok_or("line 13")?);
    std::fs::write(&transcript.path, lines.join("\n") + "\n")?;
    transcript.turns(4..5, None)?;
    let resumed = import(&gk, &transcript.path, false);

    let second = open(dir.path(), "second.redb")?;
    let copy = copy_path(dir.path())?;
    std::fs::write(&copy, &original)?;
    import(&second, &copy, false)?;
    std::fs::copy(&transcript.path, &copy)?;
    let whole = import(&second, &copy, false);
    let kind = |r: &Result<ImportReport, ctxgate::Error>| r.as_ref().map(|_| ()).map_err(|e| e.kind());
    assert_eq!(kind(&whole), Err(ErrorKind::Conflict), "turn 2 is no longer the file's");
    assert_eq!(kind(&resumed), kind(&whole));
    Ok(())
}

/// Evidence forgotten by hand: a whole read with evidence stores it again, and so does the
/// next import of a file that had a checkpoint.
#[test]
fn evidence_forgotten_is_stored_again_by_the_next_import() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    transcript.turns(0..3, Some((&gk, true)))?;
    let refs = evidence_refs(&gk)?;
    assert_eq!(refs.len(), 3);
    assert_eq!(gk.forget_evidence(&refs[..1])?, 1);
    transcript.turns(3..4, None)?;
    let report = import(&gk, &transcript.path, true)?;
    assert_eq!(report.files[0].read_from, None, "read whole after evidence was removed");
    let whole = open(dir.path(), "whole.redb")?;
    import(&whole, &transcript.path, true)?;
    assert_eq!(evidence_refs(&gk)?, evidence_refs(&whole)?);
    // With nothing removed since, the next one resumes again.
    transcript.turns(4..5, None)?;
    assert!(import(&gk, &transcript.path, true)?.files[0].read_from.is_some());
    Ok(())
}

/// An import that skipped a bad record leaves no checkpoint: a strict import of the same file
/// later fails on that record, as its whole read does.
#[test]
fn an_import_past_bad_records_leaves_no_checkpoint() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    transcript.turns(0..1, None)?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(&transcript.path)?
        .write_all(b"{\"type\": \"user\", broken\n")?;
    transcript.turns(1..3, None)?;
    let lenient =
        ImportOptions { format: Format::ClaudeCode, skip_invalid: true, ..ImportOptions::default() };
    let report = gk.import(std::slice::from_ref(&transcript.path), &lenient)?;
    assert_eq!(report.files[0].skipped.len(), 1);
    transcript.turns(3..4, None)?;
    let error = import(&gk, &transcript.path, false).expect_err("the bad record is still there");
    assert_eq!(error.kind(), ErrorKind::BadLog, "{error}");
    assert!(error.to_string().contains(":5:"), "the whole file's line: {error}");
    Ok(())
}

/// Forgetting a session drops the checkpoints: the index keeps no name of its files.
#[test]
fn a_forgotten_session_leaves_no_checkpoint() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let path = dir.path().join("index.redb");
    let mut gk = Gatekeeper::open(&path, Options::default())?;
    transcript.turns(0..3, Some((&gk, false)))?;
    let name = std::path::absolute(&transcript.path)?.into_os_string().into_encoded_bytes();
    let holds = |bytes: &[u8]| bytes.windows(name.len()).any(|w| w == name.as_slice());
    gk.compact()?;
    assert!(holds(&std::fs::read(&path)?), "the checkpoint names its file");
    assert_eq!(gk.forget_session("5e55-10n")?.sessions.len(), 1);
    gk.compact()?;
    assert!(!holds(&std::fs::read(&path)?), "nothing names the forgotten session's file");
    Ok(())
}

/// `evidence index` of the root after a tool output's file was deleted drops its document; the
/// next import with evidence reads the transcript whole and stores the output again, as a
/// whole read does.
#[test]
fn evidence_reindexed_after_a_deletion_is_stored_again_by_the_next_import() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut transcript = Transcript::new(dir.path().join("5e55-10n.jsonl"));
    let gk = open(dir.path(), "index.redb")?;
    transcript.turns(0..3, Some((&gk, true)))?;
    let root = gk.evidence_root()?;
    let refs = evidence_refs(&gk)?;
    let first = refs.first().ok_or("no evidence")?;
    let relative = first.split_once(':').map_or(first.as_str(), |(_, path)| path);
    std::fs::remove_file(root.join(relative))?;
    let report = gk.index_evidence(&root, &ctxgate::EvidenceOptions { spec: None, kind: None })?;
    assert_eq!(report.removed, 1, "{report:?}");
    transcript.turns(3..4, None)?;
    let resumed = import(&gk, &transcript.path, true)?;
    assert_eq!(resumed.files[0].read_from, None, "read whole after evidence was re-indexed");
    let whole = open(dir.path(), "whole.redb")?;
    import(&whole, &transcript.path, true)?;
    assert_eq!(evidence_refs(&gk)?, evidence_refs(&whole)?);
    Ok(())
}
