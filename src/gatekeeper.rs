//! `Gatekeeper::open` and `Options`: the facade the CLI and the server use.

use crate::error::{Error, Result};
use crate::search::SearchHit;
use crate::select::Policy;
use crate::session::Session;
use crate::store::{Store, StoreOptions};
use crate::tokens::{TokenEstimator, Tokenizer};
use crate::write::{ImportOptions, ImportProgress, ImportReport};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// DESIGN §3.7: default token budget.
pub const DEFAULT_TOKEN_BUDGET: u32 = 4000;

/// Most scoring threads accepted: more only costs start-up time on any real machine.
pub const MAX_THREADS: usize = 256;

/// Longest accepted session name, in bytes.
pub const MAX_SESSION_NAME_BYTES: usize = 256;

/// Why `name` cannot be a session name, or `None` if it can. Import checks the names it reads
/// from a log with it too, so a bad one is reported at its line.
pub(crate) fn session_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_SESSION_NAME_BYTES {
        Some(format!("it is {} bytes, over the limit of {MAX_SESSION_NAME_BYTES}", name.len()))
    } else if name.chars().any(char::is_control) {
        Some("it contains control characters".to_string())
    } else if name.trim() != name {
        Some("it starts or ends with whitespace".to_string())
    } else {
        None
    }
}

/// How to open and use an index.
#[derive(Debug, Clone)]
pub struct Options {
    /// Token budget of a selection. Default 4000 (DESIGN §3.7).
    pub token_budget: u32,
    /// Selection policy. Default [`Policy::Minimal`].
    pub policy: Policy,
    /// Threads for parallel scoring: 0 = one per core (the default), 1 = inline.
    pub threads: usize,
    /// redb page cache in bytes. Default 64 MiB.
    pub cache_bytes: usize,
    /// How long to wait for another process to release the index. Default 5 s.
    pub busy_timeout: Duration,
    /// No effect since every open shares the file in redb's multi-writer mode (docs/DESIGN.md
    /// §6.10), which saves the allocator state with every commit: reopening after a crash is
    /// always quick, and a commit is always two fsyncs. Kept so that code setting it builds.
    pub quick_repair: bool,
    /// Where evidence documents are stored (DESIGN §4). Default: the root recorded in the
    /// index, or else a directory beside the index file named after it (`x.redb` →
    /// `x.evidence`).
    pub evidence_root: Option<PathBuf>,
    /// What the budget counts (DESIGN §3.5). Default [`Tokenizer::Chars`], the seed's
    /// `chars × 1.5`; [`Gatekeeper::set_token_estimator`] replaces it.
    pub tokenizer: Tokenizer,
    /// Whether secrets are redacted where text enters the index and the evidence root
    /// ([`crate::redact`], `docs/secrets.md`). Default true; false keeps the raw history
    /// (`--no-redact`), and the index records that it holds text written without it.
    pub redact: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            token_budget: DEFAULT_TOKEN_BUDGET,
            policy: Policy::Minimal,
            threads: 0,
            cache_bytes: 64 * 1024 * 1024,
            busy_timeout: Duration::from_secs(5),
            quick_repair: false,
            evidence_root: None,
            tokenizer: Tokenizer::Chars,
            redact: true,
        }
    }
}

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
    store: Store,
    options: Options,
    pool: Option<rayon::ThreadPool>,
    estimator: Box<dyn TokenEstimator>,
}

impl Gatekeeper {
    /// Opens the index at `path`, creating it if the file does not exist.
    ///
    /// # Errors
    /// [`Error::InvalidOption`] for a zero budget or cache; store errors for a file that is
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

