//! The write path: every turn enters the index here, one at a time (`Session::add_turn`,
//! through [`turn`]) or in batches from imported logs ([`batch`]).
//!
//! Import rules for every format (the parsing is `crate::import`'s, which knows nothing of the
//! index):
//! - **Sessions** are named from the source (conversation or session id) unless a name is given.
//! - **Idempotent and incremental** ([`plan`]): a session's stored turns must be the start of the
//!   file's turns for that session; only the turns after them are added. Importing the same
//!   file again adds nothing; a log that grew adds its new turns. A file whose history differs
//!   is refused (`Conflict`). Live agent logs (Claude Code, Codex) hold back a last turn still
//!   waiting for its reply.
//! - **Live logs resume** ([`resume`]): a Claude Code or Codex log is read again from the record
//!   that began its session's last stored turn when its bytes before that are unchanged, and
//!   whole otherwise; the outcome is the whole read's.
//! - **Tool results** become evidence after the turns. Those of every turn read are looked at
//!   on each import, turns already there included (a resumed read starts at the last turn whose
//!   results were all stored): a result missing from the index (an import interrupted while
//!   storing them, a write that failed) is stored by the next import of the file. Each one that cannot be stored is listed in
//!   [`FileReport::failed_tool_outputs`] with its ref and why; its turn stays imported.
//! - **All or nothing on bad input, per file**: the whole file is parsed and checked before
//!   anything is written, so a malformed record leaves the index as it was. `skip_invalid`
//!   skips bad records instead, each reported with its line and reason.
//! - **Every file reported, one bad file stops nothing**: each file of a directory or of
//!   several paths is `imported`, `skipped` (found in a directory but not a log ctxgate can
//!   tell, or a link not followed) or `failed` (its error in the report, nothing of it
//!   written), and the files after it are read. An import of one file given alone fails with
//!   that file's error. Errors of the index itself (busy, damaged, a disk that cannot be
//!   written) stop the import: no later file could be written either.
//! - **A format given must be the file's**: a file read as the format given that fails or
//!   holds no turns, and whose first record has another format, fails naming that format.
//! - **Fast, in bounded memory**: anchors are extracted in parallel; turns are written in
//!   batches of at most [`BATCH_TURNS`], one transaction each, sized to
//!   [`ImportOptions::memory_bytes`] ([`batch::Sizer`]); a file of one batch folds it into the
//!   posting lists, a longer one writes each batch's postings as a run and merges the runs at
//!   its end (`store::runs`). The canonical JSONL format is streamed ([`stream`]): memory stays
//!   bounded by the batches.

pub(crate) mod batch;
mod plan;
mod resume;
mod stream;
pub(crate) mod turn;

pub use batch::{BATCH_TURNS, DEFAULT_IMPORT_MEMORY};

use crate::error::Result;
use crate::import::tool_evidence::{self, FailedToolOutput, ToolOutput};
use crate::import::turns::{Conversation, ParsedFile, ParsedTurn, Skipped};
use crate::import::{self, Format, FoundFile, formats, jsonl};
use crate::index::Index;
use batch::{Destination, Writer};
use plan::Continuation;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How to import.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The format, or [`Format::Auto`] to detect it per file.
    pub format: Format,
    /// Put every conversation into this session instead of naming sessions from the source.
    pub session: Option<String>,
    /// Skip malformed records (reporting each) instead of refusing the file.
    pub skip_invalid: bool,
    /// Store tool results as evidence of their session (default true).
    pub evidence: bool,
    /// Bytes the turns on their way to the index may hold: the batch being written and the
    /// one being prepared ([`DEFAULT_IMPORT_MEMORY`]). The page cache (`Options::cache_bytes`)
    /// comes on top; a format read whole (every format but canonical JSONL) also holds its
    /// file's text.
    pub memory_bytes: usize,
    /// A time limit: no batch of turns is begun past this instant, and no file. What was
    /// written stays, the file's report says it is [`FileReport::unfinished`], and the next
    /// import of the file goes on from there. A hook sets it below its deadline, so a long
    /// transcript is imported over several events instead of never.
    pub until: Option<Instant>,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            format: Format::Auto,
            session: None,
            skip_invalid: false,
            evidence: true,
            memory_bytes: DEFAULT_IMPORT_MEMORY,
            until: None,
        }
    }
}

