//! Maintenance in a write view: forgetting sessions and packing posting lists.

use super::*;

/// What removing sessions took out of the folded statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Removed {
    /// Turns deleted.
    pub turns: u64,
    /// Of them, pending (not yet folded) turns.
    pub pending: u64,
    /// Posting rows deleted or rewritten (a row can hold other sessions' postings too).
    pub chunks: u64,
    /// Postings deleted.
    pub postings: u64,
    /// Anchors whose document frequency fell to zero (their `terms` row is deleted).
    pub anchors: u64,
}

impl<S: Source> View<S> {
    /// What [`View::remove_sessions`] would take out for `ids`, counted without changing
    /// anything: the same turns, pending turns, posting chunks, postings and dropped anchors.
    pub fn measure_removal(&self, ids: &[u32]) -> Result<Removed, Error> {
        let mut removed = Removed::default();
        if ids.is_empty() {
            return Ok(removed);
        }
        let doomed: std::collections::BTreeSet<u32> = ids.iter().copied().collect();
        for &id in &doomed {
            for entry in self.tables.turns.range(block_key(id, 0)..=block_key(id, u32::MAX))? {
                let (key, _) = entry?;
                let (s, t) = split_block_key(key.value());
                removed.turns += 1;
                removed.pending += u64::from(self.pending.get(s, t).is_some());
            }
        }
        let mut df_drop: IdentityHashMap<u64, u64> = IdentityHashMap::default();
        self.for_each_doomed_row(&doomed, |hash, _, entries| {
            let n = entries.iter().filter(|(s, _)| doomed.contains(s)).count() as u64;
            *df_drop.entry(hash).or_default() += n;
            removed.postings += n;
            removed.chunks += 1;
        })?;
        for (hash, drop) in df_drop {
            let df = self.tables.terms.get(hash)?.map_or(0, |g| g.value());
            if df <= drop {
                removed.anchors += 1;
            }
        }
        Ok(removed)
    }

    /// How many evidence documents [`View::remove_session_evidence`] would drop for `sessions`.
    pub fn count_session_evidence(&self, sessions: &[u32]) -> Result<u64, Error> {
        let mut count = 0;
        self.for_each_evidence(|_, r| {
            count += u64::from(r.session.is_some_and(|s| sessions.contains(&s)));
            true
        })?;
        Ok(count)
    }

    /// Calls `f(anchor, key, postings)` with each posting row that holds a posting of a
    /// `doomed` session, decoded. A row keyed after the last doomed session holds none.
    fn for_each_doomed_row(
        &self,
        doomed: &std::collections::BTreeSet<u32>,
        mut f: impl FnMut(u64, u128, &[(u32, Posting)]),
    ) -> Result<(), Error> {
        let Some(&last) = doomed.last() else { return Ok(()) };
        let mut entries = Vec::new();
        for entry in self.tables.postings.iter()? {
            let (key, value) = entry?;
            let (hash, session, turn) = keys::split_posting_key(key.value());
            if session > last {
                continue;
            }
            entries.clear();
            postings::decode_row(hash, (session, turn), value.value(), |s, p| entries.push((s, p)))
                .map_err(|e| corrupt(format!("posting row {hash:x}/{session}/{turn}"), e))?;
            if entries.iter().any(|(s, _)| doomed.contains(s)) {
                f(hash, key.value(), &entries);
            }
        }
        Ok(())
    }
}

/// A posting row to rewrite: its key, its anchor and the postings it keeps.
type RowKept = (u128, u64, Vec<(u32, Posting)>);

