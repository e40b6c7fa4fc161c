//! `verify`: checks that document frequencies, N, the length sums and the postings agree with
//! the stored turns, and that every record decodes.

use super::{derive_forward, progress_due};
use crate::error::Result;
use crate::index::Index;
use crate::postings::codec::{self, Posting, quantize_len};
use crate::store::records::SessionRecord;
use crate::store::{self, FoldedTotals};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Problems kept in a report; the count goes on past it.
pub const MAX_PROBLEMS: usize = 1000;

/// One inconsistency: the record it is about, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Problem {
    /// The record: `turn 3:17`, `terms a1b2…`, `posting a1b2…/3/0`, `meta`, ...
    pub key: String,
    /// What is wrong with it.
    pub message: String,
}

/// What [`crate::Gatekeeper::verify`] checked and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Sessions checked.
    pub sessions: u64,
    /// Turns checked.
    pub turns: u64,
    /// Of them, pending turns.
    pub pending_turns: u64,
    /// Posting rows checked.
    pub chunks: u64,
    /// Postings checked.
    pub postings: u64,
    /// `terms` rows checked.
    pub anchors: u64,
    /// Evidence documents checked.
    pub evidence: u64,
    /// Evidence postings checked.
    pub evidence_postings: u64,
    /// Number of inconsistencies found (only the first [`MAX_PROBLEMS`] are listed).
    pub problem_count: u64,
    /// The inconsistencies, in the order found.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// True if nothing is inconsistent.
    pub fn is_ok(&self) -> bool {
        self.problem_count == 0
    }

    fn problem(&mut self, key: impl Into<String>, message: impl Into<String>) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(Problem { key: key.into(), message: message.into() });
        }
    }
}

/// A phase of [`crate::Gatekeeper::verify`], in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VerifyPhase {
    /// Stored turns: each one's anchors derived again from its text.
    Turns,
    /// Posting rows: decoded and merged with the postings the turns give.
    Postings,
    /// `terms` rows: document frequencies against the folded turns.
    Anchors,
    /// Evidence documents, their postings and document frequencies.
    Evidence,
}

impl VerifyPhase {
    /// What the phase counts, for a progress display: `turns`, `posting chunks`, ...
    pub fn name(self) -> &'static str {
        match self {
            VerifyPhase::Turns => "turns",
            VerifyPhase::Postings => "posting rows",
            VerifyPhase::Anchors => "anchors",
            VerifyPhase::Evidence => "evidence documents",
        }
    }
}

/// How far [`crate::Gatekeeper::verify_with_progress`] has got: items of the current phase checked
/// of the rows its table holds. Each phase is reported at its start (`done` 0), every
/// 1,024 items, and at its end (`done == total` unless a row stopped the walk); a phase
/// with nothing to check only at its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyProgress {
    /// The phase running.
    pub phase: VerifyPhase,
    /// Items of the phase checked so far.
    pub done: u64,
    /// Items the phase checks.
    pub total: u64,
}

/// An expected folded posting: `(anchor, session, turn)` and its values as stored.
type Expected = ((u64, u32, u32), (u32, u32, u32, u32));

fn posting_values(p: &Posting) -> (u32, u32, u32, u32) {
    (p.tf_user, p.tf_assistant, p.len_user, p.len_assistant)
}

/// [`crate::Gatekeeper::verify`].
pub(crate) fn verify(index: &Index) -> Result<VerifyReport> {
    verify_with_progress(index, &mut |_| {})
}

