//! `ctxgate sync`: one history across machines and a team through PostgreSQL, the index
//! staying local (`docs/sync.md`).
//!
//! A client of the library's facade, as the CLI is: it reads turns with
//! [`Session::for_each_turn`](crate::Session::for_each_turn), writes pulled turns through
//! [`Gatekeeper::import`] (canonical JSONL, so import's digest rule guards every write), and
//! keeps its state in the index's client key/value space ([`state`]).
//!
//! One sync of a space: push the tombstones of sessions forgotten here; pull what changed
//! remotely since the space's cursor; push the local sessions that changed since their last
//! sync. A session whose remote turns are not the start of its local ones (or the reverse) is
//! a conflict, reported and left alone on both sides.

mod connect;
pub mod pgpass;
mod schema;
pub mod state;

use crate::import::CanonicalLine;
use crate::{Format, Gatekeeper, ImportOptions, RedactionHistory, TurnId};
use postgres::Client;
use postgres::types::ToSql;
use serde::Serialize;
use state::{Space, State, Synced};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;

pub use connect::redact_password;
pub use schema::SCHEMA;

/// Turns pushed in one remote transaction, and pulled into one import.
pub const BATCH_TURNS: usize = 2000;

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A setting is wrong (the URL, a space, the stored state).
    #[error("{0}")]
    Config(String),
    /// The remote refused or went away. What was committed stays consistent; sync again.
    #[error("{0}")]
    Remote(String),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] crate::Error),
    /// The index holds text written without redaction.
    #[error(
        "the index holds text written without secret redaction ({0}): run `ctxgate redact` first, or pass --allow-unredacted to push it as it is"
    )]
    Unredacted(&'static str),
    /// A temporary file for pulled turns failed.
    #[error("a temporary file for pulled turns: {0}")]
    Io(#[from] std::io::Error),
    /// A session shrank while sync read it (forgotten or replaced by another process).
    #[error("a session changed while sync read it: run `ctxgate sync` again")]
    Changed,
}

impl From<postgres::Error> for SyncError {
    fn from(e: postgres::Error) -> Self {
        let detail = match e.as_db_error() {
            Some(db) => format!("{}: {}", db.code().code(), db.message()),
            None => match std::error::Error::source(&e) {
                Some(source) => format!("{e}: {source}"),
                None => e.to_string(),
            },
        };
        SyncError::Remote(format!(
            "the remote failed ({detail}); what was committed on either side is consistent: run sync again"
        ))
    }
}

/// How to sync.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// The spaces to sync (default: every shared space).
    pub spaces: Vec<String>,
    /// Push from an index that holds text written without redaction.
    pub allow_unredacted: bool,
}

/// What a sync did to one space.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SpaceReport {
    /// The space.
    pub space: String,
    /// Sessions that gained remote turns, and how many.
    pub pushed_sessions: u64,
    /// Turns pushed.
    pub pushed_turns: u64,
    /// Sessions that gained local turns, and how many.
    pub pulled_sessions: u64,
    /// Turns pulled.
    pub pulled_turns: u64,
    /// Tombstones pushed (sessions forgotten here).
    pub tombstones_pushed: u64,
    /// Local sessions dropped because another machine forgot them.
    pub forgotten: u64,
    /// Sessions left alone, with why (a conflict: the two histories differ).
    pub refused: Vec<Refused>,
}

/// A session sync left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refused {
    /// Local session name.
    pub session: String,
    /// Why.
    pub reason: String,
}

/// What a sync did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Per space, in name order.
    pub spaces: Vec<SpaceReport>,
}

/// The chain digest of a session's turns: each turn's digest covers it and every turn before
/// it, so equal digests at turn `n` mean equal first `n` turns. [`SEED`] before the first.
pub fn next_digest(previous: u64, user: &str, assistant: &str) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(&previous.to_le_bytes());
    hasher.update(&(user.len() as u64).to_le_bytes());
    hasher.update(user.as_bytes());
    hasher.update(&(assistant.len() as u64).to_le_bytes());
    hasher.update(assistant.as_bytes());
    hasher.digest()
}

/// The digest of no turns.
pub const SEED: u64 = 0;

