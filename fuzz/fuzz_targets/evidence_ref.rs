//! Evidence refs: a ref that parses is a plain relative path that cannot leave the evidence
//! root lexically, and reads back from its path as itself.
#![no_main]

use ctxgate::evidence::EvidenceRef;
use libfuzzer_sys::fuzz_target;
use std::path::{Component, Path};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(reference) = EvidenceRef::parse(text) else { return };
    assert_eq!(reference.as_str(), text);
    let path = Path::new(reference.as_str());
    for component in path.components() {
        assert!(matches!(component, Component::Normal(_)), "{text:?} has the component {component:?}");
    }
    let root = Path::new("/evidence-root");
    assert!(root.join(path).starts_with(root));
    let again = EvidenceRef::from_relative_path(path).expect("a ref's path is a ref");
    // A path drops empty `.` components and trailing slashes, which the ref refuses anyway.
    assert_eq!(again.as_str(), text);
    let _ = reference.extension();
});
