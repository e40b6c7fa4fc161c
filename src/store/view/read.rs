//! Lookups in a view: statistics, sessions, turns and posting lists.

use super::*;

impl<S: Source> View<S> {
    /// N and average side lengths over the whole index (folded + pending).
    pub fn corpus_stats(&self) -> CorpusStats {
        let blocks = self.meta.folded_blocks + self.pending.blocks.len() as u64;
        let avg = |folded: u64, pending: u64| {
            if blocks == 0 { 0.0 } else { (folded + pending) as f64 / blocks as f64 }
        };
        CorpusStats {
            blocks,
            avg_len_user: avg(self.meta.folded_len_user, self.pending.len_user),
            avg_len_assistant: avg(self.meta.folded_len_assistant, self.pending.len_assistant),
        }
    }

    /// Document frequency of an anchor over the whole index.
    pub fn df(&self, hash: u64) -> Result<u64, Error> {
        Ok(self.folded_df(hash)? + self.pending.df(hash))
    }

    /// Document frequency of an anchor over the folded blocks.
    pub(crate) fn folded_df(&self, hash: u64) -> Result<u64, Error> {
        if let Some(df) = self.df_cache.lock().ok().and_then(|cache| cache.get(&hash).copied()) {
            return Ok(df);
        }
        let df = self.tables.terms.get(hash)?.map_or(0, |g| g.value());
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.insert(hash, df);
        }
        Ok(df)
    }

    /// What the index holds.
    pub fn counts(&self) -> Result<Counts, Error> {
        let mut new_anchors = 0u64;
        for hash in self.pending.anchors() {
            if self.tables.terms.get(hash)?.is_none() {
                new_anchors += 1;
            }
        }
        Ok(Counts {
            sessions: self.tables.sessions.len()?,
            turns: self.tables.turns.len()? + self.unlogged.len() as u64,
            anchors: self.tables.terms.len()? + new_anchors,
            postings: self.meta.folded_postings + self.pending.postings,
            pending: self.pending.blocks.len() as u64,
        })
    }

    /// The space each table takes, largest first. Walks every page of every table: a
    /// diagnostic, not for the query path.
    pub fn table_sizes(&self) -> Result<Vec<TableSize>, Error> {
        let t = &self.tables;
        let mut sizes = vec![
            TableSize::of("turns", &t.turns)?,
            TableSize::of("postings", &t.postings)?,
            TableSize::of("norms", &t.norms)?,
            TableSize::of("terms", &t.terms)?,
            TableSize::of("pending", &t.pending)?,
            TableSize::of("text_dictionaries", &t.dictionaries)?,
            TableSize::of("sessions", &t.sessions)?,
            TableSize::of("session_names", &t.names)?,
            TableSize::of("evidence", &t.evidence)?,
            TableSize::of("evidence_refs", &t.evidence_refs)?,
            TableSize::of("evidence_postings", &t.evidence_postings)?,
            TableSize::of("evidence_terms", &t.evidence_terms)?,
        ];
        sizes.sort_by_key(|s| std::cmp::Reverse(s.total_bytes()));
        Ok(sizes)
    }

    /// Rows of the tables a whole-index job walks, as totals for its progress. redb keeps
    /// each table's length in its header, so no row is read.
    pub(crate) fn row_counts(&self) -> Result<RowCounts, Error> {
        Ok(RowCounts {
            turns: self.tables.turns.len()? + self.unlogged.len() as u64,
            chunks: self.tables.postings.len()?,
            terms: self.tables.terms.len()?,
            evidence: self.tables.evidence.len()?,
        })
    }

    /// Looks a session up by name.
    pub fn session_by_name(&self, name: &str) -> Result<Option<(u32, SessionRecord)>, Error> {
        let Some(id) = self.tables.names.get(name)?.map(|g| g.value()) else {
            return Ok(None);
        };
        let record = self
            .session_record(id)?
            .ok_or_else(|| Error::Corrupt { what: format!("session {name:?} (id {id}) has no record") })?;
        if record.name != name {
            // A damaged `session_names` row: never another session's turns under this name.
            return Err(Error::Corrupt {
                what: format!("session {name:?}: its name leads to session {id}, named {:?}", record.name),
            });
        }
        Ok(Some((id, record)))
    }

    /// The record of session `id`, if there is one.
    pub fn session_record(&self, id: u32) -> Result<Option<SessionRecord>, Error> {
        self.tables
            .sessions
            .get(id)?
            .map(|g| super::super::records::decode_session_row(id, g.value(), true))
            .transpose()
    }

    /// Every session, in id (creation) order.
    pub fn sessions(&self) -> Result<Vec<(u32, SessionRecord)>, Error> {
        let mut out = Vec::new();
        for entry in self.tables.sessions.iter()? {
            let (key, value) = entry?;
            let id = key.value();
            out.push((id, super::super::records::decode_session_row(id, value.value(), true)?));
        }
        Ok(out)
    }

    /// Up to `limit` sessions other than `except` that hold turns, the newest (highest id)
    /// first.
    pub fn recent_sessions(&self, except: u32, limit: usize) -> Result<Vec<u32>, Error> {
        let mut out = Vec::new();
        for entry in self.tables.sessions.iter()?.rev() {
            if out.len() >= limit {
                break;
            }
            let (key, value) = entry?;
            let id = key.value();
            if id == except {
                continue;
            }
            let record = super::super::records::decode_session_row(id, value.value(), true)?;
            if record.turn_count > 0 {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// True if some turn of `session`, folded or pending, holds the anchor: two seeks, and at
    /// most one row decoded (the row before the session's, keyed by an earlier session, holds
    /// this one's postings only if its segments reach it).
    pub fn session_holds(&self, hash: u64, session: u32) -> Result<bool, Error> {
        let mut held = false;
        self.session_rows(hash, session, |key, row, what| {
            if key.0 == session {
                held = true;
            } else if let Err(e) = postings::decode_row_until(hash, key, row, session, &mut |s, _| held |= s == session) {
                *what = Some(e);
            }
            !held
        })?;
        if held {
            return Ok(true);
        }
        Ok(self.pending.of_session(session).any(|(turn, forward)| forward.posting(turn, hash).is_some()))
    }

    /// A turn's text and gate record.
    pub fn turn_record(&self, session: u32, turn: u32) -> Result<Option<TurnRecord>, Error> {
        let key = block_key(session, turn);
        if let Some(row) = self.unlogged.get(&key) {
            return self.decode_turn(session, turn, row).map(Some);
        }
        self.tables.turns.get(key)?.map(|g| self.decode_turn(session, turn, g.value())).transpose()
    }

    /// Decodes a `turns` row ([`super::super::turn_text`]).
    pub(crate) fn decode_turn(&self, session: u32, turn: u32, row: &[u8]) -> Result<TurnRecord, Error> {
        let mut decoders = self.decoders.lock().unwrap_or_else(PoisonError::into_inner);
        let mut load = |id: u32| {
            self.tables.dictionaries.get(id)?.map(|g| TextDictionary::from_row(id, g.value())).transpose()
        };
        decoders.decode(block_key(session, turn), row, || format!("turn {session}:{turn}"), &mut load)
    }

    /// Whether the index should train its text dictionary now: it has none, and the last
    /// `added` turns took it past [`super::write::TRAIN_AT_TURNS`] turns, or twice, four
    /// times... as many (an index of short turns, too little text to train on, tries again as
    /// it grows).
    pub fn text_dictionary_due(&self, added: u64) -> Result<bool, Error> {
        let turns = self.tables.turns.len()?;
        let doubling = |n: u64| (n / super::write::TRAIN_AT_TURNS).checked_ilog2();
        Ok(doubling(turns) != doubling(turns.saturating_sub(added)) && self.text_dictionary()?.is_none())
    }

    /// The text dictionary new turns are compressed with (the last one stored), and its id.
    pub fn text_dictionary(&self) -> Result<Option<(u32, TextDictionary)>, Error> {
        if let Some(known) = self.text_dictionary.get() {
            return Ok(known.clone());
        }
        let found = match self.tables.dictionaries.last()? {
            Some((id, row)) => Some((id.value(), TextDictionary::from_row(id.value(), row.value())?)),
            None => None,
        };
        Ok(self.text_dictionary.get_or_init(|| found).clone())
    }

#[cfg(any(test, feature = "internals"))]
    /// Calls `emit` with the folded postings of `hash` in `session`, in turn order.
    pub fn session_postings(&self, hash: u64, session: u32, emit: impl FnMut(Posting)) -> Result<(), Error> {
        let mut list = Vec::new();
        self.folded_postings(Some(self.norms()), hash, session, &mut list)?;
        list.into_iter().for_each(emit);
        Ok(())
    }

    /// Appends the postings of `hash` in `session` to `out`, folded then pending, in turn
    /// order, with no side lengths (0): recall looks up those of the turns it scores only
    /// ([`View::session_lengths`]). On an error `out` may hold part of the list.
    pub fn session_postings_without_lengths(
        &self,
        hash: u64,
        session: u32,
        out: &mut Vec<Posting>,
    ) -> Result<(), Error> {
        let folded = out.len();
        self.folded_postings(None, hash, session, out)?;
        let pending = out.len();
        for (turn, forward) in self.pending.of_session(session) {
            out.extend(forward.posting(turn, hash).map(|p| Posting { len_user: 0, len_assistant: 0, ..p }));
        }
        if !follows(out, folded, pending) {
            return Err(corrupt(format!("pending turns of session {session}"), "a turn at or before a folded one"));
        }
        Ok(())
    }

    /// The side lengths of `session`'s first `turns` turns, folded and pending, which
    /// [`View::session_postings_without_lengths`] leaves out.
    pub fn session_lengths(&self, session: u32, turns: u32) -> SessionLengths<'_, S::Norms> {
        let pending = self.pending.of_session(session).map(|(turn, f)| (turn, f.len_user, f.len_assistant));
        SessionLengths::new(&self.tables.norms, session, turns, pending)
    }

    /// Appends the folded postings of `hash` in `session` to `out`, in turn order, their
    /// lengths filled by `norms` if given (0 if not): decoded a row at a time, not a posting at
    /// a time through a callback, as a long history's lists are read. Rows are checked one by
    /// one, and each against the one before: scoring relies on the order.
    fn folded_postings(
        &self,
        mut norms: Option<Norms<'_>>,
        hash: u64,
        session: u32,
        out: &mut Vec<Posting>,
    ) -> Result<(), Error> {
        let begin = out.len();
        let mut missing = None;
        self.session_rows(hash, session, |key, row, what| {
            let start = out.len();
            if let Err(e) = postings::decode_row_session(hash, key, row, session, out) {
                *what = Some(e);
                return false;
            }
            if !follows(out, begin, start) {
                *what = Some(postings::CorruptChunk { offset: 0 });
                return false;
            }
            match norms.as_mut().map_or(Ok(()), |n| n.fill_all(session, &mut out[start..])) {
                Ok(()) => true,
                Err(e) => {
                    missing = Some(e);
                    false
                }
            }
        })?;
        missing.map_or(Ok(()), |e| Err(e.into()))
    }

    /// A reader of the folded turns' side lengths, which decoded postings lack.
    pub fn norms(&self) -> Norms<'_> {
        Norms::new(&self.tables.norms)
    }

    /// Calls `f(key, row, error slot)` with each row that may hold postings of `hash` in
    /// `session`, in key order, until it returns false (an error it leaves in the slot is
    /// returned). A session's postings start in the last row keyed at or before its first
    /// possible posting (a row that spans sessions, or its own), and go on in the rows keyed
    /// by the session: two range seeks.
    fn session_rows(
        &self,
        hash: u64,
        session: u32,
        mut f: impl FnMut((u32, u32), &[u8], &mut Option<postings::CorruptChunk>) -> bool,
    ) -> Result<(), Error> {
        let first = keys::posting_key(hash, session, 0);
        let before = self.tables.postings.range(keys::posting_key(hash, 0, 0)..=first)?.next_back();
        let rest = self.tables.postings.range(first + 1..=keys::posting_key(hash, session, u32::MAX))?;
        let mut failed = None;
        for entry in before.into_iter().chain(rest) {
            let (key, value) = entry?;
            let (_, s, t) = keys::split_posting_key(key.value());
            let go_on = f((s, t), value.value(), &mut failed);
            if let Some(e) = failed {
                return Err(corrupt(format!("posting row {hash:x}/{s}/{t}"), e));
            }
            if !go_on {
                break;
            }
        }
        Ok(())
    }

    /// A cursor over the anchor's folded postings in every session, in block-key order (pending
    /// turns are in [`View::pending`]).
    pub fn anchor_cursor(&self, hash: u64) -> Result<PostingCursor<'_>, Error> {
        let range = keys::anchor_range(hash);
        Ok(PostingCursor::new(self.tables.postings.range(range)?, self.norms())?)
    }