/// Opens a connection to `url` (environment and password file as libpq; TLS unless the URL
/// says `sslmode=disable`).
pub fn connect(url: &str) -> Result<Client, SyncError> {
    connect::connect(&connect::config(url)?, url)
}

/// Creates the remote tables and policies ([`SCHEMA`]); running it again changes nothing.
pub fn init(url: &str) -> Result<(), SyncError> {
    let mut client = connect(url)?;
    let mut tx = client.transaction()?;
    // Two inits at once would race on CREATE ... IF NOT EXISTS.
    tx.execute("SELECT pg_advisory_xact_lock(hashtext('ctxgate sync init'))", &[])?;
    tx.batch_execute(SCHEMA)?;
    tx.commit()?;
    Ok(())
}

/// The SQL that lets `role` read and write `space` (and grants it the tables).
pub fn grant_sql(space: &str, role: &str) -> String {
    format!(
        "{}INSERT INTO ctxgate_space_roles (space, role) VALUES ({}, {}) ON CONFLICT DO NOTHING;\n",
        schema::grant(role),
        quote_literal(space),
        quote_literal(role)
    )
}

/// Lets `role` (an existing role) read and write `space`: what `sync grant` does, as the
/// tables' owner.
pub fn grant(url: &str, space: &str, role: &str) -> Result<(), SyncError> {
    check_space_name(space)?;
    let mut client = connect(url)?;
    let mut tx = client.transaction()?;
    tx.batch_execute(&schema::grant(role))?;
    tx.execute(
        "INSERT INTO ctxgate_space_roles (space, role) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        &[&space, &role],
    )?;
    tx.commit()?;
    Ok(())
}

/// `text` as an SQL string literal, safe whatever `standard_conforming_strings` says (an
/// escape string, with backslashes and quotes doubled).
fn quote_literal(text: &str) -> String {
    format!("E'{}'", text.replace('\\', "\\\\").replace('\'', "''"))
}

fn check_space_name(space: &str) -> Result<(), SyncError> {
    let bad =
        space.is_empty() || space.len() > 256 || space.chars().any(char::is_control) || space.trim() != space;
    match bad {
        true => Err(SyncError::Config(format!(
            "{space:?} cannot be a space name: give 1 to 256 bytes, no control characters or surrounding spaces"
        ))),
        false => Ok(()),
    }
}

/// Shares `space`: the sessions of `project` (the `<cwd>` part of the hooks' `<cwd>#<id>`
/// session names), or with `None` every session of the index under its own name. Sharing a space again changes its project.
pub fn share(gatekeeper: &Gatekeeper, space: &str, project: Option<&str>) -> Result<(), SyncError> {
    check_space_name(space)?;
    let project = project.map(crate::hook::project_key);
    state::update(gatekeeper, |s| {
        let entry = s.spaces.entry(space.to_string()).or_default();
        if entry.project != project {
            *entry = Space { project, ..Space::default() };
        }
    })
}

/// Stops sharing `space` (nothing is deleted, here or remotely). False if it was not shared.
pub fn unshare(gatekeeper: &Gatekeeper, space: &str) -> Result<bool, SyncError> {
    let mut found = false;
    state::update(gatekeeper, |s| {
        found = s.spaces.remove(space).is_some();
        s.tombstones.retain(|t| t.space != space);
    })?;
    Ok(found)
}

/// Records tombstones for the shared sessions among `names`, which are about to be forgotten:
/// the next sync deletes them remotely and on every machine. Call it before forgetting them,
/// so that a crash between the two leaves the tombstone (which the next sync applies here too).
/// Returns how many were recorded.
pub fn note_forgotten(gatekeeper: &Gatekeeper, names: &[String]) -> Result<usize, SyncError> {
    if state::load(gatekeeper)?.spaces.is_empty() {
        return Ok(0);
    }
    let mut recorded = 0;
    state::update(gatekeeper, |s| {
        for (space_name, space) in &mut s.spaces {
            for name in names {
                if let Some(id) = space.remote_id(name) {
                    space.synced.remove(id);
                    let tombstone = state::Tombstone { space: space_name.clone(), session: id.to_string() };
                    if !s.tombstones.contains(&tombstone) {
                        s.tombstones.push(tombstone);
                        recorded += 1;
                    }
                }
            }
        }
    })?;
    Ok(recorded)
}

