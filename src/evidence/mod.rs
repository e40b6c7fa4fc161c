//! Evidence projection (DESIGN §4): full tool output stays on disk, the context gets a
//! projection of exact facts, what was omitted, what is unknown, and a reference to read more.
//!
//! The pure part: references and their checks ([`EvidenceRef`]), projection specs ([`Spec`]),
//! projections ([`project`]), JSON pointers ([`pointer`](mod@pointer)) and the text a document is indexed
//! by. Apart from it: [`EvidenceRoot`], the one way to the files under the evidence root;
//! `index`, the gatekeeper's evidence (`put_evidence`, `index_evidence`, `read_evidence`, ...,
//! over the tables of `store::evidence`). The evidence a query selects is `query::evidence_recall`.

mod anchors;
pub(crate) mod error;
pub mod pointer;
mod projection;
pub(crate) mod reference;
pub(crate) mod root;
pub(crate) mod spec;
pub(crate) mod storage;

pub use anchors::{MAX_INDEXED_BYTES, indexed_text};
pub use error::EvidenceError;
pub(crate) use projection::whole_if_no_longer;
pub use projection::{
    Blocked, DEFAULT_FACT_BYTES, DEFAULT_HEAD_LINES, Document, MAX_HEAD_BYTES, Omitted, Projection, Unknown,
    project,
};
pub use reference::{EvidenceRef, MAX_REF_BYTES, RefError};
pub use root::{EvidenceRoot, ReadDocument, RootError, WalkSkip, WalkedFile, Written};
pub use spec::{BlockRule, DEFAULT_SCHEMA_VERSION, KindSpec, OmitRule, Spec, SpecError, UnknownRule};
pub use storage::{EvidenceIndexReport, EvidenceInfo, EvidenceOptions, SkippedFile};