#[cfg(any(test, feature = "internals"))]
    /// Calls `emit(session, posting)` for every folded posting of the anchor, in every
    /// session, in session then turn order: one range scan, since posting keys lead with the
    /// anchor (pending turns are in [`View::pending`]).
    pub fn anchor_postings(&self, hash: u64, mut emit: impl FnMut(u32, Posting)) -> Result<(), Error> {
        let range = keys::anchor_range(hash);
        let mut norms = self.norms();
        let mut row = Vec::new();
        for entry in self.tables.postings.range(range)? {
            let (key, value) = entry?;
            let (_, s, t) = keys::split_posting_key(key.value());
            row.clear();
            postings::decode_row(hash, (s, t), value.value(), |s, p| row.push((s, p)))
                .map_err(|e| corrupt(format!("posting row {hash:x}/{s}/{t}"), e))?;
            for (s, mut p) in row.drain(..) {
                norms.fill(s, &mut p)?;
                emit(s, p);
            }
        }
        Ok(())
    }
}

impl View<ReadSource> {
    /// Whether an import's runs waited to be merged when this snapshot was taken: their turns
    /// are stored, counted in N and the document frequencies, but not in the posting lists yet.
    pub fn import_running(&self) -> bool {
        self.tables.runs
    }
}

/// Whether the postings of `list` from `start` on come after those before it, back to
/// `begin` (a list that starts at `begin` has none before).
fn follows(list: &[Posting], begin: usize, start: usize) -> bool {
    start == begin || list.get(start).is_none_or(|p| p.turn > list[start - 1].turn)
}