impl View<WriteSource<'_>> {
    /// Deletes sessions with their turns, pending rows, postings and names, and takes them out
    /// of the document frequencies and folded statistics. `folded_lengths` gives the exact side
    /// lengths of each folded turn (derived from its text: postings hold only their norms).
    ///
    /// Posting keys lead with the anchor, so the postings table is scanned once for all the
    /// sessions.
    pub fn remove_sessions(
        &mut self,
        ids: &[u32],
        mut folded_lengths: impl FnMut(&TurnRecord) -> (u32, u32),
    ) -> Result<Removed, Error> {
        let mut removed = Removed::default();
        if ids.is_empty() {
            return Ok(removed);
        }
        // The runs may hold postings of these sessions: merged first, they go with the rest.
        self.merge_runs()?;
        let doomed: std::collections::BTreeSet<u32> = ids.iter().copied().collect();
        let mut folded = FoldedTotals::default();
        for &id in &doomed {
            let record = self.session_record(id)?;
            let range = block_key(id, 0)..=block_key(id, u32::MAX);
            let mut keys_to_remove = Vec::new();
            for entry in self.tables.turns.range(range.clone())? {
                let (key, value) = entry?;
                let key = key.value();
                keys_to_remove.push(key);
                let (s, t) = split_block_key(key);
                if self.pending.get(s, t).is_some() {
                    removed.pending += 1;
                    continue;
                }
                let turn = self.decode_turn(s, t, value.value())?;
                let (len_user, len_assistant) = folded_lengths(&turn);
                folded.blocks += 1;
                folded.len_user += u64::from(len_user);
                folded.len_assistant += u64::from(len_assistant);
            }
            for key in &keys_to_remove {
                self.tables.turns.remove(*key)?;
            }
            removed.turns += keys_to_remove.len() as u64;
            self.tables.pending.retain_in(range.clone(), |_, _| false)?;
            self.tables.norms.retain_in(range, |_, _| false)?;
            self.tables.sessions.remove(id)?;
            if let Some(record) = record {
                self.tables.names.remove(record.name.as_str())?;
            }
        }
        // Pending turns of the doomed sessions leave the in-memory log too.
        let kept = self.pending_mut();
        let pending = std::mem::take(kept);
        for (key, forward) in pending.blocks {
            if !doomed.contains(&split_block_key(key).0) {
                kept.add(key, forward);
            }
        }
        // Folded postings: one pass over the postings table finds the rows that hold them;
        // each is deleted, and what it holds of other sessions stored again as a row.
        let mut df_drop: IdentityHashMap<u64, u64> = IdentityHashMap::default();
        let mut rewritten: Vec<RowKept> = Vec::new();
        self.for_each_doomed_row(&doomed, |hash, key, entries| {
            let kept: Vec<(u32, Posting)> = entries.iter().filter(|(s, _)| !doomed.contains(s)).copied().collect();
            let n = (entries.len() - kept.len()) as u64;
            *df_drop.entry(hash).or_default() += n;
            removed.postings += n;
            removed.chunks += 1;
            rewritten.push((key, hash, kept));
        })?;
        for (key, _, _) in &rewritten {
            self.tables.postings.remove(*key)?;
        }
        for (_, hash, kept) in &rewritten {
            store_rows(&mut self.tables.postings, *hash, kept)?;
        }
        let mut hashes: Vec<(u64, u64)> = df_drop.into_iter().collect();
        hashes.sort_unstable();
        for (hash, drop) in hashes {
            let df = self.tables.terms.get(hash)?.map_or(0, |g| g.value());
            let left = df.checked_sub(drop).ok_or_else(|| Error::Corrupt {
                what: format!("anchor {hash:x} has df {df}, below its {drop} postings being removed"),
            })?;
            if left == 0 {
                self.tables.terms.remove(hash)?;
                removed.anchors += 1;
            } else {
                self.tables.terms.insert(hash, left)?;
            }
        }
        if let Ok(mut cache) = self.df_cache.lock() {
            cache.clear();
        }
        let sub = |have: u64, less: u64, what: &str| {
            have.checked_sub(less).ok_or_else(|| Error::Corrupt {
                what: format!("meta {what} {have} is below {less} being removed"),
            })
        };
        self.meta.folded_blocks = sub(self.meta.folded_blocks, folded.blocks, "folded blocks")?;
        self.meta.folded_len_user = sub(self.meta.folded_len_user, folded.len_user, "user length sum")?;
        self.meta.folded_len_assistant =
            sub(self.meta.folded_len_assistant, folded.len_assistant, "assistant length sum")?;
        self.meta.folded_postings = sub(self.meta.folded_postings, removed.postings, "postings")?;
        self.meta_dirty = true;
        Ok(removed)
    }

#[cfg(any(test, feature = "internals"))]
    /// Rewrites the postings of each anchor whose rows are not packed (a row before its last
    /// with fewer than [`postings::ROW_CAPACITY`] (128) postings: a list continued by an import
    /// in pieces, or rows split by `forget`) as full rows. Returns `(anchors rewritten, rows
    /// before, rows after)`.
    pub fn pack_postings(&mut self) -> Result<(u64, u64, u64), Error> {
        self.pack_postings_with_progress(&mut |_, _| {})
    }

    /// [`View::pack_postings`], calling `progress(anchors rewritten, anchors to rewrite)` once
    /// the anchors to rewrite are found and after each one is rewritten (the caller throttles).
    pub fn pack_postings_with_progress(
        &mut self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<(u64, u64, u64), Error> {
        // Find the anchors to rewrite in one read pass.
        let mut loose: Vec<u64> = Vec::new();
        let mut current: Option<u64> = None;
        let mut previous_full = true;
        for entry in self.tables.postings.iter()? {
            let (key, value) = entry?;
            let (hash, session, turn) = keys::split_posting_key(key.value());
            if current != Some(hash) {
                current = Some(hash);
                previous_full = true;
            }
            let n = postings::row_len(hash, (session, turn), value.value())
                .map_err(|e| corrupt(format!("posting row {hash:x}/{session}/{turn}"), e))?;
            if !previous_full && loose.last() != Some(&hash) {
                loose.push(hash);
            }
            previous_full = n >= postings::ROW_CAPACITY as u64;
        }
        let (mut before, mut after) = (0u64, 0u64);
        let total = loose.len() as u64;
        progress(0, total);
        let mut entries = Vec::new();
        for (done, &hash) in (1u64..).zip(&loose) {
            entries.clear();
            let range = keys::anchor_range(hash);
            for entry in self.tables.postings.range(range.clone())? {
                let (key, value) = entry?;
                let (_, session, turn) = keys::split_posting_key(key.value());
                postings::decode_row(hash, (session, turn), value.value(), |s, p| entries.push((s, p)))
                    .map_err(|e| corrupt(format!("posting row {hash:x}/{session}/{turn}"), e))?;
                before += 1;
            }
            self.tables.postings.retain_in(range, |_, _| false)?;
            after += store_rows(&mut self.tables.postings, hash, &entries)?;
            progress(done, total);
        }
        Ok((total, before, after))
    }
}
