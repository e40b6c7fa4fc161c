//! `rebuild`: derives every posting, document frequency and N again from the stored turns,
//! into a new file that replaces the old one only when complete.

use super::derive_forward;
use crate::anchor;
use crate::error::Result;
use crate::evidence::{self, Document, EvidenceRef, EvidenceRoot};
use crate::options::Options;
use crate::store::evidence::EvidenceRecord;
use crate::store::records::{ForwardRecord, TurnRecord};
use crate::store::redaction::RedactionRecord;
use crate::store::turn_text::{self, TextDictionary};
use crate::store::{IndexLock, Turnstile, real_path};
use crate::store::{PendingRow, SourceIndex, Store, StoreOptions};
use crate::tokens::{CharEstimator, TokenEstimator};
use crate::types::anchor_hash;
use rayon::prelude::*;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// Turns copied per transaction of the new file.
const REBUILD_BATCH: usize = 2048;

/// What [`rebuild`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RebuildReport {
    /// Sessions copied.
    pub sessions: u64,
    /// Turns copied (their anchors derived again).
    pub turns: u64,
    /// Postings written.
    pub postings: u64,
    /// Distinct anchors.
    pub anchors: u64,
    /// Evidence documents whose anchors were derived again from their files.
    pub evidence: u64,
    /// Evidence documents whose file is gone or changed: their anchors were derived from
    /// their stored projection (run `evidence index` to index the new contents).
    pub evidence_from_projection: u64,
    /// Size of the old file, in bytes.
    pub bytes_before: u64,
    /// Size of the new file, in bytes.
    pub bytes_after: u64,
    /// `ctxgate redact`: turns whose text or tool arguments held a secret.
    pub turns_redacted: u64,
    /// `ctxgate redact`: evidence documents (files under the root, or projections) that held
    /// one.
    pub evidence_redacted: u64,
    /// Records of the old file that could not be read (damaged), left out of the new one.
    /// Empty when every record was copied.
    pub dropped: Vec<DroppedRecord>,
    /// Where the old file was kept when records were dropped (`INDEX.damaged-SECONDS`): the
    /// damaged bytes stay for a better tool or a person to look at.
    pub old_file_kept: Option<PathBuf>,
}

/// A record `rebuild` could not read and left out of the new file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedRecord {
    /// Which record: `turn T of session "NAME"`, `session ID`, or a session whose turns are
    /// fewer than it records.
    pub record: String,
    /// Why: what was found.
    pub reason: String,
}

/// What scratch files of a rebuild of `path` are named with: `<name>.rebuild` (a build
/// before unique names) and `<name>.rebuild-<pid>`.
fn scratch_prefix(path: &Path) -> std::ffi::OsString {
    let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".rebuild");
    name
}

/// The scratch files of rebuilds of the index at `path` that are on disk: a rebuild's new file
/// while it runs, or what a killed one left (the next rebuild removes those).
///
/// # Errors
/// If the index's directory cannot be read.
pub fn rebuild_scratch_files(path: &Path) -> std::io::Result<Vec<PathBuf>> {
    let path = real_path(path);
    let prefix = scratch_prefix(&path);
    let prefix = prefix.to_string_lossy();
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if let Some(rest) = name.strip_prefix(prefix.as_ref())
            && (rest.is_empty()
                || rest
                    .strip_prefix('-')
                    .map(|pid| pid.strip_suffix(".source").unwrap_or(pid))
                    .is_some_and(|pid| pid.parse::<u32>().is_ok()))
        {
            found.push(entry.path());
        }
    }
    found.sort();
    Ok(found)
}

