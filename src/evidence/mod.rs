//! Evidence projection (DESIGN §4): full tool output stays on disk, the context gets a
//! projection of exact facts, what was omitted, what is unknown, and a reference to read more.
//!
//! This module is pure but for [`EvidenceRoot`], the one way to the files under the evidence
//! root: references and their checks ([`EvidenceRef`]), projection specs ([`Spec`]),
//! projections ([`project`]) and the text a document is indexed by. Storing and
//! finding evidence is [`crate::Gatekeeper`]'s (`put_evidence`, `index_evidence`, ...).

mod anchors;
pub mod pointer;
mod projection;
mod reference;
mod root;
mod spec;

pub use anchors::{MAX_INDEXED_BYTES, indexed_text};
pub use projection::{
    Blocked, DEFAULT_FACT_BYTES, DEFAULT_HEAD_LINES, Document, MAX_HEAD_BYTES, Omitted, Projection,
    SMALL_VALUE_BYTES, Unknown, choose_kind, project, whole_if_no_longer,
};
pub use reference::{EvidenceRef, MAX_REF_BYTES, RefError};
pub use root::{EvidenceRoot, ReadDocument, RootError, TEMP_PREFIX, WalkSkip, WalkedFile, Written};
pub use spec::{BlockRule, DEFAULT_SCHEMA_VERSION, KindSpec, OmitRule, Spec, SpecError, UnknownRule};
