//! The gatekeeper's evidence (DESIGN §4): store a document and print its projection (the dual
//! write), index an existing tree in place, read a document back by ref, project it again.
//!
//! Files under the evidence root are never modified: a document is written once, to a new
//! file; storing different bytes under an existing ref is refused. The index keeps each
//! document's digest, projection and anchors, so queries never read evidence files.

use crate::anchor;
use crate::error::{Error, Result};
use crate::evidence::EvidenceError;
use crate::evidence::{self, Document, EvidenceRef, EvidenceRoot, Projection, RootError, Spec, WalkedFile};
use crate::index::Index;
use crate::store::evidence::{EvidenceMeta, EvidenceRecord};
use crate::store::{Source, View};
use crate::types::anchor_hash;
use rayon::prelude::*;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Documents projected and written per transaction when indexing a tree: bounds memory by
/// the batch, not the tree.
const INDEX_BATCH: usize = 256;

/// How to project a document.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvidenceOptions<'a> {
    /// Per-kind rules; without one, the default projection.
    pub spec: Option<&'a Spec>,
    /// The kind to project as; without one, the spec's `match` globs decide.
    pub kind: Option<&'a str>,
}

/// An indexed document, as `evidence list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvidenceInfo {
    /// Its ref.
    pub evidence_ref: String,
    /// The kind it was projected as.
    pub kind: String,
    /// File size.
    pub bytes: u64,
    /// Token estimate of the whole document.
    pub full_tokens: u32,
    /// Token estimate of its projection.
    pub projection_tokens: u32,
    /// The session whose tool output it is, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
}

/// What `evidence index` did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EvidenceIndexReport {
    /// The evidence root (the directory indexed).
    pub root: String,
    /// Documents new or changed, now indexed.
    pub indexed: u64,
    /// Documents whose bytes had not changed since they were indexed.
    pub unchanged: u64,
    /// Documents indexed before that are no longer in the tree.
    pub removed: u64,
    /// Files left out, with why.
    pub skipped: Vec<SkippedFile>,
}

/// A file `evidence index` left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedFile {
    /// Its path.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// [`crate::Gatekeeper::evidence_root`].
pub(crate) fn evidence_root(index: &Index) -> Result<PathBuf> {
    let meta = index.store().read()?.evidence_meta()?;
    root_for(index, &meta, None)
}

pub(crate) fn root_for(index: &Index, meta: &EvidenceMeta, requested: Option<&Path>) -> Result<PathBuf> {
    let requested = requested.or(index.options().evidence_root.as_deref());
    let Some(requested) = requested else {
        return Ok(match &meta.root {
            Some(root) => PathBuf::from(root),
            None => index.store().path().with_extension("evidence"),
        });
    };
    let root = absolute(requested)?;
    if let Some(recorded) = &meta.root
        && Path::new(recorded) != root
        && meta.documents > 0
    {
        return Err(EvidenceError::OtherRoot { recorded: recorded.clone(), requested: root }.into());
    }
    Ok(root)
}

/// [`crate::Gatekeeper::put_evidence`].
pub(crate) fn put_evidence(
    index: &Index,
    reference: &str,
    bytes: &[u8],
    options: &EvidenceOptions<'_>,
) -> Result<Projection> {
    let reference = EvidenceRef::parse(reference)?;
    if let Some(why) = crate::limits::evidence_too_large(bytes.len() as u64) {
        return Err(Error::InvalidInput { what: "evidence document", reason: format!("{reference}: {why}") });
    }
    index.check_writable()?;
    let bytes = &*redacted(index, bytes);
    let meta = index.store().read()?.evidence_meta()?;
    let root = EvidenceRoot::create(&root_for(index, &meta, None)?)?;
    root.write_once(&reference, bytes)?;
    let (projection, record) = prepare(index, &reference, bytes, options, None)?;
    let root_text = absolute(root.path())?.to_string_lossy().into_owned();
    put_records(index, &root_text, std::slice::from_ref(&record))?;
    Ok(projection)
}