/// What happened to one session of a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SessionReport {
    /// The session name.
    pub session: String,
    /// Turns added.
    pub new_turns: u64,
    /// Turns of the file that the index already had.
    pub existing_turns: u64,
    /// A last turn held back until its reply is logged (live agent logs).
    pub held_back: u64,
    /// That turn's user text: a request not answered yet, which the hooks still hand back
    /// after a resume (not in the JSON report).
    #[serde(skip)]
    #[cfg_attr(feature = "server", schemars(skip))]
    pub held_back_request: Option<String>,
}

/// Whether a file was imported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    /// Read and written (its turns may all have been there already).
    Imported,
    /// Passed over (found in a directory, not a log ctxgate can tell; a link not followed):
    /// not an error.
    Skipped,
    /// Could not be imported: nothing of it was written.
    Failed,
}

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct FileReport {
    /// The file (in JSON, a name that is not UTF-8 has U+FFFD for its invalid bytes).
    #[serde(serialize_with = "serialize_lossy_path")]
    #[cfg_attr(feature = "server", schemars(with = "String"))]
    pub path: PathBuf,
    /// Imported, skipped or failed.
    pub status: FileStatus,
    /// Why it was skipped, or the error it failed with (absent for an imported file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The [`ErrorKind`](crate::ErrorKind) name of the error of a failed file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<&'static str>,
    /// Its format (detected or given; `auto` for a file whose format was not found).
    pub format: Format,
    /// For a live agent log read from where its last import left it: the byte offset the read
    /// started at (the record that began the session's last stored turn; with evidence, of the
    /// last turn whose tool results were all stored). Absent when the file was read whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_from: Option<u64>,
    /// Per session.
    pub sessions: Vec<SessionReport>,
    /// Turns added.
    pub new_turns: u64,
    /// Turns already in the index.
    pub existing_turns: u64,
    /// Records skipped with their reasons.
    pub skipped: Vec<Skipped>,
    /// Tool results stored as evidence (new, or missing since an earlier import).
    pub tool_outputs: u64,
    /// Tool results that could not be stored (their turns are imported).
    pub tool_outputs_failed: u64,
    /// Each of them, with its ref and why; importing the file again once the cause is
    /// fixed stores them.
    pub failed_tool_outputs: Vec<FailedToolOutput>,
    /// True when [`ImportOptions::until`] stopped the import of the file part way: the turns
    /// counted are stored, the rest (and the tool results) wait for the next import.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unfinished: bool,
}

fn serialize_lossy_path<S: serde::Serializer>(path: &Path, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&path.to_string_lossy())
}

impl FileReport {
    /// A file imported: what its sessions gained, the lines skipped, its tool outputs stored.
    fn imported(
        path: &Path,
        format: Format,
        read_from: Option<u64>,
        sessions: Vec<SessionReport>,
        skipped: Vec<Skipped>,
        outputs: crate::import::StoredToolOutputs,
    ) -> Self {
        FileReport {
            path: path.to_path_buf(),
            status: FileStatus::Imported,
            reason: None,
            error_kind: None,
            format,
            read_from,
            new_turns: sessions.iter().map(|s| s.new_turns).sum(),
            existing_turns: sessions.iter().map(|s| s.existing_turns).sum(),
            sessions,
            skipped,
            tool_outputs: outputs.stored,
            tool_outputs_failed: outputs.failed.len() as u64,
            failed_tool_outputs: outputs.failed,
            unfinished: false,
        }
    }

    /// A file not imported, with nothing counted.
    fn not_imported(
        path: &Path,
        status: FileStatus,
        reason: String,
        error_kind: Option<&'static str>,
    ) -> Self {
        FileReport {
            path: path.to_path_buf(),
            status,
            reason: Some(reason),
            error_kind,
            format: Format::Auto,
            read_from: None,
            sessions: Vec::new(),
            new_turns: 0,
            existing_turns: 0,
            skipped: Vec::new(),
            tool_outputs: 0,
            tool_outputs_failed: 0,
            failed_tool_outputs: Vec::new(),
            unfinished: false,
        }
    }
}

