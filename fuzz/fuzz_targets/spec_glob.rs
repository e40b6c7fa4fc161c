//! Glob matching of spec `match` patterns, through the spec (`Spec::kind_for_ref`), whatever
//! matcher it uses: input `glob NUL ref`. Matching must be fast on any pattern (a run with
//! `-timeout` catches exponential backtracking).
#![no_main]

use ctxgate::evidence::Spec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((glob, reference)) = ctxgate_fuzz::split_two(data) else { return };
    let spec = serde_json::json!({
        "schema_version": "fuzz/v1",
        "kinds": [{"kind": "k", "match": [glob]}, {"kind": "all", "match": ["**"]}],
    });
    let Ok(spec) = Spec::parse(spec.to_string().as_bytes()) else { return };
    let kind = spec.kind_for_ref(reference);
    if glob == reference && !glob.contains(['*', '?', '[', '{', '\\']) {
        // A pattern without metacharacters matches itself.
        assert_eq!(kind.map(|k| k.kind.as_str()), Some("k"), "{glob:?}");
    }
});