/// [`crate::Gatekeeper::index_evidence`].
pub(crate) fn index_evidence(
    index: &Index,
    dir: &Path,
    options: &EvidenceOptions<'_>,
) -> Result<EvidenceIndexReport> {
    index.check_writable()?;
    if !dir.is_dir() {
        return Err(EvidenceError::NotADirectory { path: dir.to_path_buf() }.into());
    }
    let view = index.store().read()?;
    let root = root_for(index, &view.evidence_meta()?, Some(dir))?;
    let mut stored: BTreeMap<String, (u64, Option<u32>)> = BTreeMap::new();
    view.for_each_evidence(|_, r| {
        stored.insert(r.reference, (r.digest, r.session));
        true
    })?;
    drop(view);

    let mut report = EvidenceIndexReport { root: root.display().to_string(), ..Default::default() };
    let tree = EvidenceRoot::open(&root)?;
    let (files, skipped) = tree.walk(Some(index.store().path()));
    report.skipped.extend(skipped.into_iter().map(|s| SkippedFile { path: s.path, reason: s.reason }));
    let root_text = root.to_string_lossy().into_owned();
    let mut seen = std::collections::BTreeSet::new();
    for batch in files.chunks(INDEX_BATCH) {
        let prepared: Vec<Result<Option<EvidenceRecord>, SkippedFile>> = index.in_pool(|| {
            batch
                .par_iter()
                .map(|file| {
                    let reference = &file.reference;
                    let skip = |reason: String| SkippedFile { path: reference.as_str().to_string(), reason };
                    // Read through the root's handle, checked to be the file the walk saw:
                    // what is indexed is what is inside the root.
                    let bytes = tree.read_walked(file).map_err(|e| skip(e.to_string()))?;
                    let digest = xxhash_rust::xxh3::xxh3_64(&bytes);
                    let before = stored.get(reference.as_str());
                    if before.is_some_and(|(d, _)| *d == digest) {
                        return Ok(None);
                    }
                    let session = before.and_then(|(_, s)| *s);
                    // The file is the user's and stays as it is; what the index keeps of
                    // it (projection, anchors) is redacted.
                    prepare(index, reference, &redacted(index, &bytes), options, session)
                        .map(|(_, r)| Some(r))
                        .map_err(|e| skip(e.to_string()))
                })
                .collect()
        });
        let mut records = Vec::new();
        for (WalkedFile { reference, .. }, outcome) in batch.iter().zip(prepared) {
            match outcome {
                Ok(Some(record)) => {
                    seen.insert(reference.as_str().to_string());
                    records.push(record);
                }
                Ok(None) => {
                    seen.insert(reference.as_str().to_string());
                    report.unchanged += 1;
                }
                Err(skipped) => report.skipped.push(skipped),
            }
        }
        report.indexed += records.len() as u64;
        put_records(index, &root_text, &records)?;
    }
    let gone: Vec<&String> = stored.keys().filter(|r| !seen.contains(*r)).collect();
    if !gone.is_empty() {
        report.removed = index.store().write(|view| -> Result<u64> {
            view.set_evidence_root(&root_text)?;
            let mut removed = 0;
            for reference in gone {
                removed += u64::from(view.remove_evidence(reference)?);
            }
            Ok(removed)
        })?;
    }
    if report.indexed > 0 || report.removed > 0 {
        // A live log read from its checkpoint would not look at the tool outputs before it
        // again: the next import of each reads whole, stores what was removed and reports
        // what now differs.
        index.store().write(|view| view.clear_import_checkpoints())?;
    }
    Ok(report)
}

/// [`crate::Gatekeeper::read_evidence`].
pub(crate) fn read_evidence(index: &Index, reference: &str, pointer: Option<&str>) -> Result<Vec<u8>> {
    let reference = EvidenceRef::parse(reference)?;
    let bytes = read_file(index, &reference)?;
    let Some(pointer) = pointer else { return Ok(bytes) };
    let Document::Json(value) = Document::parse(&bytes) else {
        return Err(EvidenceError::NotJson { reference: reference.to_string() }.into());
    };
    evidence::pointer::segments(pointer).map_err(EvidenceError::BadPointer)?;
    let part = value.pointer(pointer).ok_or_else(|| EvidenceError::NothingAtPointer {
        reference: reference.to_string(),
        pointer: pointer.into(),
    })?;
    let mut out = serde_json::to_vec_pretty(part).map_err(EvidenceError::Json)?;
    out.push(b'\n');
    Ok(out)
}

/// [`crate::Gatekeeper::project_evidence`].
pub(crate) fn project_evidence(
    index: &Index,
    reference: &str,
    options: &EvidenceOptions<'_>,
) -> Result<Projection> {
    let reference = EvidenceRef::parse(reference)?;
    let bytes = read_file(index, &reference)?;
    let stored_kind = index.store().read()?.evidence_by_ref(reference.as_str())?.map(|(_, r)| r.kind);
    let kind = options
        .kind
        .or_else(|| stored_kind.as_deref().filter(|k| options.spec.is_some_and(|s| s.kind(k).is_some())));
    evidence::project(&reference, &Document::parse(&bytes), options.spec, kind)
        .map_err(|e| EvidenceError::Projection(e).into())
}

