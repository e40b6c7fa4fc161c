//! Reading a live agent log from where its last import left it, not from its start.
//!
//! A hook imports the session's transcript on every prompt, and the transcript only grows:
//! parsing the whole file each time to find one new turn made the prompt's latency grow with
//! the session. After each import of a Claude Code or Codex log of one conversation, the index
//! keeps a checkpoint for the file (`import_checkpoints`): the byte offset of the record that
//! began the session's last stored turn, a hash of every byte before it and of that record, and the session's turn
//! count and digest as that import left them. The next import of the file reads from there if
//! the file still starts with those bytes and the session is still as the import left it, and
//! the part read says nothing the records before it could change (see
//! [`LiveLog::unsure`](crate::import::turns::LiveLog)); the stored last turn is read again and
//! compared like any stored turn, so a turn that grew is the same conflict a whole read finds.
//! In every other case the file is read whole, as before: a checkpoint only saves time.
//!
//! Tool results are evidence only on imports that ask for it, so a checkpoint keeps a second
//! point for those: the start of the last turn whose results are all stored.

use super::ImportOptions;
use crate::error::Result;
use crate::import::turns::{Carry, LiveLog, ParsedFile};
use crate::import::{Format, formats};
use crate::index::Index;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Where a read of a file may start: the record that began the session's turn `turn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct ResumePoint {
    /// Byte offset of that record.
    pub offset: u64,
    /// The turn's id in the session.
    pub turn: u32,
    /// Where the record's line ends (after its newline, or the file's end).
    pub line_end: u64,
    /// xxh3 of the file's bytes before `line_end`: the records before the point and the record
    /// at it, so a file cut there and written again is read whole.
    pub prefix_hash: u64,
}

impl ResumePoint {
    /// The point at the record that starts at `offset` in `text`.
    fn at(text: &str, offset: usize, turn: u32) -> Self {
        let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i + 1);
        ResumePoint {
            offset: offset as u64,
            turn,
            line_end: line_end as u64,
            prefix_hash: prefix_hash(text, line_end),
        }
    }

    /// Where a read of `text` may start: `None` if the bytes the point hashed changed.
    fn offset_in(&self, text: &str) -> Option<usize> {
        let offset = usize::try_from(self.offset).ok()?;
        let line_end = usize::try_from(self.line_end).ok()?;
        let intact = offset <= line_end
            && line_end <= text.len()
            && text.is_char_boundary(offset)
            && prefix_hash(text, line_end) == self.prefix_hash;
        intact.then_some(offset)
    }
}

/// What `import_checkpoints` holds for one log file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Checkpoint {
    /// The format the file was read as.
    pub format: Format,
    /// The session its conversation went into.
    pub session: String,
    /// The session's turn count after the import.
    pub turn_count: u32,
    /// The session's digest after the import.
    pub digest: u64,
    /// What the parse said of the file's start.
    pub carry: Carry,
    /// Where an import without evidence starts: the session's last turn.
    pub turns: ResumePoint,
    /// Where an import with evidence starts: the last turn whose tool results are all stored.
    pub evidence: Option<ResumePoint>,
}

/// A file read from a checkpoint.
pub(super) struct Resumed {
    /// The part read.
    pub parsed: ParsedFile,
    /// Where the part starts in the file.
    pub offset: usize,
    /// The session turn its first turn is.
    pub turn: u32,
    /// The checkpoint it started from.
    pub checkpoint: Checkpoint,
}

/// The checkpoint key of a file: its absolute path's bytes (links not resolved).
pub(super) fn key(path: &Path) -> Vec<u8> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    absolute.as_os_str().as_encoded_bytes().to_vec()
}

/// The file's checkpoint, if the index has a readable one.
fn load(index: &Index, key: &[u8]) -> Result<Option<Checkpoint>> {
    let Some(bytes) = index.store().import_checkpoint(key)? else { return Ok(None) };
    match postcard::from_bytes(&bytes) {
        Ok(checkpoint) => Ok(Some(checkpoint)),
        Err(e) => {
            // A cache entry another build wrote: read the file whole and write a new one.
            log::debug!("import checkpoint not read ({e}): reading the file whole");
            Ok(None)
        }
    }
}

/// The hash a resume point keeps of the bytes before it.
fn prefix_hash(text: &str, offset: usize) -> u64 {
    xxhash_rust::xxh3::xxh3_64(&text.as_bytes()[..offset.min(text.len())])
}

