//! Writes in a write view: sessions, turns and the fold of their postings into the lists (or
//! into a run of an import).

use super::*;
use crate::store::turn_text::{self, EncodedText};

/// Turns an index grown one turn at a time holds when it trains its text dictionary (see
/// [`View::fold_if_due`]): ~0.3–1 MiB of text in real logs, what training wants.
pub const TRAIN_AT_TURNS: u64 = 1024;

impl View<WriteSource<'_>> {
    /// Creates a session with no turns.
    pub fn create_session(&mut self, name: &str) -> Result<(u32, SessionRecord), Error> {
        let id = self.meta.next_session_id;
        self.meta.next_session_id =
            id.checked_add(1).ok_or_else(|| Error::Corrupt { what: "session ids exhausted".into() })?;
        self.meta_dirty = true;
        let record = SessionRecord::new(name);
        self.tables.names.insert(name, id)?;
        self.put_session(id, &record)?;
        Ok((id, record))
    }

    /// Stores a session record.
    pub fn put_session(&mut self, id: u32, record: &SessionRecord) -> Result<(), Error> {
        let bytes = super::super::records::session_row(id, record)?;
        self.tables.sessions.insert(id, bytes.as_slice())?;
        Ok(())
    }

    /// Stores a text dictionary (if the file has no dictionary with its bytes) and returns its
    /// id. The last one stored is the one new turns are compressed with.
    pub fn add_text_dictionary(&mut self, dictionary: &TextDictionary) -> Result<u32, Error> {
        if let Some(id) = self.find_text_dictionary(dictionary.hash())? {
            return Ok(id);
        }
        let id = match self.tables.dictionaries.last()? {
            Some((id, _)) => id.value().checked_add(1).ok_or_else(|| corrupt("text dictionaries", "ids exhausted"))?,
            None => 0,
        };
        self.tables.dictionaries.insert(id, dictionary.row().as_slice())?;
        self.dictionary_ids.insert(dictionary.hash(), id);
        self.text_dictionary = std::sync::OnceLock::from(Some((id, dictionary.clone())));
        Ok(id)
    }

    /// The id of the stored dictionary whose bytes hash to `hash`.
    fn text_dictionary_id(&mut self, hash: u64) -> Result<u32, Error> {
        self.find_text_dictionary(hash)?
            .ok_or_else(|| Error::bug("a turn was compressed with a text dictionary the index does not hold"))
    }

    fn find_text_dictionary(&mut self, hash: u64) -> Result<Option<u32>, Error> {
        if let Some(&id) = self.dictionary_ids.get(&hash) {
            return Ok(Some(id));
        }
        // A handful of rows: one per import that trained one into an index without.
        for entry in self.tables.dictionaries.iter()? {
            let (id, row) = entry?;
            if TextDictionary::hash_of_row(row.value()) == Some(hash) {
                self.dictionary_ids.insert(hash, id.value());
                return Ok(Some(id.value()));
            }
        }
        Ok(None)
    }

    /// Stores the import checkpoint of a log file (`import_checkpoints`; the caller encodes it).
    pub fn put_import_checkpoint(&mut self, key: &[u8], value: &[u8]) -> Result<(), Error> {
        self.tables.checkpoints.insert(key, value)?;
        Ok(())
    }

    /// Drops every import checkpoint: after turns or evidence are removed or replaced, a log
    /// read from a checkpoint would not look at them again, and a forgotten session's file
    /// names stay out of the index. They are a cache: the next import of each file reads it whole.
    pub fn clear_import_checkpoints(&mut self) -> Result<(), Error> {
        self.tables.checkpoints.retain(|_, _| false)?;
        Ok(())
    }

    /// Stores a new turn; its anchors wait for the fold where `row` says. `text` is the turn's
    /// text already compressed (a bulk import compresses in parallel); without it, the text
    /// is compressed here, with the index's text dictionary.
    pub fn put_turn(
        &mut self,
        session: u32,
        turn: u32,
        record: &TurnRecord,
        text: Option<EncodedText>,
        forward: ForwardRecord,
        row: PendingRow,
    ) -> Result<(), Error> {
        let key = block_key(session, turn);
        let text = match text {
            Some(text) => text,
            None => {
                let dictionary = self.text_dictionary()?.map(|(_, d)| d);
                let body = turn_text::body(&record.user, &record.assistant, &record.time, &record.tools);
                turn_text::compress(body, dictionary.as_ref())
            }
        };
        let dictionary_id = match text.dictionary() {
            Some(hash) => Some(self.text_dictionary_id(hash)?),
            None => None,
        };
        let encoded = turn_text::row(key, record, &text, dictionary_id)?;
        drop(text);
        match row {
            PendingRow::Logged => {
                let anchors = postcard::to_allocvec(&forward)
                    .map_err(|e| corrupt(format!("turn {session}:{turn}"), e))?;
                let replaced = self.tables.pending.insert(key, anchors.as_slice())?.is_some();
                self.tables.turns.insert(key, encoded.as_slice())?;
                let fingerprint = (self.pending_fingerprint.filter(|_| !replaced))
                    .map(|f| f.wrapping_add(pending::row_fingerprint(key, &anchors)));
                self.pending_mut().add(key, forward);
                self.pending_fingerprint = fingerprint;
            }
            PendingRow::FoldInTransaction => {
                // A turn stored before makes the fold's insert fail; one put twice fails here.
                if self.unlogged.insert(key, encoded).is_some() {
                    return Err(corrupt(format!("turn {session}:{turn}"), "put twice"));
                }
                self.pending_mut().add_uncounted(key, forward);
            }
        }
        Ok(())
    }

    /// Folds pending turns into postings once [`FOLD_BATCH`] of them are waiting, unless an
    /// import's runs wait: their merge would make this turn's transaction take as long as a
    /// batch of the import, and pending turns are read as they are. The import merges them
    /// with its runs, or the first write after it folds them.
    pub fn fold_if_due(&mut self) -> Result<(), Error> {
        if self.pending.blocks.len() < FOLD_BATCH || self.runs_wait()? {
            return Ok(());
        }
        let folding = self.pending.blocks.len() as u64;
        self.fold()?;
        // A cache of sorts: a failure to train leaves the turns compressed without one.
        if let Err(e) = self.train_text_dictionary_if_due(folding) {
            log::warn!("no text dictionary trained: {e}");
        }
        Ok(())
    }

    /// Trains the index's text dictionary on its latest turns when it is due
    /// ([`View::text_dictionary_due`]): an index grown one turn at a time (hooks, `add`) or by
    /// many small files gets one as a bulk import's first batch does. The turns stored before
    /// it stay compressed without one.
    pub fn train_text_dictionary_if_due(&mut self, added: u64) -> Result<(), Error> {
        if !self.text_dictionary_due(added)? {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let mut bodies = Vec::new();
        let mut bytes = 0;
        // From the last row back: the newest sessions' turns (turns are keyed by session first).
        for entry in self.tables.turns.iter()?.rev() {
            let (key, value) = entry?;
            let (session, turn) = split_block_key(key.value());
            // A row that does not decode is `verify`'s to report; training goes on without it.
            let Ok(t) = self.decode_turn(session, turn, value.value()) else { continue };
            let body = turn_text::body(&t.user, &t.assistant, &t.time, &t.tools);
            bytes += body.len();
            bodies.push(body);
            if bytes >= turn_text::TRAIN_READ_BYTES {
                break;
            }
        }
        if let Some(dictionary) = TextDictionary::train_on(&bodies) {
            let id = self.add_text_dictionary(&dictionary)?;
            log::debug!(
                "trained text dictionary {id} ({} bytes) on {} turns in {:.0} ms",
                dictionary.bytes().len(),
                bodies.len(),
                started.elapsed().as_secs_f64() * 1e3
            );
        }
        Ok(())
    }

    /// Whether an import's runs wait to be merged ([`View::merge_runs`]).
    pub fn runs_wait(&self) -> Result<bool, Error> {
        Ok(!self.tables.runs.is_empty()?)
    }

    /// Appends the postings of the runs imports recorded to the lists and forgets the runs:
    /// the import that writes them, every few batches and at its end, and any write that
    /// appends to the lists while runs wait, first (a list's postings must stay in turn
    /// order, and a run may hold earlier turns of the same list).
    ///
    /// The runs of an import still running may be merged by another process: its next run
    /// then starts the run file again. Both happen only inside write transactions, one at a
    /// time.
    pub fn merge_runs(&mut self) -> Result<Merged, Error> {
        let mut spans = Vec::new();
        for entry in self.tables.runs.iter()? {
            let (run, span) = entry?;
            spans.push((run.value(), RunSpan::from_row(span.value())));
        }
        if spans.is_empty() {
            return Ok(Merged::default());
        }
        let file = run_file::path_of(&self.path);
        let merged = runs::merge_into(&mut self.tables.postings, None, spans, &file)?;
        self.tables.runs.retain(|_, _| false)?;
        log::debug!("merged {} runs into {} posting lists ({} chunks)", merged.runs, merged.lists, merged.chunks);
        Ok(merged)
    }

    /// Folds every pending turn into the posting chunks and document frequencies.
    pub fn fold(&mut self) -> Result<(), Error> {
        if self.pending.blocks.is_empty() {
            return Ok(());
        }
        // Pending turns are in block-key order: each session's blocks are consecutive.
        let blocks: Vec<NewBlock> = (self.pending.blocks.iter())
            .map(|(key, f)| NewBlock { key: *key, len_user: f.len_user, len_assistant: f.len_assistant })
            .collect();
        let entries: Vec<&[(u64, u32, u32)]> =
            self.pending.blocks.iter().map(|(_, f)| &f.entries[..]).collect();
        let grouped = Grouped::by_anchor(&entries);
        self.fold_grouped(&grouped, &blocks, FoldTarget::Postings)
    }

    /// Where the run of this transaction's bulk batch goes (see [`NextRun::write`]); once per
    /// transaction.
    pub fn next_run(&mut self) -> Result<NextRun, Error> {
        if self.run_taken.is_some() {
            return Err(Error::bug("posting runs: a second run taken in one transaction"));
        }
        let (run, offset) = run_file::next_run(&self.tables.runs)?;
        self.run_taken = Some(run);
        Ok(NextRun { run, path: run_file::path_of(&self.path), offset })
    }

    /// Folds pending turns, given their postings already grouped (a bulk writer groups a batch
    /// on the rayon pool while the previous one is written), into `target`: every pending turn
    /// into the lists, the batch's own into a run (turns added one at a time stay pending).
    /// `blocks` must be exactly those turns, each session's consecutive and in turn order, and
    /// `grouped` exactly their anchors: both are checked, since a mismatch would write wrong
    /// postings.
    ///
    /// Into the lists, each list's tail chunk is read and rewritten once, anchor by anchor in
    /// key order. Into a run ([`FoldTarget::Run`], written from the same `grouped` and `blocks`
    /// by [`NextRun::write`]), the run is recorded instead: its postings stay out of reach of
    /// readers until [`super::Store::merge_runs`].
    pub fn fold_grouped(
        &mut self,
        grouped: &Grouped,
        blocks: &[NewBlock],
        target: FoldTarget,
    ) -> Result<(), Error> {
        let pending = match target {
            FoldTarget::Postings => std::mem::take(self.pending_mut()),
            // Turns added one at a time while runs wait stay pending (`fold_if_due`): folded
            // into the lists before the batch's run, they would need the runs merged first.
            FoldTarget::Run(_) => {
                let mut keys: Vec<u64> = blocks.iter().map(|b| b.key).collect();
                keys.sort_unstable();
                self.pending_mut().split_off(&keys).ok_or_else(|| Error::bug("fold input: not pending turns"))?
            }
        };
        check_fold_input(&pending, grouped, blocks)?;
        let unlogged = std::mem::take(&mut self.unlogged);
        sorted::insert_new(&mut self.tables.turns, unlogged.iter().map(|(key, row)| (*key, row.as_slice())))?;
        drop(unlogged);
        if pending.blocks.is_empty() {
            return Ok(());
        }
        // Per-turn data, which readers of the lists need as soon as the postings are there.
        norms::put(&mut self.tables.norms, blocks)?;
        let lists = match target {
            FoldTarget::Postings => {
                // Else its lists would go before postings of earlier turns that wait in a run.
                self.merge_runs()?;
                self.fold_into_lists(grouped, blocks)?
            }
            FoldTarget::Run(run) => {
                if self.run_taken.take() != Some(run.run) {
                    return Err(Error::bug("posting runs: a run not taken in this transaction"));
                }
                if (run.anchors, run.postings) != (grouped.anchors(), grouped.len()) {
                    return Err(Error::bug("posting runs: a run written from other postings"));
                }
                self.tables.runs.insert(run.run, run.span.to_row())?;
                run.lists
            }
        };
        // Document frequency: one update per anchor. One this view has not read yet is read
        // by the insert that stores it: a new anchor (most of a growing vocabulary) costs one
        // descent of `terms` instead of a lookup and an insert.
        let read = std::mem::take(self.df_cache.get_mut().unwrap_or_else(PoisonError::into_inner));
        let mut new_df = IdentityHashMap::default();
        new_df.reserve(grouped.anchors());
        for (hash, group) in grouped.groups() {
            let added = group.len() as u64;
            let folded = match read.get(&hash) {
                Some(&folded) => Some(folded),
                None => self.tables.terms.insert(hash, added)?.map(|stored| stored.value()),
            };
            let df = match folded {
                Some(folded) => {
                    self.tables.terms.insert(hash, folded + added)?;
                    folded + added
                }
                None => added,
            };
            new_df.insert(hash, df);
        }
        // Only the folded anchors' frequencies changed; keeping just them bounds the cache
        // by one fold while the next batch of an import, which shares most of its anchors
        // with this one, finds them.
        *self.df_cache.get_mut().unwrap_or_else(PoisonError::into_inner) = new_df;
        if self.pending.is_empty() {
            // The batch of a run has no rows there; the turns folded into the lists had them.
            self.tables.pending.retain(|_, _| false)?;
            self.pending = Arc::default();
            self.pending_fingerprint = Some(0);
        }
        self.meta.folded_blocks += pending.blocks.len() as u64;
        self.meta.folded_len_user += pending.len_user;
        self.meta.folded_len_assistant += pending.len_assistant;
        self.meta.folded_postings += pending.postings;
        self.meta_dirty = true;
        let into = match target {
            FoldTarget::Postings => "the lists".to_string(),
            FoldTarget::Run(run) => format!("run {}", run.run),
        };
        log::debug!("folded {} turns into {lists} posting lists ({into})", pending.blocks.len());
        Ok(())
    }

    /// Appends the postings of `grouped` to their lists, anchor by anchor; returns the number
    /// of lists (anchor and session) appended to.
    pub(super) fn fold_into_lists(&mut self, grouped: &Grouped, blocks: &[NewBlock]) -> Result<usize, Error> {
        let table = &mut self.tables.postings;
        let mut list = Vec::new();
        let mut lists = 0;
        for (hash, group) in grouped.groups() {
            let mut writer = AnchorWriter::new(hash);
            lists += for_each_list(group, blocks, &mut list, |session, list| {
                writer.append(table, session, list.iter().copied())
            })?;
            writer.finish(table)?;
        }
        Ok(lists)
    }

    /// Finishes a write view before its commit: folds the turns stored without a `pending` row
    /// ([`PendingRow::FoldInTransaction`]), then stores `meta` if it changed.
    pub(in crate::store) fn save_meta(&mut self) -> Result<(), Error> {
        if !self.unlogged.is_empty() {
            self.fold()?;
        }
        if !self.meta_dirty {
            return Ok(());
        }
        let bytes = postcard::to_allocvec(&self.meta).map_err(|e| corrupt("meta", e))?;
        self.tables.meta.insert(META_KEY, bytes.as_slice())?;
        Ok(())
    }
}