/// Syncs the shared spaces of `gatekeeper` with the remote at `url`.
///
/// # Errors
/// [`SyncError::Unredacted`] before anything is pushed from an index that holds raw text,
/// unless [`SyncOptions::allow_unredacted`]; remote and index errors stop the sync, leaving
/// what was committed consistent (the next sync completes it).
pub fn sync(gatekeeper: &Gatekeeper, url: &str, options: &SyncOptions) -> Result<SyncReport, SyncError> {
    let state = state::load(gatekeeper)?;
    if state.spaces.is_empty() {
        return Err(SyncError::Config(
            "nothing is shared: `ctxgate sync share --space NAME --project DIR` shares a project's sessions (`--all` the whole index)"
                .into(),
        ));
    }
    for wanted in &options.spaces {
        if !state.spaces.contains_key(wanted) {
            return Err(SyncError::Config(format!(
                "space {wanted:?} is not shared here: `ctxgate sync share --space {wanted}` first"
            )));
        }
    }
    if !options.allow_unredacted {
        match gatekeeper.stats()?.history {
            Some(RedactionHistory::Raw) => return Err(SyncError::Unredacted("written with --no-redact")),
            Some(RedactionHistory::Mixed) => {
                return Err(SyncError::Unredacted("partly written without redaction"));
            }
            _ => {}
        }
    }
    let mut client = connect(url)?;
    let mut report = SyncReport::default();
    for name in state.spaces.keys() {
        if !options.spaces.is_empty() && !options.spaces.contains(name) {
            continue;
        }
        let mut space = SpaceSync { gatekeeper, client: &mut client, name, report: SpaceReport::default() };
        space.report.space = name.clone();
        space.push_tombstones()?;
        space.pull()?;
        space.push()?;
        report.spaces.push(space.report);
    }
    Ok(report)
}

/// A local session's turns from `first` on, read for a push or a digest.
struct LocalTurns {
    first: u32,
    /// Turns `first..`.
    lines: Vec<CanonicalLine>,
    /// `digests[i]`: the digest of the first `first + i` turns.
    digests: Vec<u64>,
}

impl LocalTurns {
    /// The digest of the first `turns` turns (`turns` from `first` on).
    /// [`SyncError::Changed`] if the session no longer has them.
    fn digest_at(&self, turns: u32) -> Result<u64, SyncError> {
        let at = turns.checked_sub(self.first).ok_or(SyncError::Changed)?;
        self.digests.get(at as usize).copied().ok_or(SyncError::Changed)
    }

    /// Turns `from..`; [`SyncError::Changed`] if the session no longer has turn `from`.
    fn lines_from(&self, from: u32) -> Result<&[CanonicalLine], SyncError> {
        let at = from.checked_sub(self.first).ok_or(SyncError::Changed)?;
        self.lines.get(at as usize..).ok_or(SyncError::Changed)
    }

    /// The session's turn count.
    fn end(&self) -> u32 {
        self.first + self.lines.len() as u32
    }
}

/// Most new turns read one by one after a session's recorded state, instead of walking the
/// session from its start.
const TAIL_TURNS: u32 = 256;

/// A session to pull: the remote has more turns than the local one, which it starts with.
struct ToPull {
    id: String,
    local: String,
}

/// A session to push: its local turns after the remote's `from`.
struct ToPush {
    id: String,
    local: String,
    /// What the remote row must still be (turns, digest) for the push to apply.
    expected: (u32, u64),
    turns: LocalTurns,
}

struct SpaceSync<'a> {
    gatekeeper: &'a Gatekeeper,
    client: &'a mut Client,
    name: &'a str,
    report: SpaceReport,
}