/// What an import did.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct ImportReport {
    /// Per file, in the order read.
    pub files: Vec<FileReport>,
    /// Turns added.
    pub new_turns: u64,
    /// Turns already in the index.
    pub existing_turns: u64,
    /// Records skipped.
    pub skipped: u64,
    /// Tool results stored as evidence.
    pub tool_outputs: u64,
    /// Tool results that could not be stored (listed per file).
    pub tool_outputs_failed: u64,
    /// Files imported.
    pub files_imported: u64,
    /// Files skipped (each with its reason).
    pub files_skipped: u64,
    /// Files that failed (each with its error; nothing of them is in the index).
    pub files_failed: u64,
    /// Wall time in seconds.
    pub seconds: f64,
}

/// ImportProgress of an import, for a progress display.
#[derive(Debug, Clone, Copy)]
pub struct ImportProgress {
    /// Files finished.
    pub files_done: usize,
    /// Files to read.
    pub files_total: usize,
    /// Turns added so far.
    pub turns: u64,
    /// Seconds since the start.
    pub seconds: f64,
}

/// One session's turns from one file, and what is new in it.
struct Plan {
    session: String,
    title: Option<String>,
    turns: Vec<ParsedTurn>,
    existing: u64,
    /// The turn id the first new turn takes.
    first_turn: u32,
    held_back: u64,
    /// The held-back turn's user text.
    held_back_request: Option<String>,
    /// Tool results of every turn of the file for this session, existing ones included.
    tool_outputs: Vec<ToolOutput>,
}

