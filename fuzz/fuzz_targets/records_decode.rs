//! The index's postcard records (`store::records`, `store::evidence`): any bytes decode or
//! fail without a panic, and a decoded record encodes to bytes that decode to the same record.
#![no_main]

use ctxgate::fuzzing::{self, Record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&kind, bytes)) = data.split_first() else { return };
    let record = Record::ALL[usize::from(kind) % Record::ALL.len()];
    if let Some(encoded) = fuzzing::decode_record(record, bytes) {
        assert_eq!(fuzzing::decode_record(record, &encoded).as_ref(), Some(&encoded), "{record:?}");
    }
});