/// Rebuilds the index at `path` from its stored turns: sessions and turns (text, recorded
/// gate decisions, times, tools) are copied as they are; anchors are extracted again with
/// this build's rules, and postings, document frequencies, N and the length sums are derived
/// from them. It works on an index that needs a rebuild (other anchor rules). The new file
/// is written beside the old one (`<name>.rebuild-<pid>`) in bounded transactions, compacted,
/// given the old file's permissions and owner, then renamed over it: a crash before the rename
/// leaves the old index untouched. An index path that is a link keeps pointing at the rebuilt
/// file. Only one job runs per index at a time (`INDEX.lock`); a second waits the busy
/// timeout, then fails `busy`.
///
/// # Errors
/// [`crate::store::Error::Busy`] while another job runs, an index its user may not write
/// ([`crate::store::Error::Io`], permission denied), store errors, a turn that does not decode
/// (the old file is kept), or a failed rename.
pub fn rebuild(path: impl AsRef<Path>, options: &Options) -> Result<RebuildReport> {
    rebuild_with_progress(path, options, &mut |_| {})
}

/// How far a rebuild has got: turns copied of all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RebuildProgress {
    /// Turns copied so far.
    pub turns_done: u64,
    /// Turns in the index.
    pub turns_total: u64,
}

/// [`rebuild`], calling `progress` after each batch of turns is written to the new file.
///
/// # Errors
/// As [`rebuild`].
pub fn rebuild_with_progress(
    path: impl AsRef<Path>,
    options: &Options,
    progress: &mut dyn FnMut(RebuildProgress),
) -> Result<RebuildReport> {
    rebuild_as(path.as_ref(), options, false, progress)
}

/// `ctxgate redact`: [`rebuild`] with every turn's texts and tool arguments, every evidence
/// projection and every document under the evidence root redacted ([`crate::redact`]). The
/// new file replaces the old one when complete; a document is replaced by its redacted bytes
/// (a temporary file renamed over it) before the new file goes live, so a crash leaves the
/// old index, whose documents are then redacted already, or the new one. The index then
/// records its history as redacted.
///
/// # Errors
/// As [`rebuild`].
pub fn redact_with_progress(
    path: impl AsRef<Path>,
    options: &Options,
    progress: &mut dyn FnMut(RebuildProgress),
) -> Result<RebuildReport> {
    rebuild_as(path.as_ref(), options, true, progress)
}

