//! `Gatekeeper`: the facade over one index file that the CLI, the server, the hooks and sync use.

use crate::error::Result;
use crate::evidence::{EvidenceIndexReport, EvidenceInfo, EvidenceOptions, Projection};
use crate::index::{Index, OpenStore, check_session_name};
use crate::jobs::{
    CompactProgress, CompactReport, ForgetReport, SecretFinding, VerifyProgress, VerifyReport,
};
use crate::options::Options;
use crate::query::search::SearchHit;
use crate::session::Session;
use crate::store::Store;
use crate::tokens::TokenEstimator;
use crate::write::{ImportOptions, ImportProgress, ImportReport};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// A session's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct SessionInfo {
    /// Name.
    pub name: String,
    /// Number of turns.
    pub turns: u32,
    /// First turn of the current topic segment.
    pub segment_start: u32,
    /// The log file it was imported from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Title from the source.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Timestamp of the first turn: RFC 3339 for Unix seconds (ChatGPT's), else as the source
    /// wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_start: Option<String>,
    /// Timestamp of the last turn, as `time_start`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_end: Option<String>,
}

impl From<crate::store::records::SessionRecord> for SessionInfo {
    fn from(r: crate::store::records::SessionRecord) -> Self {
        SessionInfo {
            name: r.name,
            turns: r.turn_count,
            segment_start: r.segment_start,
            source: r.source,
            title: r.title,
            time_start: r.time_start.map(crate::jobs::forget::display_time),
            time_end: r.time_end.map(crate::jobs::forget::display_time),
        }
    }
}

/// What the index holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Sessions.
    pub sessions: u64,
    /// Turns.
    pub turns: u64,
    /// Distinct anchors.
    pub anchors: u64,
    /// Postings (one per anchor per turn).
    pub postings: u64,
    /// Turns not yet folded into posting chunks.
    pub pending_turns: u64,
    /// Size of the index file in bytes.
    pub file_bytes: u64,
    /// Whether this run redacts secrets in what it writes ([`Options::redact`]).
    pub redaction: bool,
    /// How the index's text was written, as it records it (`None`: nothing recorded, an
    /// index that holds nothing or that a ctxgate without redaction wrote).
    pub history: Option<crate::RedactionHistory>,
    /// The rules of its last redacting write.
    pub redaction_rules: Option<String>,
}

/// An open index: the entry point of the library.
///
/// # Damaged files
/// redb can panic on a damaged file (a flipped bit, a cut file). Opening and every write
/// return such a panic as a `damaged` error ([`crate::StoreError::Damaged`]); a read may
/// still panic. Run calls on a file that may be damaged through [`crate::catch_damage`],
/// as the CLI and the server do, and drop the `Gatekeeper` after a `damaged` error.
pub struct Gatekeeper {
    index: Index,
}

