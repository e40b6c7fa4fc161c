//! Evidence documents in the index: their records, anchors and totals.
//!
//! The full document is a file under the evidence root; the index holds what finding and
//! citing it needs: the ref, a digest of the bytes (to skip unchanged files), the projection
//! (so a query never reads evidence files), and the anchors with term frequencies.

use super::error::{Error, corrupt};
use super::view::{Source, View, WriteSource};
use redb::{ReadableTable};
use serde::{Deserialize, Serialize};

pub(super) const EVIDENCE_META_KEY: &str = "evidence";

/// Totals over the evidence documents, and where their files are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EvidenceMeta {
    /// The evidence root, absolute, once set.
    pub root: Option<String>,
    /// Next evidence id to hand out.
    pub next_id: u32,
    /// Documents indexed.
    pub documents: u64,
    /// Sum of document lengths in anchors (BM25 average length).
    pub total_len: u64,
}

/// One evidence document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRecord {
    /// Its ref, relative to the evidence root.
    pub reference: String,
    /// The kind it was projected as.
    pub kind: String,
    /// xxh3 of the file's bytes.
    pub digest: u64,
    /// Size of the file.
    pub bytes: u64,
    /// The session it belongs to (tool output of an imported turn), or none: visible to all.
    pub session: Option<u32>,
    /// Token estimate of the whole document.
    pub full_tokens: u32,
    /// Token estimate of the projection.
    pub projection_tokens: u32,
    /// The projection, as compact JSON.
    pub projection: String,
    /// Anchor hashes with term frequencies, sorted by hash.
    pub anchors: Vec<(u64, u32)>,
}

impl EvidenceRecord {
    /// Length in anchors (sum of term frequencies).
    pub fn len(&self) -> u64 {
        self.anchors.iter().map(|&(_, tf)| u64::from(tf)).sum()
    }
}

impl<S: Source> View<S> {
    /// Evidence totals and root.
    pub fn evidence_meta(&self) -> Result<EvidenceMeta, Error> {
        match self.tables.meta.get(EVIDENCE_META_KEY)? {
            Some(bytes) => postcard::from_bytes(bytes.value()).map_err(|e| corrupt("evidence meta", e)),
            None => Ok(EvidenceMeta::default()),
        }
    }

    /// The document stored under `reference`.
    pub fn evidence_by_ref(&self, reference: &str) -> Result<Option<(u32, EvidenceRecord)>, Error> {
        let Some(id) = self.tables.evidence_refs.get(reference)?.map(|g| g.value()) else {
            return Ok(None);
        };
        let record = self.evidence_record(id)?.ok_or_else(|| Error::Corrupt {
            what: format!("evidence ref {reference:?} names missing id {id}"),
        })?;
        Ok(Some((id, record)))
    }

    /// The document with id `id`.
    pub fn evidence_record(&self, id: u32) -> Result<Option<EvidenceRecord>, Error> {
        match self.tables.evidence.get(id)? {
            Some(bytes) => Ok(Some(
                postcard::from_bytes(bytes.value()).map_err(|e| corrupt(format!("evidence {id}"), e))?,
            )),
            None => Ok(None),
        }
    }

    /// Number of evidence documents holding the anchor.
    pub fn evidence_df(&self, hash: u64) -> Result<u32, Error> {
        Ok(self.tables.evidence_terms.get(hash)?.map_or(0, |g| g.value()))
    }

    /// Calls `f(evidence id, tf, document length)` for each document holding the anchor, by id.
    pub fn evidence_postings(&self, hash: u64, mut f: impl FnMut(u32, u32, u32)) -> Result<(), Error> {
        for entry in self.tables.evidence_postings.range((hash, 0)..=(hash, u32::MAX))? {
            let (key, value) = entry?;
            let (tf, len) = value.value();
            f(key.value().1, tf, len);
        }
        Ok(())
    }

    /// Calls `f(id, record)` for every document, by id; stops when `f` returns false.
    pub fn for_each_evidence(&self, mut f: impl FnMut(u32, EvidenceRecord) -> bool) -> Result<(), Error> {
        for entry in self.tables.evidence.iter()? {
            let (id, bytes) = entry?;
            let id = id.value();
            let record =
                postcard::from_bytes(bytes.value()).map_err(|e| corrupt(format!("evidence {id}"), e))?;
            if !f(id, record) {
                break;
            }
        }
        Ok(())
    }