/// [`crate::Gatekeeper::list_evidence`].
pub(crate) fn list_evidence(index: &Index) -> Result<Vec<EvidenceInfo>> {
    let view = index.store().read()?;
    let names = session_names(&view)?;
    let mut out = Vec::new();
    view.for_each_evidence(|_, r| {
        out.push(EvidenceInfo {
            session: r.session.and_then(|s| names.get(&s).cloned()),
            evidence_ref: r.reference,
            kind: r.kind,
            bytes: r.bytes,
            full_tokens: r.full_tokens,
            projection_tokens: r.projection_tokens,
        });
        true
    })?;
    out.sort_by(|a, b| a.evidence_ref.cmp(&b.evidence_ref));
    Ok(out)
}

/// [`crate::Gatekeeper::forget_evidence`].
pub(crate) fn forget_evidence(index: &Index, references: &[String]) -> Result<u64> {
    for r in references {
        EvidenceRef::parse(r)?;
    }
    index.store().write(|view| -> Result<u64> {
        let mut removed = 0;
        for r in references {
            removed += u64::from(view.remove_evidence(r)?);
        }
        if removed > 0 {
            view.clear_import_checkpoints()?;
        }
        Ok(removed)
    })
}

/// Stores imported tool output as evidence of its session (see `import::tool_evidence`):
/// files written once under the root, projections made in parallel, written
/// [`INDEX_BATCH`] per transaction. Outputs already indexed with the same bytes are
/// skipped, under their ref or (for the same session) under the ref an earlier version
/// gave them, so importing a file again stores only what is missing. Every output that
/// cannot be stored is returned with its ref and why: its ref holds other bytes on disk
/// (evidence is never modified), another output of the same import has its ref, the file
/// or the root cannot be written, or its session is not in the index.
///
/// # Errors
/// Only if the index cannot be read or written; a file that cannot be written is a failure
/// in the result, not an error.
pub(crate) fn store_tool_outputs(
    index: &Index,
    outputs: &[crate::import::ToolOutput],
) -> Result<crate::import::StoredToolOutputs> {
    use crate::import::{FailedToolOutput, StoredToolOutputs};
    let mut result = StoredToolOutputs::default();
    if outputs.is_empty() {
        return Ok(result);
    }
    let fail = |output: &crate::import::ToolOutput, reason: String| FailedToolOutput {
        evidence_ref: output.reference.to_string(),
        session: output.session.clone(),
        reason,
    };
    // Redacted before anything is compared or written: a result stored redacted is the
    // same result when its log is imported again.
    let redacted: Vec<Cow<'_, [u8]>> =
        index.in_pool(|| outputs.par_iter().map(|o| redacted(index, &o.bytes)).collect());
    let view = index.store().read()?;
    let root_path = root_for(index, &view.evidence_meta()?, None)?;
    let mut sessions: BTreeMap<&str, Option<u32>> = BTreeMap::new();
    // Each ref once per import: the first output that has it is the one stored.
    let mut planned: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    let mut todo = Vec::new();
    for (output, bytes) in outputs.iter().zip(&redacted) {
        let session = match sessions.get(output.session.as_str()) {
            Some(&id) => id,
            None => {
                let id = view.session_by_name(&output.session)?.map(|(id, _)| id);
                sessions.insert(&output.session, id);
                id
            }
        };
        let Some(session) = session else {
            result.failed.push(fail(output, "its session is not in the index".into()));
            continue;
        };
        let digest = xxhash_rust::xxh3::xxh3_64(bytes);
        match planned.get(output.reference.as_str()) {
            Some(&first) if first == digest => continue,
            Some(_) => {
                result.failed.push(fail(
                    output,
                    "another tool result of this import has the same ref (a call id used twice in the session)"
                        .into(),
                ));
                continue;
            }
            None => {
                planned.insert(output.reference.as_str(), digest);
            }
        }
        // Stored means indexed with these bytes for this session: the same bytes bound to
        // another session (a ref two sessions shared before refs were unique) are bound
        // to this one again, and that session's output is stored under its own ref when
        // its log is imported again.
        let is_stored = |reference: &EvidenceRef| -> Result<bool> {
            Ok(view
                .evidence_by_ref(reference.as_str())?
                .is_some_and(|(_, r)| r.digest == digest && r.session == Some(session)))
        };
        if is_stored(&output.reference)?
            || output.legacy_reference.as_ref().map(is_stored).transpose()? == Some(true)
        {
            continue;
        }
        todo.push((output, bytes, session));
    }
    drop(view);
    let root = match EvidenceRoot::create(&root_path) {
        Ok(root) => root,
        Err(e) => {
            let reason = format!("the evidence root cannot be opened: {e}");
            result.failed.extend(todo.iter().map(|(output, _, _)| fail(output, reason.clone())));
            return Ok(result);
        }
    };
    let root_text = absolute(root.path())?.to_string_lossy().into_owned();
    for batch in todo.chunks(INDEX_BATCH) {
        let prepared: Vec<std::result::Result<EvidenceRecord, FailedToolOutput>> = index.in_pool(|| {
            batch
                .par_iter()
                .map(|(output, bytes, session)| {
                    root.write_once(&output.reference, bytes).map_err(|e| fail(output, e.to_string()))?;
                    prepare(index, &output.reference, bytes, &EvidenceOptions::default(), Some(*session))
                        .map(|(_, r)| r)
                        .map_err(|e| fail(output, e.to_string()))
                })
                .collect()
        });
        let mut records = Vec::with_capacity(prepared.len());
        for outcome in prepared {
            match outcome {
                Ok(record) => records.push(record),
                Err(failed) => result.failed.push(failed),
            }
        }
        result.stored += records.len() as u64;
        put_records(index, &root_text, &records)?;
    }
    Ok(result)
}

