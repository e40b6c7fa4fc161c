//! The one rule that makes import idempotent and incremental: a session's stored turns must be
//! the start of the file's turns for it. Both import paths (a parsed file in memory, a
//! streamed canonical JSONL file) feed a [`Continuation`] the file's turns of a session in
//! order; only the turns after the stored ones are written.
//!
//! From the start of a session (`offset` 0) the session digest tells whether the file begins
//! with the stored turns without reading them; when it cannot (the file is shorter than the
//! history, or differs), or when an earlier file of the same import already fed the session
//! (`offset` > 0), the turns are compared one by one.
//!
//! With redaction on, the file's turns are compared in their redacted form, the form stored:
//! a history imported again is the same history (`crate::redact` is deterministic).

use crate::error::{Error, Result};
use crate::index::Index;
use crate::store::records::next_digest;
use crate::store::{Source, View};
use std::collections::HashMap;
use std::path::Path;

/// What the index holds of one session a file continues, and how far the file has matched it.
pub(super) struct Continuation {
    /// The session's name.
    pub name: String,
    id: Option<u32>,
    /// Where earlier files of this import left the session.
    offset: usize,
    /// Turns the index holds after `offset`.
    stored: usize,
    record_digest: u64,
    /// Digest of the file's first turns, up to `stored` (when `offset` is 0).
    digest: u64,
    /// Turns of the file seen so far.
    seen: usize,
    /// The file's turns are redacted before they are compared ([`crate::Options::redact`]).
    redact: bool,
}

impl Continuation {
    /// The session `name` as the index holds it, continued after `offsets[name]` turns fed by
    /// earlier files of this import. Validates the name.
    pub fn new<S: Source>(
        index: &Index,
        view: &View<S>,
        offsets: &HashMap<String, usize>,
        name: &str,
    ) -> Result<Self> {
        crate::index::check_session_name(name)?;
        let offset = offsets.get(name).copied().unwrap_or(0);
        let (id, count, record_digest) = match view.session_by_name(name)? {
            Some((id, r)) => (Some(id), r.turn_count as usize, r.digest),
            None => (None, 0, 0),
        };
        Ok(Continuation {
            name: name.to_string(),
            id,
            offset,
            stored: count.saturating_sub(offset),
            record_digest,
            digest: 0,
            seen: 0,
            redact: index.options().redact,
        })
    }

    /// Takes the file's next turn of the session. A turn that differs from the stored one at
    /// its place is a conflict (found here when the session was fed by an earlier file, by
    /// [`check`](Self::check) otherwise).
    pub fn observe<S: Source>(
        &mut self,
        view: &View<S>,
        path: &Path,
        user: &str,
        assistant: &str,
    ) -> Result<()> {
        if self.seen < self.stored {
            let (user, assistant) = (&*self.redacted(user), &*self.redacted(assistant));
            if self.offset == 0 {
                self.digest = next_digest(self.digest, user, assistant);
            } else if !self.stored_turn_is(view, self.seen, user, assistant)? {
                return Err(self.conflict(path, self.seen));
            }
        }
        self.seen += 1;
        Ok(())
    }

    /// The turn id the file's first turn of the session has.
    pub fn offset(&self) -> u32 {
        self.offset as u32
    }

    /// Turns of the file seen so far.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// Turns of the file the index already has: the first ones, not written again.
    pub fn existing(&self) -> usize {
        self.seen.min(self.stored)
    }

    /// Once every turn is observed: true if the digest could not confirm that the file starts
    /// with the stored turns, and [`check`](Self::check) must compare them.
    pub fn needs_check(&self) -> bool {
        let digest_matches = self.seen >= self.stored && self.digest == self.record_digest;
        self.offset == 0 && self.stored > 0 && !digest_matches
    }

    /// Compares the file's turns of the session (`turns`, the same ones again, in order) with
    /// the stored ones. `Ok` if the file's turns are a prefix of the history.
    pub fn check<S: Source, T: AsRef<str>>(
        &self,
        view: &View<S>,
        path: &Path,
        turns: impl IntoIterator<Item = Result<(T, T)>>,
    ) -> Result<()> {
        for (position, turn) in turns.into_iter().take(self.stored).enumerate() {
            let (user, assistant) = turn?;
            let (user, assistant) = (self.redacted(user.as_ref()), self.redacted(assistant.as_ref()));
            if !self.stored_turn_is(view, position, &user, &assistant)? {
                return Err(self.conflict(path, position));
            }
        }
        // Every compared turn equal but the digests differ: only a hash collision does that.
        if self.seen >= self.stored {
            return Err(self.conflict(path, self.stored - 1));
        }
        Ok(())
    }

    /// A text of the file as it is stored.
    fn redacted<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        match self.redact {
            true => crate::redact::redact(text),
            false => std::borrow::Cow::Borrowed(text),
        }
    }

    fn stored_turn_is<S: Source>(
        &self,
        view: &View<S>,
        position: usize,
        user: &str,
        assistant: &str,
    ) -> Result<bool> {
        let Some(id) = self.id else { return Ok(false) };
        let stored = view.turn_record(id, (self.offset + position) as u32)?;
        Ok(stored.is_some_and(|s| s.user == user && s.assistant == assistant))
    }

    fn conflict(&self, path: &Path, turn: usize) -> Error {
        Error::Conflict {
            path: path.to_path_buf(),
            session: self.name.clone(),
            turn: (self.offset + turn) as u32,
        }
    }

    /// Records in `offsets` the turns of the file fed to this session, for the import's next
    /// file of the same session.
    pub fn advance(&self, offsets: &mut HashMap<String, usize>) {
        *offsets.entry(self.name.clone()).or_default() += self.seen;
    }
}
