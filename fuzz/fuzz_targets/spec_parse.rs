//! Projection spec files (`evidence::Spec`): any bytes parse or are refused without a panic,
//! and a spec that parses projects the fixture documents, by ref and by each of its kinds.
#![no_main]

use ctxgate::evidence::{self, Document, EvidenceRef, Spec};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn docs() -> &'static [(EvidenceRef, Document)] {
    static DOCS: OnceLock<Vec<(EvidenceRef, Document)>> = OnceLock::new();
    DOCS.get_or_init(|| {
        let fixtures: [(&str, &[u8]); 4] = [
            ("table_ctx.json", include_bytes!("../../fixtures/evidence/tree/table_ctx.json")),
            ("table_ctx/shop.orders/indexes.json", include_bytes!("../../fixtures/evidence/tree/table_ctx/shop.orders/indexes.json")),
            ("table_ctx/shop.orders/ddl.sql", include_bytes!("../../fixtures/evidence/tree/table_ctx/shop.orders/ddl.sql")),
            ("round_3/baseline.json", br#"{"baseline_mode":"x","execution_time":1.5,"error":null,"result":{"rows":[[1,"a"],[2,"b"]]},"explain":[{"id":1}]}"#),
        ];
        fixtures
            .into_iter()
            .map(|(r, bytes)| (EvidenceRef::parse(r).expect("a fixed ref"), Document::parse(bytes)))
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = Spec::parse(data) else { return };
    for (reference, doc) in docs() {
        let projection = evidence::project(reference, doc, Some(&spec), None).expect("projects by ref");
        serde_json::to_string(&projection).expect("a projection serializes");
        for kind in spec.kind_names() {
            let projection =
                evidence::project(reference, doc, Some(&spec), Some(kind)).expect("a kind of the spec");
            assert_eq!(projection.kind, kind);
        }
    }
});