impl Gatekeeper {
    /// Opens the index at `path`, creating it if the file does not exist.
    ///
    /// # Errors
    /// [`crate::Error::InvalidOption`] for a zero budget or cache; store errors for a file that is
    /// not an index, of another version, or held by another process past `busy_timeout`.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Gatekeeper> {
        Gatekeeper::open_with(path.as_ref(), options, Store::open)
    }

    /// Opens the existing index at `path` read-only, for queries: no file is created or
    /// modified, and other read-only opens (other processes' queries) share the file; a
    /// read-write open waits for them, as they wait for it (`busy_timeout`). Write methods
    /// return a `read_only` error ([`crate::StoreError::ReadOnly`]) before touching any file.
    ///
    /// A file a killed writer left unfinished (not closed cleanly, an interrupted import's
    /// runs) is first finished by a read-write open, as [`Gatekeeper::open`] would.
    ///
    /// # Errors
    /// `unknown_index` ([`crate::StoreError::UnknownIndex`]) if there is no index file at
    /// `path` (none, or an empty one); otherwise as [`Gatekeeper::open`].
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Gatekeeper> {
        Gatekeeper::open_with(path.as_ref(), options, Store::open_read_only)
    }

    fn open_with(path: &Path, options: Options, open: OpenStore) -> Result<Gatekeeper> {
        Ok(Gatekeeper { index: Index::open(path, options, open)? })
    }

    /// Replaces the token estimator of [`Options::tokenizer`] (DESIGN §3.5: any tokenizer can
    /// stand in). A call's [`crate::SelectOptions::tokenizer`] still overrides it.
    pub fn set_token_estimator(&mut self, estimator: Box<dyn TokenEstimator>) {
        self.index.set_estimator(estimator);
    }

    /// A session by name. It need not exist yet: its first [`Session::add_turn`] creates it.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] for an empty name, one over 256 bytes, one with control
    /// characters or surrounding whitespace.
    pub fn session(&self, name: &str) -> Result<Session<'_>> {
        check_session_name(name)?;
        Ok(Session::new(&self.index, name.to_string()))
    }

    /// Every session, in creation order.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        let view = self.index.store().read()?;
        Ok(view.sessions()?.into_iter().map(|(_, r)| SessionInfo::from(r)).collect())
    }

    /// What the index holds.
    pub fn stats(&self) -> Result<Stats> {
        let view = self.index.store().read()?;
        let counts = view.counts()?;
        let recorded = view.redaction()?;
        Ok(Stats {
            redaction: self.index.options().redact,
            history: recorded.as_ref().map(|r| r.history),
            redaction_rules: recorded.and_then(|r| r.rules),
            sessions: counts.sessions,
            turns: counts.turns,
            anchors: counts.anchors,
            postings: counts.postings,
            pending_turns: counts.pending,
            file_bytes: self.index.store().file_size()?,
        })
    }

    /// The space each table of the file takes, largest first (`ctxgate stats --tables`). Reads
    /// every page of the index.
    pub fn table_sizes(&self) -> Result<Vec<crate::TableSize>> {
        Ok(self.index.store().read()?.table_sizes()?)
    }

    /// Imports conversation logs (files, or directories walked recursively) and reports what
    /// was new, already there, or skipped. See [`crate::import`] for the rules.
    ///
    /// # Errors
    /// Errors of the index (busy, damaged, a disk that cannot be written) stop the import. A
    /// file that fails is reported in its [`crate::FileReport`] (`status: failed`, nothing of it
    /// written) and the next file is read; one file given alone fails with its own error (path
    /// and line). A path given that does not exist is such a file; a directory that cannot be
    /// listed stops the import before anything is read.
    pub fn import(&self, paths: &[PathBuf], options: &ImportOptions) -> Result<ImportReport> {
        self.import_with_progress(paths, options, &mut |_| {})
    }

    /// [`Gatekeeper::import`], calling `progress` after each file.
    pub fn import_with_progress(
        &self,
        paths: &[PathBuf],
        options: &ImportOptions,
        progress: &mut (dyn FnMut(ImportProgress) + Send),
    ) -> Result<ImportReport> {
        self.index.check_writable()?;
        if let Some(name) = &options.session {
            self.session(name)?;
        }
        let files = crate::import::collect_files(paths)?;
        self.index.in_pool(|| crate::write::import_files(&self.index, &files, options, progress))
    }

    /// Folds every pending turn into the posting lists now, in one durable transaction.
    ///
    /// Turns are folded in batches as they are added; answers are the same before and after.
    /// Call it before copying the file, or when a writer is about to stop for a long time.
    pub fn fold_pending(&self) -> Result<()> {
        self.index.store().write(|view| -> Result<()> { Ok(view.fold()?) })
    }

    /// The turns of every session that best match `query`, at most `limit`, best first.
    ///
    /// Where [`Session::select`] builds one session's context, this finds which conversations
    /// discussed something: DESIGN §3.4's lexical score without its recency term, over the
    /// whole history (see `search`).
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        crate::session::check_query(query)?;
        let view = self.index.store().read()?;
        crate::query::search::search_hits(&view, query, limit, None)
    }

    /// [`Gatekeeper::search`] within the named `sessions` only (names the index does not hold
    /// are passed over): a project's sessions, say. The other sessions' postings are skipped,
    /// not scored, and every hit is one of them.
    ///
    /// # Errors
    /// As [`Gatekeeper::search`].
    pub fn search_in(&self, query: &str, limit: usize, sessions: &[&str]) -> Result<Vec<SearchHit>> {
        crate::session::check_query(query)?;
        let view = self.index.store().read()?;
        let mut ids = Vec::with_capacity(sessions.len());
        for name in sessions {
            if let Some((id, _)) = view.session_by_name(name)? {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        ids.dedup();
        crate::query::search::search_hits(&view, query, limit, Some(&ids))
    }

    /// The value a client of the library stored under `key` with
    /// [`Gatekeeper::update_client_value`]; `None` if there is none.
    pub fn client_value(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.index.store().read()?.client_value(key)?)
    }

    /// Replaces the value under `key` with what `update` makes of the current one (`None`
    /// removes it), in one write transaction: two processes updating the same key never lose
    /// each other's change. A small key/value space beside the index's own records, for
    /// clients' state that must travel with the index (`ctxgate sync`'s spaces, cursors and
    /// tombstones); values should stay small (each is read and written whole).
    pub fn update_client_value(
        &self,
        key: &str,
        update: impl FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>>,
    ) -> Result<()> {
        self.index.check_writable()?;
        self.index.store().write(|view| -> Result<()> {
            let new = update(view.client_value(key)?);
            Ok(view.put_client_value(key, new.as_deref())?)
        })
    }

    /// Whether the index was opened read-only ([`Gatekeeper::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.index.store().is_read_only()
    }

    /// The options the index was opened with.
    pub fn options(&self) -> &Options {
        self.index.options()
    }

    /// The index file's path.
    pub fn path(&self) -> &Path {
        self.index.store().path()
    }

    /// Checks the whole index against its stored turns: every record decodes; every pending
    /// row and posting holds the anchors the turn's text yields; document frequencies, N and
    /// the length sums match the folded turns. One read transaction: writers may go on.
    ///
    /// # Errors
    /// Only when the file cannot be read at all; inconsistencies are in the report.
    pub fn verify(&self) -> Result<VerifyReport> {
        crate::jobs::verify::verify(&self.index)
    }

    /// [`Gatekeeper::verify`], calling `progress` as it goes: on a long history it reads every
    /// turn and posting, which takes minutes.
    ///
    /// # Errors
    /// As [`Gatekeeper::verify`].
    pub fn verify_with_progress(&self, progress: &mut dyn FnMut(VerifyProgress)) -> Result<VerifyReport> {
        crate::jobs::verify::verify_with_progress(&self.index, progress)
    }

    /// Deletes the session `name` with its turns and postings; document frequencies, N and
    /// the length sums lose its turns in the same transaction.
    ///
    /// # Errors
    /// [`crate::Error::UnknownSession`] if no session has this name.
    pub fn forget_session(&self, name: &str) -> Result<ForgetReport> {
        crate::jobs::forget::forget_session(&self.index, name)
    }

    /// What [`Gatekeeper::forget_session`] would delete, in one read transaction that changes
    /// nothing (an index opened read-only will do).
    ///
    /// # Errors
    /// As [`Gatekeeper::forget_session`].
    pub fn forget_session_dry_run(&self, name: &str) -> Result<ForgetReport> {
        crate::jobs::forget::forget_session_dry_run(&self.index, name)
    }

    /// Deletes every session whose last turn (`time_end`, as imported) is before `date`
    /// (RFC 3339, `YYYY-MM-DD`, or Unix seconds; without an offset, UTC). Sessions without
    /// a readable time are kept and listed in the report. One transaction.
    ///
    /// # Errors
    /// [`crate::Error::InvalidInput`] if `date` is not a date.
    pub fn forget_before(&self, date: &str) -> Result<ForgetReport> {
        crate::jobs::forget::forget_before(&self.index, date)
    }

    /// What [`Gatekeeper::forget_before`] would delete, in one read transaction that changes
    /// nothing (an index opened read-only will do).
    ///
    /// # Errors
    /// As [`Gatekeeper::forget_before`].
    pub fn forget_before_dry_run(&self, date: &str) -> Result<ForgetReport> {
        crate::jobs::forget::forget_before_dry_run(&self.index, date)
    }

    /// Every secret the index's turns, its evidence projections and the documents under its
    /// evidence root hold (by the rules of [`crate::redact`]), in index order.
    ///
    /// # Errors
    /// If the index cannot be read; a document that cannot be read is skipped.
    pub fn scan_secrets(&self) -> Result<Vec<SecretFinding>> {
        crate::jobs::secrets::scan_secrets(&self.index)
    }

    /// Folds pending turns, rewrites posting lists whose chunks are not full (full chunks,
    /// numbered from 0), rewrites every chunk in key order so the posting pages fill, then
    /// compacts the file so free pages (after `forget`, and the old pages) are returned to
    /// the file system. Answers are the same before and after.
    ///
    /// Only one job runs per index at a time: while a `rebuild` or another `compact` runs, this
    /// waits the busy timeout, then fails `busy`.
    ///
    /// # Errors
    /// Store errors; the engine's compaction fails if another handle has a transaction open.
    pub fn compact(&mut self) -> Result<CompactReport> {
        crate::jobs::compact::compact(&mut self.index)
    }

    /// [`Gatekeeper::compact`], calling `progress` as it goes: after a big `forget`, packing
    /// and the engine's compaction of a long history take minutes.
    ///
    /// # Errors
    /// As [`Gatekeeper::compact`].
    pub fn compact_with_progress(
        &mut self,
        progress: &mut dyn FnMut(CompactProgress),
    ) -> Result<CompactReport> {
        crate::jobs::compact::compact_with_progress(&mut self.index, progress)
    }

    /// [`Gatekeeper::compact_with_progress`] when at least a quarter of what the index file
    /// holds on disk, and at least `min_bytes`, is not its data (free pages, and the unused part
    /// of part-full ones) and no other job or import holds the index; `None` if not worth it,
    /// or if another process has it (a lock held, a transaction that outlasts the busy
    /// timeout). A long import leaves
    /// such a file: each merge of its runs into the lists splits the posting pages it appends
    /// to and frees the ones it copies (at 1M generated turns, a third of the file). `ctxgate
    /// import` calls it when it is done, with [`crate::jobs::AUTO_COMPACT_MIN_BYTES`].
    ///
    /// # Errors
    /// As [`Gatekeeper::compact`], but for `busy`.
    pub fn compact_if_sparse(
        &mut self,
        min_bytes: u64,
        progress: &mut dyn FnMut(CompactProgress),
    ) -> Result<Option<CompactReport>> {
        crate::jobs::compact::compact_if_sparse(&mut self.index, min_bytes, progress)
    }

    /// The evidence root: [`crate::Options::evidence_root`], else the one recorded in the
    /// index, else `x.evidence` beside the index file `x.redb`.
    pub fn evidence_root(&self) -> Result<PathBuf> {
        crate::evidence::storage::evidence_root(&self.index)
    }

    /// Stores `bytes` as the document `reference` under the evidence root and indexes it;
    /// returns its projection. The dual write of DESIGN §4: the disk gets everything, the
    /// caller gets the projection.
    ///
    /// Storing the same bytes again is a no-op (the projection is made again, with `options`).
    ///
    /// # Errors
    /// [`crate::Error::BadRef`] for a ref that is absolute, has `..`, or leads out of the root
    /// through a link; [`crate::Error::Evidence`] if a different file already has this ref (evidence
    /// is never modified) or the file cannot be written.
    pub fn put_evidence(
        &self,
        reference: &str,
        bytes: &[u8],
        options: &EvidenceOptions<'_>,
    ) -> Result<Projection> {
        crate::evidence::storage::put_evidence(&self.index, reference, bytes, options)
    }

    /// Indexes every file under `dir` in place, with refs relative to `dir`, which becomes
    /// the evidence root. Files whose bytes are unchanged since they were indexed are skipped
    /// (by digest); documents no longer in the tree are dropped from the index. Files are read
    /// and projected in parallel, written 256 per transaction.
    ///
    /// # Errors
    /// [`crate::Error::Evidence`] if `dir` is not a directory, or is not the index's recorded root
    /// while evidence is indexed under that one.
    pub fn index_evidence(&self, dir: &Path, options: &EvidenceOptions<'_>) -> Result<EvidenceIndexReport> {
        crate::evidence::storage::index_evidence(&self.index, dir, options)
    }

    /// The bytes of document `reference`, or with `pointer` the JSON value at that RFC 6901
    /// pointer (pretty-printed): reading evidence by reference.
    ///
    /// # Errors
    /// [`crate::Error::BadRef`], or [`crate::Error::Evidence`] if there is no such file, the document is
    /// not JSON, or nothing is at the pointer.
    pub fn read_evidence(&self, reference: &str, pointer: Option<&str>) -> Result<Vec<u8>> {
        crate::evidence::storage::read_evidence(&self.index, reference, pointer)
    }

    /// The projection of document `reference` as it is on disk now. Without a kind in
    /// `options`, the kind it was indexed as (if the spec has it), else the spec's globs.
    ///
    /// # Errors
    /// As [`Gatekeeper::read_evidence`]; [`crate::Error::Evidence`] for a kind the spec lacks.
    pub fn project_evidence(&self, reference: &str, options: &EvidenceOptions<'_>) -> Result<Projection> {
        crate::evidence::storage::project_evidence(&self.index, reference, options)
    }

    /// Every indexed document, by ref.
    pub fn list_evidence(&self) -> Result<Vec<EvidenceInfo>> {
        crate::evidence::storage::list_evidence(&self.index)
    }

    /// Drops documents from the index (their files stay). Returns how many were indexed.
    pub fn forget_evidence(&self, references: &[String]) -> Result<u64> {
        crate::evidence::storage::forget_evidence(&self.index, references)
    }

    /// What the budget is counted with: [`Options::tokenizer`], or the estimator
    /// [`Gatekeeper::set_token_estimator`] put in its place.
    pub fn token_estimator(&self) -> &dyn TokenEstimator {
        self.index.estimator()
    }

    /// Shares `cache` with this handle: a process that opens the index for every call (the MCP
    /// server) keeps the pending turns decoded across its opens. Correct for any index, as the
    /// cache is keyed by what the index holds.
    pub fn share_read_cache(&mut self, cache: &ReadCache) {
        self.index.store_mut().share_pending_cache(std::sync::Arc::clone(&cache.0));
    }

    /// The index below the facade, for unit tests of the components that take one.
    #[cfg(test)]
    pub(crate) fn index(&self) -> &Index {
        &self.index
    }

    #[cfg(test)]
    pub(crate) fn store(&self) -> &crate::store::Store {
        self.index.store()
    }
}

/// Decoded index state that outlives one [`Gatekeeper`]: see [`Gatekeeper::share_read_cache`].
#[derive(Default, Clone)]
pub struct ReadCache(std::sync::Arc<crate::store::PendingCache>);

impl ReadCache {
    /// How many opens decoded the pending turns themselves.
    #[cfg(test)]
    pub(crate) fn misses(&self) -> u64 {
        self.0.misses()
    }
}

impl std::fmt::Debug for ReadCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadCache")
    }
}