/// Where a new turn's anchors wait until they are folded ([`View::put_turn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PendingRow {
    /// A `pending` row, folded by a later transaction (at the latest once [`FOLD_BATCH`] wait).
    Logged,
    /// Memory only: this transaction folds them into the postings before it commits (at the
    /// latest when `Store::write` finishes the view). For bulk writers, which fold at the end of
    /// every batch anyway: the row would be written and deleted in the same transaction. The
    /// `turns` row waits for the fold too, which stores a batch's rows in key order
    /// (`super::sorted`). Readers see exactly what a logged row and a fold give.
    FoldInTransaction,
}

/// Where a fold writes the postings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldTarget {
    /// The posting lists readers see.
    Postings,
    /// A run of an import, written to the run file.
    Run(WrittenRun),
}


/// Checks what [`View::fold_grouped`] is given against the pending turns: the same blocks,
/// each session's consecutive and in turn order, and the same postings per anchor.
pub(super) fn check_fold_input(
    pending: &PendingBlocks,
    grouped: &Grouped,
    blocks: &[NewBlock],
) -> Result<(), Error> {
    let wrong = |what: &str| Err(Error::bug(format!("fold input: {what}")));
    if blocks.len() != pending.blocks.len() || grouped.len() as u64 != pending.postings {
        return wrong("not the pending turns");
    }
    let mut keys: Vec<u64> = blocks.iter().map(|b| b.key).collect();
    keys.sort_unstable();
    if !keys.iter().eq(pending.blocks.iter().map(|(k, _)| k)) {
        return wrong("not the pending turns");
    }
    let mut finished: Vec<u32> = Vec::new();
    for pair in blocks.windows(2) {
        let ((s0, t0), (s1, t1)) = (split_block_key(pair[0].key), split_block_key(pair[1].key));
        if s0 == s1 && t1 <= t0 {
            return wrong("a session's turns out of order");
        }
        if s0 != s1 {
            finished.push(s0);
        }
    }
    finished.sort_unstable();
    if finished.windows(2).any(|w| w[0] == w[1])
        || blocks.last().is_some_and(|b| finished.binary_search(&split_block_key(b.key).0).is_ok())
    {
        return wrong("a session's turns not consecutive");
    }
    // Each block's postings against its turn's anchors, by a sum of their hashes: a posting
    // given to the wrong block, or of an anchor the turn does not have, changes two sums.
    let mut sums = vec![0u64; blocks.len()];
    for (hash, group) in grouped.groups() {
        for posting in group {
            let Some(sum) = sums.get_mut(posting.block as usize) else {
                return wrong("a posting of no block");
            };
            *sum = sum.wrapping_add(hash);
        }
    }
    for (block, sum) in blocks.iter().zip(&sums) {
        let forward =
            pending.blocks.binary_search_by_key(&block.key, |(k, _)| *k).map(|i| &pending.blocks[i].1);
        let expected = forward.map_or(0, |f| f.entries.iter().fold(0u64, |s, e| s.wrapping_add(e.0)));
        if *sum != expected {
            return wrong("postings not the pending anchors");
        }
    }
    Ok(())
}