/// `bytes` as evidence keeps them: redacted unless [`crate::Options::redact`] is off.
pub(crate) fn redacted<'b>(index: &Index, bytes: &'b [u8]) -> Cow<'b, [u8]> {
    match index.options().redact {
        true => crate::redact::redact_bytes(bytes),
        false => Cow::Borrowed(bytes),
    }
}

/// Indexes `records` under `root` in one transaction.
pub(crate) fn put_records(index: &Index, root: &str, records: &[EvidenceRecord]) -> Result<()> {
    index.store().write(|view| -> Result<()> {
        view.note_text_written(index.options().redact)?;
        view.set_evidence_root(root)?;
        for record in records {
            view.put_evidence(record)?;
        }
        Ok(())
    })
}

/// Reads a document by ref. A file with several hard links is read only if it is indexed
/// with these bytes (a walk saw all its links inside the root): otherwise it cannot be told
/// from a link to a file outside.
pub(crate) fn read_file(index: &Index, reference: &EvidenceRef) -> Result<Vec<u8>> {
    let root = evidence_root(index)?;
    let tree = EvidenceRoot::open(&root).map_err(|e| match e {
        RootError::Io { cause, .. } if cause.kind() == std::io::ErrorKind::NotFound => {
            Error::from(RootError::NotFound { reference: reference.clone(), root: root.clone() })
        }
        other => other.into(),
    })?;
    let document = tree.read(reference)?;
    let digest = xxhash_rust::xxh3::xxh3_64(&document.bytes);
    let indexed = index.store().read()?.evidence_by_ref(reference.as_str())?;
    if document.links > 1 && indexed.as_ref().is_none_or(|(_, r)| r.digest != digest) {
        return Err(Error::BadRef(format!(
            "evidence ref {reference} is a file with {} hard links, which may lead outside the evidence root: copy it into the tree, or index the tree (`ctxgate evidence index`), which checks every link",
            document.links
        )));
    }
    // Evidence is never modified: a file whose bytes are not the indexed ones was edited
    // or damaged, and is not served as the evidence.
    if indexed.is_some_and(|(_, r)| r.digest != digest) {
        return Err(Error::EvidenceChanged(format!(
            "evidence {reference} under {} does not have the bytes it was indexed with (edited or damaged); evidence is never modified: restore the file, or run `ctxgate evidence index` to index its new bytes",
            root.display()
        )));
    }
    Ok(document.bytes)
}

/// The projection and index record of a document.
pub(crate) fn prepare(
    index: &Index,
    reference: &EvidenceRef,
    bytes: &[u8],
    options: &EvidenceOptions<'_>,
    session: Option<u32>,
) -> Result<(Projection, EvidenceRecord)> {
    let doc = Document::parse(bytes);
    let projection =
        evidence::project(reference, &doc, options.spec, options.kind).map_err(EvidenceError::Projection)?;
    let compact = serde_json::to_string(&projection).map_err(EvidenceError::Json)?;
    let estimator = index.estimator();
    let full_tokens = match &doc {
        Document::Text(text) => estimator.estimate(text),
        _ => estimator.estimate(&String::from_utf8_lossy(bytes)),
    };
    let anchors = anchor::extract_hashed(&evidence::indexed_text(&doc), anchor_hash)
        .into_iter()
        .map(|a| (a.hash, a.tf))
        .collect();
    let record = EvidenceRecord {
        reference: reference.as_str().to_string(),
        kind: projection.kind.clone(),
        digest: xxhash_rust::xxh3::xxh3_64(bytes),
        bytes: bytes.len() as u64,
        session,
        full_tokens,
        projection_tokens: estimator.estimate(&compact),
        projection: compact,
        anchors,
    };
    Ok((projection, record))
}