fn rebuild_as(
    path: &Path,
    options: &Options,
    redact: bool,
    progress: &mut dyn FnMut(RebuildProgress),
) -> Result<RebuildReport> {
    let path = real_path(path);
    let path = path.as_path();
    let store_options = StoreOptions {
        cache_bytes: options.cache_bytes,
        busy_timeout: options.busy_timeout,
        quick_repair: false,
    };
    let io = |p: &Path, e: std::io::Error| crate::store::Error::Io { path: p.to_path_buf(), source: e };
    // A file not closed cleanly (a cut file, a full disk, a killed writer) is read from a
    // repaired copy: a repair that fails leaves the file as it was, for a backup or a better
    // tool.
    // Closed before the read-only open, which waits until no process has the file open for
    // writing: writers that come and go without a gap would otherwise keep it out for ever.
    // Held until the new file is in place, so no writer writes to the old one meanwhile.
    let some_index = path.metadata().is_ok_and(|m| m.is_file() && m.len() > 0);
    let _turnstile = some_index.then(|| Turnstile::close(path, options.busy_timeout)).transpose()?;
    let mut repaired = scratch_prefix(path);
    repaired.push(format!("-{}.source", std::process::id()));
    let source = SourceIndex::open_or_repair(path, &path.with_file_name(repaired), &store_options)?;
    // A rebuild replaces the file: it needs the right to write it, as any writer does (the
    // directory's rights alone would let it replace a file its user may only read).
    std::fs::OpenOptions::new().write(true).open(path).map_err(|e| io(path, e))?;
    let _lock = IndexLock::exclusive(path, options.busy_timeout)?;
    // Holding the lock, any scratch file of this index is left over from a killed rebuild.
    for stale in rebuild_scratch_files(path).map_err(|e| io(path, e))? {
        if source.repaired_copy() == Some(stale.as_path()) {
            continue;
        }
        log::info!("removing {}, left by a rebuild that did not finish", stale.display());
        std::fs::remove_file(&stale).map_err(|e| io(&stale, e))?;
    }
    let old_metadata = std::fs::metadata(path).map_err(|e| io(path, e))?;
    let bytes_before = old_metadata.len();
    let mut target = scratch_prefix(path);
    target.push(format!("-{}", std::process::id()));
    let target = path.with_file_name(target);
    let mut report = RebuildReport { bytes_before, ..RebuildReport::default() };
    let mut new = Store::open(&target, &store_options)?;
    let copied = copy(&source, &new, &mut report, redact, progress);
    if let Err(e) = copied {
        drop(new);
        let _ = std::fs::remove_file(&target);
        return Err(e);
    }
    // Bulk writes leave free pages behind: give them back before the new file goes live.
    for _ in 0..8 {
        if !new.compact(options.busy_timeout)? {
            break;
        }
    }
    let counts = new.read()?.counts()?;
    report.postings = counts.postings;
    report.anchors = counts.anchors;
    report.bytes_after = new.file_size()?;
    drop(new);
    if let Err(e) = keep_access(&old_metadata, &target) {
        let _ = std::fs::remove_file(&target);
        return Err(io(&target, e).into());
    }
    if !report.dropped.is_empty() {
        // The damaged file is kept under another name (a hard link: the index's path is
        // replaced in one rename, never missing).
        let seconds =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let mut name = path.file_name().map(|n| n.to_os_string()).unwrap_or_default();
        name.push(format!(".damaged-{seconds}"));
        let kept = path.with_file_name(name);
        if let Err(e) = std::fs::hard_link(path, &kept) {
            let _ = std::fs::remove_file(&target);
            return Err(io(&kept, e).into());
        }
        report.old_file_kept = Some(kept);
    }
    // Renamed while the old file is still held open read-only: a writer that retries its open
    // meanwhile finds the new file, never the old one free.
    std::fs::rename(&target, path).map_err(|e| io(path, e))?;
    drop(source);
    if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        // Make the rename durable; not every platform can open a directory.
        if let Ok(dir) = std::fs::File::open(dir) {
            let _ = dir.sync_all();
        }
    }
    log::info!("rebuilt {}: {} sessions, {} turns", path.display(), report.sessions, report.turns);
    Ok(report)
}