/// [`crate::Gatekeeper::verify_with_progress`].
pub(crate) fn verify_with_progress(
    index: &Index,
    progress: &mut dyn FnMut(VerifyProgress),
) -> Result<VerifyReport> {
    let mut report = VerifyReport::default();
    let view = match index.store().read() {
        Ok(view) => view,
        Err(store::Error::Corrupt { what }) => {
            report.problem("pending", what);
            return Ok(report);
        }
        Err(e) => return Err(e.into()),
    };
    if view.import_running() {
        // Its turns are not in the lists yet: every one would be an inconsistency.
        return Err(store::Error::ImportRunning { path: index.store().path().to_path_buf() }.into());
    }
    // Sessions and names.
    let mut sessions: BTreeMap<u32, SessionRecord> = BTreeMap::new();
    view.for_each_session_row(|id, record| match record {
        Ok(record) => {
            sessions.insert(id, record);
        }
        Err(e) => report.problem(format!("session {id}"), e.to_string()),
    })?;
    report.sessions = sessions.len() as u64;
    let mut named: HashMap<u32, String> = HashMap::new();
    view.for_each_name(|name, id| {
        match sessions.get(&id) {
            None => {
                report.problem(format!("name {name:?}"), format!("names session {id}, which does not exist"))
            }
            Some(r) if r.name != name => report.problem(
                format!("name {name:?}"),
                format!("names session {id}, which is called {:?}", r.name),
            ),
            Some(_) => {}
        }
        named.insert(id, name.to_string());
    })?;
    for (id, record) in &sessions {
        if !named.contains_key(id) {
            report.problem(
                format!("session {id}"),
                format!("its name {:?} is not in session_names", record.name),
            );
        }
    }
    let totals = view.row_counts()?;
    let mut report_progress = |phase, done, total| progress(VerifyProgress { phase, done, total });
    // Turns: re-derive each one's anchors.
    report_progress(VerifyPhase::Turns, 0, totals.turns);
    let mut expected: Vec<Expected> = Vec::new();
    let mut df: HashMap<u64, u64> = HashMap::new();
    let mut folded = FoldedTotals::default();
    let mut turn_counts: BTreeMap<u32, u32> = BTreeMap::new();
    let pending = view.pending();
    view.for_each_turn_row(|session, turn, record| {
        report.turns += 1;
        if progress_due(report.turns, totals.turns) {
            report_progress(VerifyPhase::Turns, report.turns, totals.turns);
        }
        let key = format!("turn {session}:{turn}");
        *turn_counts.entry(session).or_default() += 1;
        match sessions.get(&session) {
            None => report.problem(key.clone(), "its session does not exist"),
            Some(s) if turn >= s.turn_count => {
                report.problem(key.clone(), format!("beyond the session's {} turns", s.turn_count))
            }
            Some(_) => {}
        }
        let record = match record {
            Ok(record) => record,
            Err(e) => {
                report.problem(key, e.to_string());
                return true;
            }
        };
        let forward = derive_forward(&record.user, &record.assistant);
        if let Some(stored) = pending.get(session, turn) {
            report.pending_turns += 1;
            if *stored != forward {
                report.problem(
                    format!("pending {session}:{turn}"),
                    "its anchors differ from those of the turn's text",
                );
            }
            return true;
        }
        folded.blocks += 1;
        folded.len_user += u64::from(forward.len_user);
        folded.len_assistant += u64::from(forward.len_assistant);
        let (len_user, len_assistant) = (quantize_len(forward.len_user), quantize_len(forward.len_assistant));
        for &(hash, tf_user, tf_assistant) in &forward.entries {
            *df.entry(hash).or_default() += 1;
            let posting = Posting::new(turn, tf_user, tf_assistant, len_user, len_assistant);
            expected.push(((hash, session, turn), posting_values(&posting)));
        }
        true
    })?;
    if report.turns > 0 {
        report_progress(VerifyPhase::Turns, report.turns, totals.turns);
    }
    for (&id, record) in &sessions {
        let found = turn_counts.get(&id).copied().unwrap_or(0);
        if found != record.turn_count {
            report.problem(
                format!("session {id}"),
                format!("records {} turns, {found} are stored", record.turn_count),
            );
        }
    }
    for (session, turn, _) in pending.iter() {
        if view.turn_record(session, turn).ok().flatten().is_none() {
            report.problem(format!("pending {session}:{turn}"), "no stored turn (or it does not decode)");
        }
    }
    // Postings: merge the rows, in key order, with the expected postings.
    expected.sort_unstable_by_key(|e| e.0);
    let mut next = 0usize;
    let mut anchor: Option<u64> = None;
    let mut last: Option<(u32, u32)> = None;
    let mut decoded = Vec::new();
    let mut norms = view.norms();
    report_progress(VerifyPhase::Postings, 0, totals.chunks);
    view.for_each_row(|hash, (session, turn), bytes| {
        report.chunks += 1;
        if progress_due(report.chunks, totals.chunks) {
            report_progress(VerifyPhase::Postings, report.chunks, totals.chunks);
        }
        let key = format!("posting row {hash:016x}/{session}/{turn}");
        if anchor != Some(hash) {
            anchor = Some(hash);
            last = None;
        }
        decoded.clear();
        if let Err(e) = codec::decode_row(hash, (session, turn), bytes, |s, p| decoded.push((s, p))) {
            report.problem(key, e.to_string());
            return true;
        }
        for (session, p) in &mut decoded {
            let session = *session;
            if let Err(e) = norms.fill(session, p) {
                report.problem(key.clone(), e.to_string());
            }
            let p = &*p;
            report.postings += 1;
            if last.is_some_and(|l| (session, p.turn) <= l) {
                report.problem(key.clone(), format!("turn {session}:{} is out of order", p.turn));
            }
            last = Some((session, p.turn));
            let at = (hash, session, p.turn);
            while next < expected.len() && expected[next].0 < at {
                let (h, s, t) = expected[next].0;
                report.problem(
                    format!("posting {h:016x}/{s}"),
                    format!("turn {t} has the anchor but no posting"),
                );
                next += 1;
            }
            if next < expected.len() && expected[next].0 == at {
                if expected[next].1 != posting_values(p) {
                    report.problem(
                        key.clone(),
                        format!(
                            "turn {session}:{}: stored tf/lengths {:?}, the text gives {:?}",
                            p.turn,
                            posting_values(p),
                            expected[next].1
                        ),
                    );
                }
                next += 1;
            } else {
                report.problem(key.clone(), format!("turn {session}:{} does not have this anchor", p.turn));
            }
        }
        true
    })?;
    if report.chunks > 0 {
        report_progress(VerifyPhase::Postings, report.chunks, totals.chunks);
    }
    for &((h, s, t), _) in &expected[next..] {
        report.problem(format!("posting {h:016x}/{s}"), format!("turn {t} has the anchor but no posting"));
    }
    // Document frequencies.
    report_progress(VerifyPhase::Anchors, 0, totals.terms);
    view.for_each_term(|hash, stored| {
        report.anchors += 1;
        if progress_due(report.anchors, totals.terms) {
            report_progress(VerifyPhase::Anchors, report.anchors, totals.terms);
        }
        let want = df.remove(&hash).unwrap_or(0);
        if stored != want {
            report
                .problem(format!("terms {hash:016x}"), format!("df {stored}, the folded turns give {want}"));
        }
    })?;
    if report.anchors > 0 {
        report_progress(VerifyPhase::Anchors, report.anchors, totals.terms);
    }
    let mut missing: Vec<(u64, u64)> = df.into_iter().collect();
    missing.sort_unstable();
    for (hash, want) in missing {
        report.problem(format!("terms {hash:016x}"), format!("missing; the folded turns give df {want}"));
    }
    // N and the length sums.
    let stored = view.folded_totals();
    let counted = FoldedTotals { postings: report.postings, ..folded };
    for (what, have, want) in [
        ("folded_blocks", stored.blocks, counted.blocks),
        ("folded_len_user", stored.len_user, counted.len_user),
        ("folded_len_assistant", stored.len_assistant, counted.len_assistant),
        ("folded_postings", stored.postings, counted.postings),
    ] {
        if have != want {
            report.problem(format!("meta {what}"), format!("{have}, the folded turns give {want}"));
        }
    }
    report_progress(VerifyPhase::Evidence, 0, totals.evidence);
    let mut evidence_progress = |done| {
        if progress_due(done, totals.evidence) {
            report_progress(VerifyPhase::Evidence, done, totals.evidence);
        }
    };
    verify_evidence(&view, &sessions, &mut report, &mut evidence_progress)?;
    if report.evidence > 0 {
        report_progress(VerifyPhase::Evidence, report.evidence, totals.evidence);
    }
    verify_evidence_files(index, &view, &mut report);
    Ok(report)
}