fn session_names<S: Source>(view: &View<S>) -> Result<BTreeMap<u32, String>> {
    Ok(view.sessions()?.into_iter().map(|(id, r)| (id, r.name)).collect())
}

/// `path` made absolute, with links resolved if it exists.
fn absolute(path: &Path) -> Result<PathBuf> {
    path.canonicalize()
        .or_else(|_| std::path::absolute(path))
        .map_err(|cause| EvidenceError::Path { path: path.to_path_buf(), cause }.into())
}

#[cfg(test)]
mod tests {
    use super::store_tool_outputs;
    use crate::import::tool_evidence::{ToolOutput, outputs_of, tool_output_ref};
    use crate::import::turns::{ParsedTurn, ToolCall};
    use crate::{Gatekeeper, Options};

    fn turn_with(calls: &[(&str, &str)]) -> ParsedTurn {
        let tools = calls
            .iter()
            .map(|(id, result)| ToolCall {
                name: "Bash".into(),
                call_id: Some((*id).into()),
                result: Some((*result).into()),
                ..Default::default()
            })
            .collect();
        ParsedTurn { user: "u".into(), assistant: "a".into(), tools, ..Default::default() }
    }

    /// An index written before refs were unique has `a/b`'s output under `tool-output/a_b/`:
    /// importing the log again finds it there and stores no second copy.
    #[test]
    fn outputs_stored_under_their_legacy_ref_are_not_stored_again() -> Result<(), Box<dyn std::error::Error>>
    {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        gk.session("a/b")?.add_turn("u", "a")?;
        gk.session("a_b")?.add_turn("u", "a")?;
        let turns = [turn_with(&[("call_1", "same output")])];
        // What an older version stored: the session's output under the shared ref.
        let outputs = outputs_of("a/b", 0, &turns);
        let legacy = outputs[0].legacy_reference.clone().ok_or("a/b's ref changed")?;
        assert_eq!(legacy.as_str(), "tool-output/a_b/call_1.txt");
        let old = ToolOutput { reference: legacy.clone(), legacy_reference: None, ..outputs[0].clone() };
        assert_eq!(store_tool_outputs(gk.index(), &[old])?.stored, 1);

        let again = store_tool_outputs(gk.index(), &outputs)?;
        assert_eq!((again.stored, again.failed.len()), (0, 0), "{again:?}");
        // `a_b`'s own output has the ref it had before (`a_b` needs no digest), where the old
        // version put `a/b`'s: reported, as evidence is never overwritten.
        let other = outputs_of("a_b", 0, &[turn_with(&[("call_1", "a_b's own output")])]);
        assert_eq!(other[0].reference, legacy);
        let other_stored = store_tool_outputs(gk.index(), &other)?;
        assert_eq!((other_stored.stored, other_stored.failed.len()), (0, 1), "{other_stored:?}");
        assert!(other_stored.failed[0].reason.contains("other content"), "{other_stored:?}");
        assert_eq!(gk.list_evidence()?.len(), 1);
        Ok(())
    }

    #[test]
    fn a_call_id_used_twice_in_a_session_is_reported_not_raced() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let gk = Gatekeeper::open(dir.path().join("index.redb"), Options::default())?;
        gk.session("s")?.add_turn("u", "a")?;
        let turns = [
            turn_with(&[("dup", "first"), ("dup", "second"), ("ok", "third")]),
            turn_with(&[("dup", "first")]),
        ];
        let outputs = outputs_of("s", 0, &turns);
        let result = store_tool_outputs(gk.index(), &outputs)?;
        assert_eq!(result.stored, 2, "{result:?}");
        assert_eq!(result.failed.len(), 1, "the same bytes again are no failure: {result:?}");
        let failed = &result.failed[0];
        assert_eq!(failed.evidence_ref, tool_output_ref("s", 0, 1, Some("dup"), "second").as_str());
        assert!(failed.reason.contains("same ref"), "{failed:?}");
        assert_eq!(gk.read_evidence(&failed.evidence_ref, None)?, b"first", "the first one is kept");
        // An output of a session the index does not have is a failure too.
        let missing = store_tool_outputs(gk.index(), &outputs_of("nobody", 0, &turns[1..]))?;
        assert!(missing.failed[0].reason.contains("session is not in the index"), "{missing:?}");
        Ok(())
    }
}