/// Imports `files` into the index, one file at a time, each all or nothing (see the module
/// docs for which failures stop the import).
pub(crate) fn import_files(
    index: &Index,
    files: &[FoundFile],
    options: &ImportOptions,
    progress: &mut (dyn FnMut(ImportProgress) + Send),
) -> Result<ImportReport> {
    let started = Instant::now();
    let mut report = ImportReport {
        files: Vec::new(),
        new_turns: 0,
        existing_turns: 0,
        skipped: 0,
        tool_outputs: 0,
        tool_outputs_failed: 0,
        files_imported: 0,
        files_skipped: 0,
        files_failed: 0,
        seconds: 0.0,
    };
    // One file given alone: its error is the import's, as the caller asked for just it.
    let alone = matches!(files, [only] if only.given && only.skip.is_none());
    // Turns of each session accounted for by earlier files of this import: a session fed by
    // several files (`--session`, or an agent session resumed in a second log) continues
    // where the previous file ended.
    let mut offsets: HashMap<String, usize> = HashMap::new();
    for (done, found) in files.iter().enumerate() {
        let out_of_time = options.until.is_some_and(|until| Instant::now() >= until);
        let file = match &found.skip {
            Some(reason) => FileReport::not_imported(&found.path, FileStatus::Skipped, reason.clone(), None),
            // Not read at all: a file cut short may leave the sessions a later file continues
            // part way (and the next import reads them all again).
            None if out_of_time || report.files.last().is_some_and(|f: &FileReport| f.unfinished) => {
                let reason =
                    "not reached within the import's time limit; importing again goes on".to_string();
                FileReport::not_imported(&found.path, FileStatus::Skipped, reason, None)
            }
            None => {
                // A file that fails leaves the offsets as they were: none of its turns count.
                let mut continued = offsets.clone();
                match import_file(index, &found.path, options, &mut continued) {
                    Ok(file) => {
                        offsets = continued;
                        file
                    }
                    Err(e) if alone || !is_file_error(&e) => return Err(e),
                    Err(crate::Error::Import(import::Error::UnknownFormat { .. })) if !found.given => {
                        FileReport::not_imported(
                            &found.path,
                            FileStatus::Skipped,
                            "not a log format ctxgate can tell (import it alone with --format if it is one)"
                                .into(),
                            None,
                        )
                    }
                    Err(e) => {
                        let mut file = FileReport::not_imported(
                            &found.path,
                            FileStatus::Failed,
                            with_causes(&e),
                            Some(e.kind().as_str()),
                        );
                        file.format = match options.format {
                            Format::Auto => import::detect_file(&found.path).unwrap_or(Format::Auto),
                            given => given,
                        };
                        file
                    }
                }
            }
        };
        match file.status {
            FileStatus::Imported => report.files_imported += 1,
            FileStatus::Skipped => report.files_skipped += 1,
            FileStatus::Failed => report.files_failed += 1,
        }
        // Many small files (an agent's session logs) never give one batch enough text to
        // train on: the index trains on what they stored once it is large enough.
        index.store().train_text_dictionary_if_due(file.new_turns);
        report.new_turns += file.new_turns;
        report.existing_turns += file.existing_turns;
        report.skipped += file.skipped.len() as u64;
        report.tool_outputs += file.tool_outputs;
        report.tool_outputs_failed += file.tool_outputs_failed;
        report.files.push(file);
        progress(ImportProgress {
            files_done: done + 1,
            files_total: files.len(),
            turns: report.new_turns,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// The error's message with each cause after it, as the CLI prints an error (`{:#}`): a file
/// that cannot be read is reported with the system's reason ("Permission denied (os error 13)").
fn with_causes(error: &crate::Error) -> String {
    let mut message = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(c) = cause {
        let text = c.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
        cause = c.source();
    }
    message
}

/// True for an error of one file (its bytes, its format, its history, a name in it), after
/// which the next file can be imported; false for one of the index, which stops the import.
fn is_file_error(error: &crate::Error) -> bool {
    matches!(
        error,
        crate::Error::Import(_)
            | crate::Error::Conflict { .. }
            | crate::Error::Raced { .. }
            | crate::Error::Forgotten { .. }
            | crate::Error::InvalidInput { .. }
    )
}

/// Imports one file; with a format given, a file that is not in it fails naming the format
/// it looks like.
fn import_file(
    index: &Index,
    path: &Path,
    options: &ImportOptions,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport> {
    let given = options.format != Format::Auto;
    match import_racing(index, path, options, offsets) {
        Err(crate::Error::Import(e)) if given && !matches!(e, import::Error::Io { .. }) => {
            let what = || match e.line() {
                Some(line) => format!("line {line}: {}", jsonl::reason(&e)),
                None => jsonl::reason(&e),
            };
            let wrong = formats::wrong_format(path, options.format, what);
            Err(crate::Error::Import(wrong.unwrap_or(e)))
        }
        Ok(file)
            if given && file.sessions.iter().all(|s| s.new_turns + s.existing_turns + s.held_back == 0) =>
        {
            // Nothing was written (there were no turns): an error if it is another format.
            match formats::wrong_format(path, options.format, || "read so it holds no turns".into()) {
                Some(wrong) => Err(wrong.into()),
                None => Ok(file),
            }
        }
        other => other,
    }
}

/// Times a file is planned again after another writer added to one of its sessions.
const RACE_RETRIES: usize = 2;

/// [`import_as`], planned again when another writer added to one of the file's sessions while
/// it was written (`Error::Raced`): two hooks importing the same transcript at once, say. The
/// new plan compares the file with everything stored, the other writer's turns and this
/// import's committed batches included, so it goes on if they are the file's turns and fails
/// `conflict` if they differ.
fn import_racing(
    index: &Index,
    path: &Path,
    options: &ImportOptions,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport> {
    let before = offsets.clone();
    let mut retries = 0;
    loop {
        match import_as(index, path, options, offsets) {
            Err(crate::Error::Raced { session, .. }) if retries < RACE_RETRIES => {
                log::info!(
                    "{}: session {session:?} grew while it was imported; planning again",
                    path.display()
                );
                offsets.clone_from(&before);
                retries += 1;
            }
            other => return other,
        }
    }
}

fn import_as(
    index: &Index,
    path: &Path,
    options: &ImportOptions,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport> {
    let format = match options.format {
        Format::Auto => import::detect_file_past(path, options.skip_invalid)?,
        given => given,
    };
    if format == Format::Jsonl {
        // The canonical format is streamed: memory stays bounded by the batches.
        return stream::import(index, path, options, offsets);
    }
    // Lines that are not UTF-8 left blank and reported, with `skip_invalid`.
    let (text, unreadable) = if options.skip_invalid {
        import::read_text_skipping(path, format)?
    } else {
        (import::read_text(path)?, Vec::new())
    };
    let key = resume::key(path);
    // A live log read again from where its last import left it, else whole; not a text with
    // lines left out, which differs from the file's bytes a checkpoint describes.
    let resumed =
        if unreadable.is_empty() { resume::read(index, path, format, &text, options)? } else { None }
            .filter(|r| !offsets.contains_key(&r.checkpoint.session));
    let planned = match resumed {
        Some(resumed) => {
            let mut continued = offsets.clone();
            continued.insert(resumed.checkpoint.session.clone(), resumed.turn as usize);
            let ParsedFile { conversations, skipped, live } = resumed.parsed;
            let session = options.session.as_deref();
            match plan(index, path, format, conversations, session, &mut continued) {
                Ok(mut plans) => {
                    *offsets = continued;
                    for plan in &mut plans {
                        plan.existing += u64::from(resumed.turn); // the turns not read again
                    }
                    let read = resume::ReadFrom {
                        live,
                        offset: resumed.offset,
                        first_turn: resumed.turn,
                        checkpoint: Some(resumed.checkpoint),
                    };
                    Some((plans, skipped, read))
                }
                Err(e @ (crate::Error::Conflict { .. } | crate::Error::Import(_))) => {
                    // The whole file decides: the same conflict, or none.
                    log::debug!("{}: not resumed ({e}); reading it whole", path.display());
                    None
                }
                Err(e) => return Err(e),
            }
        }
        None => None,
    };
    let (plans, skipped, read) = match planned {
        Some(planned) => planned,
        None => {
            let parsed = formats::parse(format, path, &text, options.skip_invalid)?;
            let before = offsets.clone();
            let plans = plan(index, path, format, parsed.conversations, options.session.as_deref(), offsets)?;
            // A checkpoint counts turns from the session's start: not for a file that
            // continues a session an earlier file of this import fed.
            // Nor for one read past bad records: a strict read of it fails.
            let fresh = matches!(&plans[..], [p] if !before.contains_key(&p.session));
            let live = parsed.live.filter(|_| fresh && parsed.skipped.is_empty() && unreadable.is_empty());
            (plans, parsed.skipped, resume::ReadFrom { live, offset: 0, first_turn: 0, checkpoint: None })
        }
    };
    let mut skipped = skipped;
    if !unreadable.is_empty() {
        skipped.extend(unreadable);
        skipped.sort_by_key(|s| s.line);
    }
    let all_evidence_stored = options.evidence && plans.iter().all(|p| p.tool_outputs.is_empty());
    let checkpoint = match &plans[..] {
        [plan] => {
            let turn_count = plan.first_turn + plan.turns.len() as u32;
            resume::after_import(format, &plan.session, &text, &read, turn_count, all_evidence_stored)
        }
        _ => None,
    };
    let mut sessions = Vec::new();
    let mut destinations = Vec::new();
    let mut turns: Vec<(usize, ParsedTurn)> = Vec::new();
    let mut tool_outputs = Vec::new();
    for (i, mut plan) in plans.into_iter().enumerate() {
        if options.evidence {
            tool_outputs.append(&mut plan.tool_outputs);
        }
        sessions.push(SessionReport {
            session: plan.session.clone(),
            new_turns: plan.turns.len() as u64,
            existing_turns: plan.existing,
            held_back: plan.held_back,
            held_back_request: plan.held_back_request.take(),
        });
        destinations.push(Destination { name: plan.session, title: plan.title, first_turn: plan.first_turn });
        turns.extend(plan.turns.into_iter().map(|t| (i, t)));
    }
    // The checkpoint goes with the turns unless results are still to be stored, which may move
    // its evidence point: then it follows them.
    let with_turns = checkpoint.clone().filter(|_| tool_outputs.is_empty());
    let writer = Writer::new(index, path, destinations)
        .with_checkpoint(with_turns.map(|c| (key.clone(), c)))
        .with_memory(options.memory_bytes)
        .with_until(options.until);
    writer.write_all(turns.into_iter().map(Ok))?;
    if writer.cut_short() {
        // A checkpoint at the last turn written, so the next import reads from there instead of
        // parsing the whole file again; no tool results (the next import stores them).
        for (i, session) in sessions.iter_mut().enumerate() {
            session.new_turns = writer.written(i);
        }
        if let [session] = &sessions[..] {
            // The session's turns once the import stopped: those it had and those written.
            let turn_count = u32::try_from(session.existing_turns + session.new_turns).unwrap_or(u32::MAX);
            let checkpoint = resume::after_import(format, &session.session, &text, &read, turn_count, false);
            if let Some(checkpoint) = checkpoint {
                index.store().write(|view| resume::store(view, &key, checkpoint))?;
            }
        }
        let read_from = read.checkpoint.as_ref().map(|_| read.offset as u64);
        let outputs = crate::import::StoredToolOutputs::default();
        return Ok(FileReport {
            unfinished: true,
            ..FileReport::imported(path, format, read_from, sessions, skipped, outputs)
        });
    }
    // After the turns, in transactions of their own: a crash in between leaves the turns, and
    // importing the file again stores the outputs (those of turns already there included).
    let outputs = crate::evidence::storage::store_tool_outputs(index, &tool_outputs)?;
    let checkpoint = checkpoint.map(|mut c| {
        if options.evidence && outputs.failed.is_empty() {
            c.evidence = Some(c.turns);
        }
        c
    });
    // Unchanged (the session too, or the file would not have been resumed): nothing to write.
    let unchanged = |c: &resume::Checkpoint| {
        read.checkpoint.as_ref().is_some_and(|r| *r == resume::Checkpoint { digest: r.digest, ..c.clone() })
    };
    if let Some(checkpoint) = checkpoint.filter(|c| !writer.wrote_checkpoint() && !unchanged(c)) {
        index.store().write(|view| resume::store(view, &key, checkpoint))?;
    }
    let read_from = read.checkpoint.as_ref().map(|_| read.offset as u64);
    Ok(FileReport::imported(path, format, read_from, sessions, skipped, outputs))
}

/// Groups conversations into sessions and finds, for each, the turns the index lacks.
fn plan(
    index: &Index,
    path: &Path,
    format: Format,
    conversations: Vec<Conversation>,
    session: Option<&str>,
    offsets: &mut HashMap<String, usize>,
) -> Result<Vec<Plan>> {
    let mut plans: Vec<Plan> = Vec::new();
    for mut conversation in conversations {
        let name = session.map_or_else(|| conversation.key.clone(), str::to_string);
        tool_evidence::move_named_refs(&mut conversation.turns, &conversation.key, &name);
        match plans.iter_mut().find(|p| p.session == name) {
            Some(p) => p.turns.extend(conversation.turns),
            None => plans.push(Plan {
                session: name,
                title: conversation.title,
                turns: conversation.turns,
                existing: 0,
                first_turn: 0,
                held_back: 0,
                held_back_request: None,
                tool_outputs: Vec::new(),
            }),
        }
    }
    let view = index.store().read()?;
    for plan in &mut plans {
        if format.is_live_log() && plan.turns.last().is_some_and(ParsedTurn::is_unanswered) {
            plan.held_back_request = (plan.turns.pop().map(|t| t.user).filter(|u| !u.trim().is_empty()))
                .map(|u| if index.options().redact { crate::redact::redact(&u).into_owned() } else { u });
            plan.held_back = 1;
        }
        let mut continuation = Continuation::new(index, &view, offsets, &plan.session)?;
        for turn in &plan.turns {
            continuation.observe(&view, path, &turn.user, &turn.assistant)?;
        }
        if continuation.needs_check() {
            let turns = plan.turns.iter().map(|t| Ok((t.user.as_str(), t.assistant.as_str())));
            continuation.check(&view, path, turns)?;
        }
        let existing = continuation.existing();
        plan.existing = existing as u64;
        plan.first_turn = continuation.offset() + existing as u32;
        plan.tool_outputs = tool_evidence::outputs_of(&plan.session, continuation.offset(), &plan.turns);
        continuation.advance(offsets);
        plan.turns.drain(..existing);
    }
    Ok(plans)
}