    /// Calls `f(hash, evidence id, tf, document length)` for every evidence posting, in key order.
    pub fn for_each_evidence_posting(&self, mut f: impl FnMut(u64, u32, u32, u32)) -> Result<(), Error> {
        for entry in self.tables.evidence_postings.iter()? {
            let (key, value) = entry?;
            let (hash, id) = key.value();
            let (tf, len) = value.value();
            f(hash, id, tf, len);
        }
        Ok(())
    }

    /// Calls `f(hash, df)` for every evidence anchor.
    pub fn for_each_evidence_term(&self, mut f: impl FnMut(u64, u32)) -> Result<(), Error> {
        for entry in self.tables.evidence_terms.iter()? {
            let (hash, df) = entry?;
            f(hash.value(), df.value());
        }
        Ok(())
    }
}

impl View<WriteSource<'_>> {
    fn put_evidence_meta(&mut self, meta: &EvidenceMeta) -> Result<(), Error> {
        let bytes = postcard::to_allocvec(meta).map_err(|e| corrupt("evidence meta", e))?;
        self.tables.meta.insert(EVIDENCE_META_KEY, bytes.as_slice())?;
        Ok(())
    }

    /// Records the evidence root.
    pub fn set_evidence_root(&mut self, root: &str) -> Result<(), Error> {
        let meta = EvidenceMeta { root: Some(root.to_string()), ..self.evidence_meta()? };
        self.put_evidence_meta(&meta)
    }

    /// Stores a document, replacing the one with the same ref. Returns its id.
    pub fn put_evidence(&mut self, record: &EvidenceRecord) -> Result<u32, Error> {
        let mut meta = self.evidence_meta()?;
        let existing = self.tables.evidence_refs.get(record.reference.as_str())?.map(|g| g.value());
        let id = match existing {
            Some(id) => {
                self.unindex_evidence(id, &mut meta)?;
                id
            }
            None => {
                let id = meta.next_id;
                meta.next_id = id
                    .checked_add(1)
                    .ok_or_else(|| Error::Corrupt { what: "evidence ids exhausted".into() })?;
                self.tables.evidence_refs.insert(record.reference.as_str(), id)?;
                id
            }
        };
        let len = u32::try_from(record.len()).unwrap_or(u32::MAX);
        for &(hash, tf) in &record.anchors {
            self.tables.evidence_postings.insert((hash, id), (tf, len))?;
            let df = self.tables.evidence_terms.get(hash)?.map_or(0, |g| g.value());
            self.tables.evidence_terms.insert(hash, df + 1)?;
        }
        let bytes = postcard::to_allocvec(record).map_err(|e| corrupt(format!("evidence {id}"), e))?;
        self.tables.evidence.insert(id, bytes.as_slice())?;
        meta.documents += 1;
        meta.total_len += record.len();
        self.put_evidence_meta(&meta)?;
        Ok(id)
    }

    /// Removes the document stored under `reference`. Returns true if there was one.
    pub fn remove_evidence(&mut self, reference: &str) -> Result<bool, Error> {
        let Some(id) = self.tables.evidence_refs.remove(reference)?.map(|g| g.value()) else {
            return Ok(false);
        };
        let mut meta = self.evidence_meta()?;
        self.unindex_evidence(id, &mut meta)?;
        self.tables.evidence.remove(id)?;
        self.put_evidence_meta(&meta)?;
        Ok(true)
    }

    /// Removes the documents that belong to any of `sessions` (their tool output). Returns
    /// how many.
    pub fn remove_session_evidence(&mut self, sessions: &[u32]) -> Result<u64, Error> {
        let mut doomed = Vec::new();
        self.for_each_evidence(|_, r| {
            if r.session.is_some_and(|s| sessions.contains(&s)) {
                doomed.push(r.reference);
            }
            true
        })?;
        for reference in &doomed {
            self.remove_evidence(reference)?;
        }
        Ok(doomed.len() as u64)
    }

    /// Drops a stored document's postings and its share of the totals.
    fn unindex_evidence(&mut self, id: u32, meta: &mut EvidenceMeta) -> Result<(), Error> {
        let Some(old) = self.evidence_record(id)? else { return Ok(()) };
        for &(hash, _) in &old.anchors {
            self.tables.evidence_postings.remove((hash, id))?;
            let df = self.tables.evidence_terms.get(hash)?.map_or(0, |g| g.value());
            if df <= 1 {
                self.tables.evidence_terms.remove(hash)?;
            } else {
                self.tables.evidence_terms.insert(hash, df - 1)?;
            }
        }
        meta.documents = meta.documents.saturating_sub(1);
        meta.total_len = meta.total_len.saturating_sub(old.len());
        Ok(())
    }
}