    fn open_with(
        path: &Path,
        options: Options,
        open: fn(&Path, &StoreOptions) -> std::result::Result<Store, crate::store::Error>,
    ) -> Result<Gatekeeper> {
        if options.token_budget == 0 {
            return Err(Error::InvalidOption { name: "token_budget", reason: "must be at least 1".into() });
        }
        if options.threads > MAX_THREADS {
            return Err(Error::InvalidOption {
                name: "threads",
                reason: format!("{} is more than {MAX_THREADS}; 0 uses one per core", options.threads),
            });
        }
        if options.cache_bytes < 1024 * 1024 {
            return Err(Error::InvalidOption {
                name: "cache_bytes",
                reason: "must be at least 1 MiB".into(),
            });
        }
        let pool = match options.threads {
            0 => None,
            n => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(n)
                    .build()
                    .map_err(|e| Error::InvalidOption { name: "threads", reason: e.to_string() })?,
            ),
        };
        let store = open(
            path,
            &StoreOptions {
                cache_bytes: options.cache_bytes,
                busy_timeout: options.busy_timeout,
                quick_repair: options.quick_repair,
            },
        )?;
        let estimator = Box::new(options.tokenizer);
        Ok(Gatekeeper { store, options, pool, estimator })
    }

    /// Replaces the token estimator of [`Options::tokenizer`] (DESIGN §3.5: any tokenizer can
    /// stand in). A call's [`crate::SelectOptions::tokenizer`] still overrides it.
    pub fn set_token_estimator(&mut self, estimator: Box<dyn TokenEstimator>) {
        self.estimator = estimator;
    }

    /// A session by name. It need not exist yet: its first [`Session::add_turn`] creates it.
    ///
    /// # Errors
    /// [`Error::InvalidInput`] for an empty name, one over 256 bytes, one with control
    /// characters or surrounding whitespace.
    pub fn session(&self, name: &str) -> Result<Session<'_>> {
        match session_name_problem(name) {
            Some(reason) => Err(Error::InvalidInput { what: "session name", reason }),
            None => Ok(Session::new(self, name.to_string())),
        }
    }

    /// Every session, in creation order.
    pub fn sessions(&self) -> Result<Vec<SessionInfo>> {
        let view = self.store.read()?;
        Ok(view.sessions()?.into_iter().map(|(_, r)| SessionInfo::from(r)).collect())
    }

    /// What the index holds.
    pub fn stats(&self) -> Result<Stats> {
        let view = self.store.read()?;
        let counts = view.counts()?;
        let recorded = view.redaction()?;
        Ok(Stats {
            redaction: self.options.redact,
            history: recorded.as_ref().map(|r| r.history),
            redaction_rules: recorded.and_then(|r| r.rules),
            sessions: counts.sessions,
            turns: counts.turns,
            anchors: counts.anchors,
            postings: counts.postings,
            pending_turns: counts.pending,
            file_bytes: self.store.file_size()?,
        })
    }

    /// The space each table of the file takes, largest first (`ctxgate stats --tables`). Reads
    /// every page of the index.
    pub fn table_sizes(&self) -> Result<Vec<crate::TableSize>> {
        Ok(self.store.read()?.table_sizes()?)
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
        self.check_writable()?;
        if let Some(name) = &options.session {
            self.session(name)?;
        }
        let files = crate::import::collect_files(paths)?;
        self.in_pool(|| crate::write::import_files(self, &files, options, progress))
    }

    /// Folds every pending turn into the posting lists now, in one durable transaction.
    ///
    /// Turns are folded in batches as they are added; answers are the same before and after.
    /// Call it before copying the file, or when a writer is about to stop for a long time.
    pub fn fold_pending(&self) -> Result<()> {
        self.store.write(|view| -> Result<()> { Ok(view.fold()?) })
    }

    /// The turns of every session that best match `query`, at most `limit`, best first.
    ///
    /// Where [`Session::select`] builds one session's context, this finds which conversations
    /// discussed something: DESIGN §3.4's lexical score without its recency term, over the
    /// whole history (see `search`).
    pub fn search(&self, query: &str, limit: usize) -> Result<Vec<SearchHit>> {
        crate::session::check_query(query)?;
        let view = self.store.read()?;
        crate::search::search_hits(&view, query, limit)
    }

    /// The value a client of the library stored under `key` with
    /// [`Gatekeeper::update_client_value`]; `None` if there is none.
    pub fn client_value(&self, key: &str) -> Result<Option<Vec<u8>>> {
        Ok(self.store.read()?.client_value(key)?)
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
        self.check_writable()?;
        self.store.write(|view| -> Result<()> {
            let new = update(view.client_value(key)?);
            Ok(view.put_client_value(key, new.as_deref())?)
        })
    }

    /// Whether the index was opened read-only ([`Gatekeeper::open_read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.store.is_read_only()
    }

    /// A `read_only` error if the index was opened read-only: for writers that touch files
    /// (run files, evidence, lock files) before their first transaction.
    pub(crate) fn check_writable(&self) -> Result<()> {
        Ok(self.store.check_writable()?)
    }

    /// The options the index was opened with.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The index file's path.
    pub fn path(&self) -> &Path {
        self.store.path()
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    pub(crate) fn estimator(&self) -> &dyn TokenEstimator {
        self.estimator.as_ref()
    }

    /// Runs `f` on the configured thread pool (the global one when `threads` is 0).
    pub(crate) fn in_pool<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        match &self.pool {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}