/// Reads `text` (the file `path`, in `format`) from its checkpoint, if it has one that holds.
/// `None`: read it whole.
pub(super) fn read(
    index: &Index,
    path: &Path,
    format: Format,
    text: &str,
    options: &ImportOptions,
) -> Result<Option<Resumed>> {
    if options.skip_invalid || !format.is_live_log() {
        return Ok(None);
    }
    let Some(checkpoint) = load(index, &key(path))? else { return Ok(None) };
    let name = options.session.as_deref().unwrap_or(&checkpoint.carry.key);
    if checkpoint.format != format || checkpoint.session != name {
        return Ok(None);
    }
    let point = if options.evidence { checkpoint.evidence } else { Some(checkpoint.turns) };
    let Some(point) = point else { return Ok(None) };
    let Some(offset) = point.offset_in(text) else {
        return Ok(None); // the file was rewritten
    };
    let view = index.store().read()?;
    let unchanged = view
        .session_by_name(name)?
        .is_some_and(|(_, r)| r.turn_count == checkpoint.turn_count && r.digest == checkpoint.digest);
    drop(view);
    if !unchanged || point.turn >= checkpoint.turn_count {
        return Ok(None);
    }
    let Some(parsed) = formats::parse_from(format, path, &text[offset..], &checkpoint.carry) else {
        return Ok(None);
    };
    // An error in the part is reported by the whole read, with the file's own line numbers.
    let Ok(parsed) = parsed else { return Ok(None) };
    let sure = parsed.live.as_ref().is_some_and(|live| !live.unsure)
        && matches!(&parsed.conversations[..], [only] if only.key == checkpoint.carry.key);
    if sure {
        log::debug!("{}: read from byte {offset} (turn {})", path.display(), point.turn);
    }
    Ok(sure.then_some(Resumed { parsed, offset, turn: point.turn, checkpoint }))
}

/// Where the turns an import planned were read from.
pub(super) struct ReadFrom {
    /// What the parse said of the live log; `None` when no checkpoint can follow (another
    /// format, several conversations, records skipped, a session an earlier file fed).
    pub live: Option<LiveLog>,
    /// Where the part read starts in the file (0 for the whole file).
    pub offset: usize,
    /// The session turn the part's first turn is.
    pub first_turn: u32,
    /// The checkpoint the read started from, if it did not read the whole file.
    pub checkpoint: Option<Checkpoint>,
}

/// The checkpoint an import leaves, once its session holds `turn_count` turns: `None` when the
/// file cannot be resumed (several conversations, a tree read in file order, no turn stored).
/// `evidence_complete`: whether the import stored every tool result of the turns it read.
pub(super) fn after_import(
    format: Format,
    session: &str,
    text: &str,
    read: &ReadFrom,
    turn_count: u32,
    evidence_complete: bool,
) -> Option<Checkpoint> {
    let ReadFrom { live, offset: read_from, first_turn, checkpoint: resumed } = read;
    let (read_from, first_turn) = (*read_from, *first_turn);
    let live = live.as_ref().filter(|live| !live.unsure)?;
    let last = turn_count.checked_sub(1)?;
    let index = usize::try_from(last.checked_sub(first_turn)?).ok()?;
    let offset = read_from + *live.starts.get(index)?;
    let turns = ResumePoint::at(text, offset, last);
    // The evidence point stays where it was unless this import stored every result it read;
    // a point before where this import read is known to be intact (its bytes are unchanged).
    let evidence = if evidence_complete {
        Some(turns)
    } else {
        resumed.as_ref().and_then(|c| c.evidence).filter(|e| e.offset <= read_from as u64)
    };
    Some(Checkpoint {
        format,
        session: session.to_string(),
        turn_count,
        digest: 0, // filled in by the transaction that writes it
        carry: live.carry.clone(),
        turns,
        evidence,
    })
}

/// Stores `checkpoint` under `key` in the write transaction `view`, with the session's turn
/// count and digest as the transaction leaves them. A session other than the checkpoint
/// expects (another writer's turns) stores nothing: the next import reads the file whole.
pub(super) fn store(
    view: &mut crate::store::View<crate::store::WriteSource<'_>>,
    key: &[u8],
    mut checkpoint: Checkpoint,
) -> Result<()> {
    let Some((_, record)) = view.session_by_name(&checkpoint.session)? else { return Ok(()) };
    if record.turn_count != checkpoint.turn_count {
        return Ok(());
    }
    checkpoint.digest = record.digest;
    let bytes = postcard::to_allocvec(&checkpoint)
        .map_err(|e| crate::Error::bug(format!("import checkpoint not encoded: {e}")))?;
    view.put_import_checkpoint(key, &bytes)?;
    Ok(())
}