/// Each indexed document's file still has the bytes it was indexed with (its digest): an
/// edited or damaged document is listed, as `evidence show` refuses it. A file that is gone
/// is not a problem of the index (rebuild derives its anchors from its projection).
pub(crate) fn verify_evidence_files<S: store::Source>(
    index: &Index,
    view: &store::View<S>,
    report: &mut VerifyReport,
) {
    let mut indexed: Vec<(String, u64)> = Vec::new();
    let walked = view.for_each_evidence(|_, record| {
        indexed.push((record.reference, record.digest));
        true
    });
    if walked.is_err() || indexed.is_empty() {
        return; // already reported by `verify_evidence`
    }
    let Ok(root) = crate::evidence::storage::evidence_root(index) else { return };
    let Ok(tree) = crate::evidence::EvidenceRoot::open(&root) else { return };
    for (reference, digest) in indexed {
        let Ok(parsed) = crate::evidence::EvidenceRef::parse(&reference) else { continue };
        if let Ok(document) = tree.read(&parsed)
            && xxhash_rust::xxh3::xxh3_64(&document.bytes) != digest
        {
            report.problem(
                format!("evidence {reference}"),
                "its file's bytes changed since it was indexed: restore the file, or run `ctxgate evidence index` to index the new bytes".to_string(),
            );
        }
    }
}

