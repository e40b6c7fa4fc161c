//! Evidence projection (DESIGN §4) of any stored bytes: `Document::parse`, then `project`
//! with no spec and with the fixture spec (by ref and by each kind), and the indexed text.
#![no_main]

use ctxgate::evidence::{self, Document, EvidenceRef, Spec};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// Refs the fixture spec's kinds match, and one it does not.
const REFS: [&str; 4] =
    ["round_1/baseline.json", "round_2/execute_result.json", "table_ctx.json", "notes/x.log"];

fn spec() -> &'static Spec {
    static SPEC: OnceLock<Spec> = OnceLock::new();
    SPEC.get_or_init(|| {
        Spec::parse(include_bytes!("../../fixtures/evidence/spec.json")).expect("the fixture spec parses")
    })
}

fuzz_target!(|data: &[u8]| {
    let doc = Document::parse(data);
    let spec = spec();
    for reference in REFS {
        let reference = EvidenceRef::parse(reference).expect("a fixed ref");
        check(evidence::project(&reference, &doc, None, None));
        check(evidence::project(&reference, &doc, Some(spec), None));
    }
    let reference = EvidenceRef::parse("doc").expect("a fixed ref");
    for kind in spec.kind_names() {
        check(evidence::project(&reference, &doc, Some(spec), Some(kind)));
    }
    assert!(evidence::indexed_text(&doc).len() <= evidence::MAX_INDEXED_BYTES);
});

fn check(projection: Result<evidence::Projection, String>) {
    let projection = projection.expect("a kind of the spec projects");
    serde_json::to_string(&projection).expect("a projection serializes");
}
