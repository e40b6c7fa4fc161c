//! The read path: what one query gets from the index (DESIGN §3.2–§3.6).
//!
//! In the order a query meets them:
//! - [`anchors`]: the query's anchors, weighted by IDF ([`idf`]);
//! - [`gate_view`]: the topic gate run against the session's recent turns;
//! - [`session_lists`], [`spread`], [`bearing`]: the posting lists a query reads, how an
//!   anchor spreads over sessions, and whether a turn's matches bear on the query beyond chance;
//! - [`recall`]: BM25-style candidates from the on-disk postings, and [`evidence_recall`] for
//!   evidence documents;
//! - [`select`]: the minimum-coverage choice under the budget, and [`prune`] to sentences;
//! - [`pipeline`]: the stages above in one consistent view of the store;
//! - [`prompt`]: the rendered context; [`search`]: recall across every session;
//!   [`history`]: a session's stored turns read back (`show`, `export`).
//!
//! Nothing here writes: the query path never imports `write` or `jobs`.

pub mod anchors;
pub mod bearing;
pub mod evidence_recall;
pub mod gate_view;
pub mod history;
pub mod idf;
pub mod pipeline;
pub mod prompt;
pub mod prune;
pub mod recall;
pub mod search;
pub mod select;
pub mod session_lists;
pub mod spread;