/// Gives the new file the old one's permissions and, where the process may, its owner: a
/// private history stays private.
fn keep_access(old: &std::fs::Metadata, new: &Path) -> std::io::Result<()> {
    std::fs::set_permissions(new, old.permissions())?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let current = std::fs::metadata(new)?;
        if (current.uid(), current.gid()) != (old.uid(), old.gid()) {
            match std::os::unix::fs::chown(new, Some(old.uid()), Some(old.gid())) {
                Ok(()) => {}
                // Only a privileged process may give a file away: it stays the rebuilder's.
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    log::warn!(
                        "{}: the rebuilt index is owned by its rebuilder, not by the old file's owner",
                        new.display()
                    );
                }
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// A session being copied: its id in the new file, its record, and the old ids of the turns
/// kept so far (in order), with the digest of their texts.
struct SessionCopy {
    id: u32,
    record: crate::store::records::SessionRecord,
    kept: Vec<u32>,
    digest: u64,
}

/// Copies every record of `source` that reads back into `new`; a damaged one is listed in
/// `report.dropped` and the copy goes on. A session that lost turns keeps the ones left,
/// numbered from 0 in their order, its segment starts moved with them and its digest that of
/// the turns kept (so an import of its log finds where the two differ).
fn copy(
    source: &SourceIndex,
    new: &Store,
    report: &mut RebuildReport,
    redact: bool,
    progress: &mut dyn FnMut(RebuildProgress),
) -> Result<()> {
    let mut copies: std::collections::HashMap<u32, SessionCopy> = std::collections::HashMap::new();
    let mut order = Vec::new();
    let mut records = Vec::new();
    for (old_id, record) in source.sessions()? {
        match record {
            Ok(record) => records.push((old_id, record)),
            Err(e) => report.dropped.push(DroppedRecord {
                record: format!("session {old_id}"),
                reason: format!("{e}; its turns are left out with it"),
            }),
        }
    }
    let turns_total = records.iter().map(|(_, r)| u64::from(r.turn_count)).sum();
    if let Some(dictionary) = train_dictionary(source, redact)? {
        new.write(|view| view.add_text_dictionary(&dictionary))?;
    }
    let recorded = match redact {
        true => Some(RedactionRecord {
            history: crate::RedactionHistory::Redacted,
            rules: Some(crate::redact::RULES_VERSION.to_string()),
        }),
        false => source.redaction()?,
    };
    if let Some(recorded) = recorded {
        new.write(|view| view.set_redaction(&recorded, None))?;
    }
    // Clients' state (sync's spaces, cursors, tombstones not pushed yet) travels with the index.
    let client_values = source.client_values()?;
    if !client_values.is_empty() {
        new.write(|view| -> Result<()> {
            for (key, value) in &client_values {
                view.put_client_value(key, Some(value))?;
            }
            Ok(())
        })?;
    }
    new.write(|view| -> Result<()> {
        for (old_id, record) in records {
            let (id, _) = view.create_session(&record.name)?;
            view.put_session(id, &record)?;
            order.push(old_id);
            copies.insert(old_id, SessionCopy { id, record, kept: Vec::new(), digest: 0 });
        }
        Ok(())
    })?;
    report.sessions = order.len() as u64;
    let mut batch: Vec<(u32, u32, TurnRecord)> = Vec::with_capacity(REBUILD_BATCH);
    let mut last_read = None;
    for row in source.turn_rows()? {
        let (session, turn, record) = match row {
            Ok(row) => row,
            Err(e) => {
                let after =
                    last_read.map_or("the first".to_string(), |(s, t)| format!("those after turn {s}:{t}"));
                report.dropped.push(DroppedRecord {
                    record: format!("turn rows: {after}"),
                    reason: format!("the table could not be read further: {e}"),
                });
                break;
            }
        };
        last_read = Some((session, turn));
        let name = |copies: &std::collections::HashMap<u32, SessionCopy>| {
            copies
                .get(&session)
                .map_or_else(|| format!("session {session}"), |c| format!("session {:?}", c.record.name))
        };
        let mut record = match record {
            Ok(record) => record,
            Err(e) => {
                report.dropped.push(DroppedRecord {
                    record: format!("turn {turn} of {}", name(&copies)),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let Some(copy) = copies.get_mut(&session) else {
            report.dropped.push(DroppedRecord {
                record: format!("turn {turn} of session {session}"),
                reason: "no session record holds it".into(),
            });
            continue;
        };
        // Rows come in key order, so a session's turns in turn order (a row under a damaged key
        // fails its checksum above): a turn's new number is the count kept before it.
        if redact {
            report.turns_redacted += u64::from(redact_turn(&mut record));
        }
        let new_turn = copy.kept.len() as u32;
        record.segment_start = copy.kept.partition_point(|&old| old < record.segment_start) as u32;
        copy.kept.push(turn);
        copy.digest = crate::store::records::next_digest(copy.digest, &record.user, &record.assistant);
        batch.push((copy.id, new_turn, record));
        if batch.len() == REBUILD_BATCH {
            write_turns(new, &mut batch, report, turns_total, progress)?;
        }
    }
    write_turns(new, &mut batch, report, turns_total, progress)?;
    new.write(|view| -> Result<()> {
        for old_id in &order {
            let Some(copy) = copies.get_mut(old_id) else { continue };
            let kept = copy.kept.len() as u32;
            let intact = copy.kept.iter().copied().eq(0..copy.record.turn_count);
            // Redacted, the session's digest is over its texts as stored now, which a later
            // import of its log compares with (`write::plan`).
            if intact && !redact {
                continue;
            }
            if kept < copy.record.turn_count {
                report.dropped.push(DroppedRecord {
                    record: format!("session {:?}", copy.record.name),
                    reason: format!(
                        "it records {} turns, {kept} could be read; they are kept, numbered from 0",
                        copy.record.turn_count
                    ),
                });
            }
            let segment_start = copy.record.segment_start;
            copy.record.segment_start = copy.kept.partition_point(|&old| old < segment_start) as u32;
            copy.record.turn_count = kept;
            copy.record.digest = copy.digest;
            view.put_session(copy.id, &copy.record)?;
        }
        Ok(())
    })?;
    let new_ids = copies.iter().map(|(old, c)| (*old, c.id)).collect();
    copy_evidence(source, new, &new_ids, report, redact)
}

/// Redacts a stored turn in place (texts, tool arguments); true if it held a secret.
fn redact_turn(turn: &mut TurnRecord) -> bool {
    let mut changed = crate::redact::redact_in_place(&mut turn.user);
    changed |= crate::redact::redact_in_place(&mut turn.assistant);
    for tool in &mut turn.tools {
        if let std::borrow::Cow::Owned(redacted) = crate::redact::redact_text_or_json(&tool.arguments) {
            tool.arguments = redacted;
            changed = true;
        }
    }
    changed
}

/// Writes `batch` (new session id, turn, record) to `new`, anchors derived again, and empties it.
fn write_turns(
    new: &Store,
    batch: &mut Vec<(u32, u32, TurnRecord)>,
    report: &mut RebuildReport,
    turns_total: u64,
    progress: &mut dyn FnMut(RebuildProgress),
) -> Result<()> {
    if batch.is_empty() {
        return Ok(());
    }
    let forwards: Vec<ForwardRecord> =
        batch.par_iter().map(|(_, _, t)| derive_forward(&t.user, &t.assistant)).collect();
    new.write(|view| -> Result<()> {
        for ((id, turn, stored), forward) in batch.iter().zip(forwards) {
            view.put_turn(*id, *turn, stored, None, forward, PendingRow::Logged)?;
        }
        view.fold()?;
        Ok(())
    })?;
    report.turns += batch.len() as u64;
    batch.clear();
    progress(RebuildProgress { turns_done: report.turns, turns_total });
    Ok(())
}

/// A text dictionary for the new file, trained on up to four times the sample's size of turn
/// text, an even share of it (at least 8 turns) from each session's first turns: no one session
/// is all it learns from. Damaged turns are left out.
fn train_dictionary(source: &SourceIndex, redact: bool) -> Result<Option<TextDictionary>> {
    let sessions = source.sessions()?.len();
    let per_session = (4 * REBUILD_BATCH / sessions.max(1)).clamp(8, REBUILD_BATCH);
    let mut bodies = Vec::new();
    let mut bytes = 0;
    let mut taken = (u32::MAX, 0);
    for row in source.turn_rows()? {
        let Ok((session, _, Ok(mut t))) = row else { continue };
        if taken.0 != session {
            taken = (session, 0);
        }
        if taken.1 >= per_session {
            continue;
        }
        taken.1 += 1;
        // A dictionary holds strings of what it was trained on: never a secret.
        if redact {
            redact_turn(&mut t);
        }
        let body = turn_text::body(&t.user, &t.assistant, &t.time, &t.tools);
        bytes += body.len();
        bodies.push(body);
        if bytes >= turn_text::TRAIN_READ_BYTES {
            break;
        }
    }
    Ok(TextDictionary::train_on(&bodies))
}

/// `record`'s projection as [`evidence::project`] would store it now for `doc`, with its token
/// estimate (the CLI's, characters × 1.5) if it changed. A projection that does not parse as
/// one is kept as it is.
fn refit(record: &mut EvidenceRecord, doc: &Document) {
    let Ok(stored) = serde_json::from_str::<evidence::Projection>(&record.projection) else { return };
    let Ok(fitted) = serde_json::to_string(&evidence::whole_if_no_longer(doc, stored)) else { return };
    if fitted != record.projection {
        record.projection_tokens = CharEstimator.estimate(&fitted);
        record.projection = fitted;
    }
}

/// Evidence records are copied with their projection; their anchors are derived again from
/// the file under the evidence root when it still has the indexed bytes, else from the
/// projection (what a selection shows of it). A projection whose file is there is refitted:
/// given whole if the document is no longer, its empty lists left out, as an index made now
/// stores it (which needs no spec).
fn copy_evidence(
    source: &SourceIndex,
    new: &Store,
    new_ids: &std::collections::HashMap<u32, u32>,
    report: &mut RebuildReport,
    redact: bool,
) -> Result<()> {
    let meta = source.evidence_meta()?;
    let records = source.evidence()?;
    if records.is_empty() {
        return Ok(());
    }
    // Read beneath the root only; a root that is gone leaves every document to its projection.
    let root = meta.root.as_deref().and_then(|root| EvidenceRoot::open(Path::new(root)).ok());
    let redacted = std::sync::atomic::AtomicU64::new(0);
    let rederived: Vec<(EvidenceRecord, bool)> = records
        .into_par_iter()
        .filter_map(|mut record| {
            let mut held = false;
            if redact {
                let projection = crate::redact::redact_text_or_json(&record.projection).into_owned();
                held = projection != record.projection;
                record.projection = projection;
            }
            // The tool output of a session that no longer exists goes with it.
            record.session = match record.session {
                Some(old) => Some(*new_ids.get(&old)?),
                None => None,
            };
            let on_disk = root
                .as_ref()
                .and_then(|root| root.read(&EvidenceRef::parse(&record.reference).ok()?).ok())
                .map(|document| document.bytes)
                .filter(|bytes| xxhash_rust::xxh3::xxh3_64(bytes) == record.digest)
                .and_then(|bytes| match redact {
                    true => redact_document(root.as_ref()?, &mut record, bytes, &mut held),
                    false => Some(bytes),
                });
            if held {
                redacted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let from_file = on_disk.is_some();
            let doc = match on_disk {
                Some(bytes) => {
                    let doc = Document::parse(&bytes);
                    refit(&mut record, &doc);
                    doc
                }
                None => Document::parse(record.projection.as_bytes()),
            };
            record.anchors = anchor::extract_hashed(&evidence::indexed_text(&doc), anchor_hash)
                .into_iter()
                .map(|a| (a.hash, a.tf))
                .collect();
            Some((record, from_file))
        })
        .collect();
    report.evidence_redacted = redacted.into_inner();
    for batch in rederived.chunks(256) {
        new.write(|view| -> Result<()> {
            if let Some(root) = &meta.root {
                view.set_evidence_root(root)?;
            }
            for (record, from_file) in batch {
                view.put_evidence(record)?;
                if *from_file {
                    report.evidence += 1;
                } else {
                    report.evidence_from_projection += 1;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// The document's bytes redacted, written over its file when they changed (its record's
/// digest follows); `None` if the file cannot be replaced (its anchors then come from the
/// redacted projection).
fn redact_document(
    root: &EvidenceRoot,
    record: &mut EvidenceRecord,
    bytes: Vec<u8>,
    held: &mut bool,
) -> Option<Vec<u8>> {
    let clean = crate::redact::redact_bytes(&bytes);
    if let std::borrow::Cow::Borrowed(_) = clean {
        return Some(bytes);
    }
    let clean = clean.into_owned();
    let reference = EvidenceRef::parse(&record.reference).ok()?;
    if let Err(e) = root.replace(&reference, &clean) {
        log::warn!("{}: not redacted: {e}", record.reference);
        return None;
    }
    *held = true;
    record.digest = xxhash_rust::xxh3::xxh3_64(&clean);
    Some(clean)
}