/// Evidence: every record decodes and its ref maps to it; postings, document frequencies
/// and totals agree with the records' anchors; a session's evidence belongs to a session.
/// `progress` gets the number of documents walked after each one.
fn verify_evidence<S: store::Source>(
    view: &store::View<S>,
    sessions: &BTreeMap<u32, SessionRecord>,
    report: &mut VerifyReport,
    progress: &mut dyn FnMut(u64),
) -> Result<()> {
    let meta = match view.evidence_meta() {
        Ok(meta) => meta,
        Err(e) => {
            report.problem("meta evidence", e.to_string());
            return Ok(());
        }
    };
    // (hash, id) -> (tf, len) as the records say.
    let mut expected: BTreeMap<(u64, u32), (u32, u32)> = BTreeMap::new();
    let mut df: HashMap<u64, u32> = HashMap::new();
    let mut total_len = 0u64;
    let mut records: Vec<(u32, String)> = Vec::new();
    let mut bad: Vec<(u32, String)> = Vec::new();
    let walked = view.for_each_evidence(|id, record| {
        report.evidence += 1;
        progress(report.evidence);
        if record.session.is_some_and(|s| !sessions.contains_key(&s)) {
            bad.push((id, format!("belongs to session {:?}, which does not exist", record.session)));
        }
        let len = record.len();
        total_len += len;
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        for &(hash, tf) in &record.anchors {
            expected.insert((hash, id), (tf, len));
            *df.entry(hash).or_default() += 1;
        }
        records.push((id, record.reference));
        true
    });
    if let Err(e) = walked {
        report.problem("evidence", e.to_string());
        return Ok(());
    }
    for (id, message) in bad {
        report.problem(format!("evidence {id}"), message);
    }
    for (id, reference) in &records {
        match view.evidence_by_ref(reference) {
            Ok(Some((found, _))) if found == *id => {}
            Ok(_) => {
                report.problem(format!("evidence {id}"), format!("its ref {reference:?} does not name it"))
            }
            Err(e) => report.problem(format!("evidence_refs {reference:?}"), e.to_string()),
        }
    }
    let mut problems = Vec::new();
    view.for_each_evidence_posting(|hash, id, tf, len| {
        report.evidence_postings += 1;
        match expected.remove(&(hash, id)) {
            Some(want) if want == (tf, len) => {}
            Some(want) => problems.push((
                format!("evidence posting {hash:016x}/{id}"),
                format!("tf/length {:?}, the record gives {want:?}", (tf, len)),
            )),
            None => problems.push((
                format!("evidence posting {hash:016x}/{id}"),
                "the document's record does not have this anchor".to_string(),
            )),
        }
    })?;
    for ((hash, id), _) in expected {
        problems.push((
            format!("evidence posting {hash:016x}/{id}"),
            "missing for an anchor of the record".into(),
        ));
    }
    view.for_each_evidence_term(|hash, stored| {
        let want = df.remove(&hash).unwrap_or(0);
        if stored != want {
            problems.push((
                format!("evidence_terms {hash:016x}"),
                format!("df {stored}, the records give {want}"),
            ));
        }
    })?;
    let mut missing: Vec<(u64, u32)> = df.into_iter().collect();
    missing.sort_unstable();
    for (hash, want) in missing {
        problems
            .push((format!("evidence_terms {hash:016x}"), format!("missing; the records give df {want}")));
    }
    for (what, have, want) in
        [("documents", meta.documents, report.evidence), ("total_len", meta.total_len, total_len)]
    {
        if have != want {
            problems.push((format!("meta evidence {what}"), format!("{have}, the records give {want}")));
        }
    }
    for (key, message) in problems {
        report.problem(key, message);
    }
    Ok(())
}