impl SpaceSync<'_> {
    fn space(&self) -> Result<Space, SyncError> {
        state::load(self.gatekeeper)?
            .spaces
            .get(self.name)
            .cloned()
            .ok_or_else(|| SyncError::Config(format!("space {:?} was unshared during the sync", self.name)))
    }

    fn save(&self, change: impl FnOnce(&mut Space)) -> Result<(), SyncError> {
        state::update(self.gatekeeper, |s: &mut State| {
            if let Some(space) = s.spaces.get_mut(self.name) {
                change(space);
            }
        })
    }

    /// Local sessions by name → turns.
    fn local_sessions(&self) -> Result<HashMap<String, u32>, SyncError> {
        Ok(self.gatekeeper.sessions()?.into_iter().map(|s| (s.name, s.turns)).collect())
    }

    fn refuse(&mut self, session: &str, reason: String) {
        log::warn!("sync {}: {session}: {reason}", self.name);
        self.report.refused.push(Refused { session: session.to_string(), reason });
    }

    /// Pushes the tombstones recorded here: the remote forgets the sessions.
    fn push_tombstones(&mut self) -> Result<(), SyncError> {
        let pending: Vec<String> = state::load(self.gatekeeper)?
            .tombstones
            .into_iter()
            .filter(|t| t.space == self.name)
            .map(|t| t.session)
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        let mut tx = self.client.transaction()?;
        let seq = lock_and_number(&mut tx, self.name)?;
        tx.execute(
            "INSERT INTO ctxgate_tombstones (space, session, seq) SELECT $1, s, $2 FROM unnest($3::text[]) AS s \
             ON CONFLICT (space, session) DO UPDATE SET seq = EXCLUDED.seq, forgotten_at = now()",
            &[&self.name, &seq, &pending],
        )?;
        tx.execute(
            "DELETE FROM ctxgate_turns WHERE space = $1 AND session = ANY($2)",
            &[&self.name, &pending],
        )?;
        tx.execute(
            "DELETE FROM ctxgate_sessions WHERE space = $1 AND session = ANY($2)",
            &[&self.name, &pending],
        )?;
        tx.commit()?;
        state::update(self.gatekeeper, |s| {
            s.tombstones.retain(|t| !(t.space == self.name && pending.contains(&t.session)))
        })?;
        self.report.tombstones_pushed += pending.len() as u64;
        Ok(())
    }

    /// Pulls what changed remotely since the space's cursor.
    fn pull(&mut self) -> Result<(), SyncError> {
        let space = self.space()?;
        // One snapshot for both reads: the cursor then covers exactly what was read.
        let mut tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        let sessions = tx.query(
            "SELECT session, turns, digest, seq FROM ctxgate_sessions WHERE space = $1 AND seq > $2",
            &[&self.name, &space.cursor],
        )?;
        let tombstones = tx.query(
            "SELECT session, seq FROM ctxgate_tombstones WHERE space = $1 AND seq > $2",
            &[&self.name, &space.cursor],
        )?;
        tx.commit()?;
        let mut cursor = space.cursor;
        for row in tombstones.iter().chain(&sessions) {
            cursor = cursor.max(row.get::<_, i64>("seq"));
        }
        let mut local = self.local_sessions()?;
        for row in &tombstones {
            let id: String = row.get(0);
            self.forget_here(&space, &id, &mut local)?;
        }
        let remote: Vec<(String, u32, u64)> = sessions
            .iter()
            .map(|r| (r.get::<_, String>(0), r.get::<_, i32>(1).max(0) as u32, r.get::<_, i64>(2) as u64))
            .collect();
        let complete = self.pull_sessions(&space, &local, &remote)?;
        if complete {
            self.save(|s| s.cursor = s.cursor.max(cursor))?;
        }
        Ok(())
    }

    /// Drops local session `id` of the space, which another machine forgot.
    fn forget_here(
        &mut self,
        space: &Space,
        id: &str,
        local: &mut HashMap<String, u32>,
    ) -> Result<(), SyncError> {
        let name = space.local_name(id);
        if local.remove(&name).is_some() {
            match self.gatekeeper.forget_session(&name) {
                Ok(_) => self.report.forgotten += 1,
                Err(crate::Error::UnknownSession { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.save(|s| {
            s.synced.remove(id);
        })
    }

    /// Brings in the remote sessions `remote` (id, turns, digest) that extend local ones, and
    /// checks those of equal length. False if some could not be pulled for a reason other than
    /// a conflict (the cursor then stays, and the next sync tries again).
    fn pull_sessions(
        &mut self,
        space: &Space,
        local: &HashMap<String, u32>,
        remote: &[(String, u32, u64)],
    ) -> Result<bool, SyncError> {
        let mut queue: Vec<ToPull> = Vec::new();
        let mut queued_turns = 0usize;
        let mut complete = true;
        for (id, n, remote_digest) in remote {
            let name = space.local_name(id);
            if self.gatekeeper.session(&name).is_err() {
                self.refuse(&name, "the remote session id cannot name a session here".into());
                continue;
            }
            let m = local.get(&name).copied().unwrap_or(0);
            if *n < m {
                continue; // the push does it
            }
            let local_digest = self.local_digest(space, id, &name, m)?;
            let remote_at_m = if m == *n { *remote_digest } else { self.remote_digest_at(id, m)? };
            if local_digest != remote_at_m {
                self.refuse(&name, format!("conflict: the first {m} turns differ here and on the remote"));
                continue;
            }
            if m == *n {
                let synced = Synced { turns: m, digest: local_digest };
                // Most such rows are this machine's own pushes coming back: nothing to write.
                if space.synced.get(id) != Some(&synced) {
                    self.save(|s| {
                        s.synced.insert(id.clone(), synced);
                    })?;
                }
                continue;
            }
            queue.push(ToPull { id: id.clone(), local: name });
            queued_turns += *n as usize;
            if queued_turns >= BATCH_TURNS {
                complete &= self.pull_batch(std::mem::take(&mut queue))?;
                queued_turns = 0;
            }
        }
        if !queue.is_empty() {
            complete &= self.pull_batch(queue)?;
        }
        Ok(complete)
    }

    /// The digest of the first `turns` turns of local session `name` (remote id `id`): the one
    /// recorded at its last sync when it had as many, else computed from its turns.
    fn local_digest(&self, space: &Space, id: &str, name: &str, turns: u32) -> Result<u64, SyncError> {
        if turns == 0 {
            return Ok(SEED);
        }
        match space.synced.get(id) {
            Some(synced) if synced.turns == turns => Ok(synced.digest),
            _ => Ok(read_local(self.gatekeeper, name, Some(turns))?.digest_at(turns)?),
        }
    }

    fn remote_digest_at(&mut self, id: &str, turns: u32) -> Result<u64, SyncError> {
        if turns == 0 {
            return Ok(SEED);
        }
        let row = self.client.query_opt(
            "SELECT digest FROM ctxgate_turns WHERE space = $1 AND session = $2 AND turn_index = $3",
            &[&self.name, &id, &((turns - 1) as i32)],
        )?;
        // A missing row means the session was forgotten meanwhile: no turn matches.
        Ok(row.map_or(!SEED, |r| r.get::<_, i64>(0) as u64))
    }

    /// Fetches the sessions of `queue` whole and imports them, as one canonical JSONL file.
    fn pull_batch(&mut self, queue: Vec<ToPull>) -> Result<bool, SyncError> {
        let ids: Vec<&str> = queue.iter().map(|p| p.id.as_str()).collect();
        let rows = self.client.query(
            "SELECT session, turn_index, digest, user_text, assistant_text, time, tools::text FROM ctxgate_turns \
             WHERE space = $1 AND session = ANY($2) ORDER BY session, turn_index",
            &[&self.name, &ids],
        )?;
        let locals: HashMap<&str, &str> = queue.iter().map(|p| (p.id.as_str(), p.local.as_str())).collect();
        let mut file = tempfile::Builder::new().prefix("ctxgate-sync-").suffix(".jsonl").tempfile()?;
        let mut out = std::io::BufWriter::new(file.as_file_mut());
        // Per session: turns written and the digest after them, checked against each row's.
        let mut written: BTreeMap<&str, (u32, u64)> = BTreeMap::new();
        // Sessions whose rows stop chaining, and where: the turns before are pulled.
        let mut damaged: Vec<(String, u32)> = Vec::new();
        for row in &rows {
            let id: &str = row.get(0);
            let index: i32 = row.get(1);
            let Some(&local) = locals.get(id) else { continue };
            let (count, digest) = written.entry(id).or_insert((0, SEED));
            if damaged.iter().any(|(d, _)| d == id) {
                continue;
            }
            let user: String = row.get(3);
            let assistant: String = row.get(4);
            let next = next_digest(*digest, &user, &assistant);
            if index != *count as i32 || next != row.get::<_, i64>(2) as u64 {
                damaged.push((id.to_string(), *count));
                continue;
            }
            let tools: String = row.get(6);
            let line = CanonicalLine {
                session: local.to_string(),
                turn: Some(u64::from(*count)),
                user,
                assistant,
                time: row.get(5),
                tools: serde_json::from_str(&tools).unwrap_or_default(),
            };
            serde_json::to_writer(&mut out, &line).map_err(std::io::Error::other)?;
            out.write_all(b"\n")?;
            *count += 1;
            *digest = next;
        }
        out.flush()?;
        drop(out);
        for (id, turn) in &damaged {
            let name = locals.get(id.as_str()).copied().unwrap_or(id.as_str());
            let reason = format!(
                "the remote's turn {turn} does not chain to the ones before (its digest is wrong): only the turns before it were pulled"
            );
            self.refuse(name, reason);
            written.remove(id.as_str());
        }
        let options = ImportOptions { format: Format::Jsonl, evidence: false, ..ImportOptions::default() };
        let report = self.gatekeeper.import(&[file.path().to_path_buf()], &options);
        let report = match report {
            Ok(report) => report,
            Err(crate::Error::Conflict { session, .. }) => {
                // A local write raced the check: the next sync looks again.
                self.refuse(&session, "conflict: the session changed here during the pull".into());
                return Ok(false);
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(failed) = report.files.iter().find(|f| f.status == crate::FileStatus::Failed) {
            return Err(SyncError::Config(format!(
                "the pulled turns could not be imported: {}",
                failed.reason.as_deref().unwrap_or("unknown")
            )));
        }
        self.report.pulled_turns += report.new_turns;
        let mut synced = Vec::new();
        for (id, (turns, digest)) in &written {
            self.report.pulled_sessions += 1;
            synced.push((id.to_string(), Synced { turns: *turns, digest: *digest }));
        }
        self.save(|s| s.synced.extend(synced))?;
        Ok(damaged.is_empty())
    }

    /// Pushes the local sessions that changed since their last sync.
    fn push(&mut self) -> Result<(), SyncError> {
        let space = self.space()?;
        let local = self.local_sessions()?;
        let mut changed: Vec<(String, String, u32)> = local
            .iter()
            .filter_map(|(name, &turns)| {
                let id = space.remote_id(name)?;
                let synced = space.synced.get(id).is_some_and(|s| s.turns == turns);
                // A session the pull refused is reported once.
                let refused = self.report.refused.iter().any(|r| &r.session == name);
                (!synced && !refused && turns > 0).then(|| (id.to_string(), name.clone(), turns))
            })
            .collect();
        if changed.is_empty() {
            return Ok(());
        }
        changed.sort();
        let ids: Vec<&str> = changed.iter().map(|(id, _, _)| id.as_str()).collect();
        let (remote, tombstoned) = remote_states(&mut *self.client, self.name, &ids)?;
        let mut behind = Vec::new();
        let mut queue: Vec<ToPush> = Vec::new();
        let mut queued_turns = 0usize;
        let mut local_left = local.clone();
        for (id, name, m) in changed {
            if tombstoned.contains(&id) {
                self.forget_here(&space, &id, &mut local_left)?;
                continue;
            }
            let (n, remote_digest) = remote.get(&id).copied().unwrap_or((0, SEED));
            if n > m {
                behind.push((id, n, remote_digest));
                continue;
            }
            // The remote holds what this machine last synced: only the turns after it are read.
            let tail = space
                .synced
                .get(&id)
                .filter(|s| (s.turns, s.digest) == (n, remote_digest) && m - n <= TAIL_TURNS);
            let turns = match tail {
                Some(synced) => read_tail(self.gatekeeper, &name, *synced, m)?,
                None => read_local(self.gatekeeper, &name, None)?,
            };
            if turns.digest_at(n)? != remote_digest {
                self.refuse(&name, format!("conflict: the first {n} turns differ here and on the remote"));
                continue;
            }
            if n == m {
                let synced = Synced { turns: m, digest: remote_digest };
                self.save(|s| {
                    s.synced.insert(id.clone(), synced);
                })?;
                continue;
            }
            if let Some(turn) = turns.lines_from(n)?.iter().position(has_nul) {
                self.refuse(
                    &name,
                    format!(
                        "turn {} holds a NUL character, which PostgreSQL text cannot store",
                        n as usize + turn
                    ),
                );
                continue;
            }
            queued_turns += (m - n) as usize;
            queue.push(ToPush { id, local: name, expected: (n, remote_digest), turns });
            if queued_turns >= BATCH_TURNS {
                self.push_batch(std::mem::take(&mut queue))?;
                queued_turns = 0;
            }
        }
        if !queue.is_empty() {
            self.push_batch(queue)?;
        }
        if !behind.is_empty() {
            self.pull_sessions(&space, &local_left, &behind)?;
        }
        Ok(())
    }

    /// Pushes `queue` in one transaction, under the space's lock: each session only if the
    /// remote still holds what it was compared with.
    fn push_batch(&mut self, queue: Vec<ToPush>) -> Result<(), SyncError> {
        let mut tx = self.client.transaction()?;
        let seq = lock_and_number(&mut tx, self.name)?;
        let ids: Vec<&str> = queue.iter().map(|p| p.id.as_str()).collect();
        let (current, tombstoned) = remote_states(&mut tx, self.name, &ids)?;
        let mut columns = Columns::default();
        let mut applied: Vec<(String, Synced)> = Vec::new();
        let mut already: Vec<(String, Synced)> = Vec::new();
        let mut changed_meanwhile = Vec::new();
        for push in &queue {
            let m = push.turns.end();
            let final_state = (m, push.turns.digest_at(m)?);
            let now = current.get(&push.id).copied().unwrap_or((0, SEED));
            if tombstoned.contains(&push.id) || (now != push.expected && now != final_state) {
                changed_meanwhile.push(push.local.clone());
                continue;
            }
            let synced = Synced { turns: final_state.0, digest: final_state.1 };
            if now == final_state {
                already.push((push.id.clone(), synced));
                continue;
            }
            let from = push.expected.0;
            for (offset, line) in push.turns.lines_from(from)?.iter().enumerate() {
                let index = from + offset as u32;
                columns.push(&push.id, index as i32, push.turns.digest_at(index + 1)?, line);
            }
            columns.sessions.push(push.id.clone());
            columns.session_turns.push(final_state.0 as i32);
            columns.session_digests.push(final_state.1 as i64);
            self.report.pushed_turns += u64::from(m - from);
            applied.push((push.id.clone(), synced));
        }
        if !applied.is_empty() {
            tx.execute(
                "INSERT INTO ctxgate_turns (space, session, turn_index, digest, user_text, assistant_text, time, tools, seq) \
                 SELECT $1, s, i, d, u, a, t, tl::jsonb, $2 \
                 FROM unnest($3::text[], $4::int4[], $5::int8[], $6::text[], $7::text[], $8::text[], $9::text[]) AS x(s, i, d, u, a, t, tl) \
                 ON CONFLICT (space, session, turn_index) DO NOTHING",
                &[
                    &self.name,
                    &seq,
                    &columns.session as &(dyn ToSql + Sync),
                    &columns.index,
                    &columns.digest,
                    &columns.user,
                    &columns.assistant,
                    &columns.time,
                    &columns.tools,
                ],
            )?;
            tx.execute(
                "INSERT INTO ctxgate_sessions (space, session, turns, digest, seq) \
                 SELECT $1, s, n, d, $2 FROM unnest($3::text[], $4::int4[], $5::int8[]) AS x(s, n, d) \
                 ON CONFLICT (space, session) DO UPDATE SET turns = EXCLUDED.turns, digest = EXCLUDED.digest, \
                 seq = EXCLUDED.seq, updated_at = now()",
                &[&self.name, &seq, &columns.sessions, &columns.session_turns, &columns.session_digests],
            )?;
        }
        tx.commit()?;
        self.report.pushed_sessions += applied.len() as u64;
        for name in changed_meanwhile {
            self.refuse(
                &name,
                "the remote session changed during the push: the next sync looks again".into(),
            );
        }
        applied.extend(already);
        self.save(|s| s.synced.extend(applied))
    }
}

/// Takes the space's lock for the rest of the transaction, then the change number of its
/// writes: changes of a space commit in the order of their numbers (see [`schema`]).
fn lock_and_number(tx: &mut postgres::Transaction<'_>, space: &str) -> Result<i64, SyncError> {
    tx.execute("SELECT pg_advisory_xact_lock(hashtext($1))", &[&space])?;
    Ok(tx.query_one("SELECT nextval('ctxgate_changes')", &[])?.get(0))
}

/// The columns of a batch of turns, as arrays for `unnest`.
#[derive(Default)]
struct Columns {
    session: Vec<String>,
    index: Vec<i32>,
    digest: Vec<i64>,
    user: Vec<String>,
    assistant: Vec<String>,
    time: Vec<Option<String>>,
    tools: Vec<String>,
    sessions: Vec<String>,
    session_turns: Vec<i32>,
    session_digests: Vec<i64>,
}

impl Columns {
    fn push(&mut self, session: &str, index: i32, digest: u64, line: &CanonicalLine) {
        self.session.push(session.to_string());
        self.index.push(index);
        self.digest.push(digest as i64);
        self.user.push(line.user.clone());
        self.assistant.push(line.assistant.clone());
        self.time.push(line.time.clone());
        self.tools.push(serde_json::to_string(&line.tools).unwrap_or_else(|_| "[]".into()));
    }
}

fn has_nul(line: &CanonicalLine) -> bool {
    line.user.contains('\0')
        || line.assistant.contains('\0')
        || line.time.as_deref().is_some_and(|t| t.contains('\0'))
        || line.tools.iter().any(|t| t.name.contains('\0') || t.arguments.contains('\0'))
}

/// The first `limit` turns (all with `None`) of local session `name`, with their digests.
/// Sessions' (turn count, digest) on the remote, by session id.
type RemoteStates = HashMap<String, (u32, u64)>;

/// The remote's (turns, digest) of the sessions `ids` of `space`, and those of them with a
/// tombstone: what a push compares with, before it and again under the space's lock.
fn remote_states(
    client: &mut impl postgres::GenericClient,
    space: &str,
    ids: &[&str],
) -> Result<(RemoteStates, Vec<String>), SyncError> {
    let states = client
        .query(
            "SELECT session, turns, digest FROM ctxgate_sessions WHERE space = $1 AND session = ANY($2)",
            &[&space, &ids],
        )?
        .iter()
        .map(|r| (r.get::<_, String>(0), (r.get::<_, i32>(1).max(0) as u32, r.get::<_, i64>(2) as u64)))
        .collect();
    let tombstoned = client
        .query(
            "SELECT session FROM ctxgate_tombstones WHERE space = $1 AND session = ANY($2)",
            &[&space, &ids],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok((states, tombstoned))
}

fn read_local(gatekeeper: &Gatekeeper, name: &str, limit: Option<TurnId>) -> Result<LocalTurns, SyncError> {
    let session = gatekeeper.session(name)?;
    let mut turns = LocalTurns { first: 0, lines: Vec::new(), digests: vec![SEED] };
    let limit = limit.unwrap_or(TurnId::MAX);
    let walked = session.for_each_turn(|turn| {
        if turn.turn_id >= limit {
            return Err(crate::Error::InvalidInput { what: "sync", reason: "enough turns read".into() });
        }
        let last = *turns.digests.last().unwrap_or(&SEED);
        turns.digests.push(next_digest(last, &turn.user, &turn.assistant));
        turns.lines.push(turn.to_canonical(name));
        Ok(())
    });
    match walked {
        Err(crate::Error::InvalidInput { what: "sync", .. }) | Ok(()) => Ok(turns),
        Err(e) => Err(e.into()),
    }
}

/// Turns `synced.turns..end` of local session `name`, read one at a time, their digests
/// continuing from `synced.digest`.
fn read_tail(
    gatekeeper: &Gatekeeper,
    name: &str,
    synced: Synced,
    end: TurnId,
) -> Result<LocalTurns, SyncError> {
    let session = gatekeeper.session(name)?;
    let mut turns = LocalTurns { first: synced.turns, lines: Vec::new(), digests: vec![synced.digest] };
    for turn_id in synced.turns..end {
        let Some(turn) = session.turn(turn_id)? else { break };
        let last = *turns.digests.last().unwrap_or(&SEED);
        turns.digests.push(next_digest(last, &turn.user, &turn.assistant));
        turns.lines.push(turn.to_canonical(name));
    }
    Ok(turns)
}
