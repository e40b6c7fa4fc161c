//! The file's identity and versions, checked on every open.

use super::error::Error;
use super::records::MetaRecord;
use crate::anchor::ANCHOR_RULES_VERSION;
use std::path::Path;

/// Marks a redb file as a ctxgate index.
pub const MAGIC: &str = "ctxgate-index";

/// Version of the key and record layout. Bump on any change to `keys`, `records`,
/// `turn_text` or `postings`, and keep a fixture of the old version (`tests/fixtures/`).
///
/// 2: turn text compressed (`turn_text`), table `text_dictionaries`.
/// 3: a `postings` row holds up to 128 postings of one anchor over consecutive sessions, keyed
/// by its first posting (`lists`, `postings::encode_row`); format 2 had a row per session.
/// `rebuild` reads formats 1 and 2: the turns, which are the same in 2 and 3.
/// 4: a `turns` row ends with a checksum seeded with its key (`turn_text`); `rebuild` reads
/// formats 1–3 and writes 4.
/// 5: a `postings` row ends with a checksum seeded with its key (`postings::encode_row`);
/// `rebuild` reads formats 1–4 (the turns are the same in 4 and 5) and writes 5.
pub const FORMAT_VERSION: u32 = 5;

/// The oldest format `rebuild` reads (`SourceIndex`).
pub const OLDEST_REBUILT_FORMAT: u32 = 1;

/// The metadata of a new, empty index.
pub fn new_meta() -> MetaRecord {
    MetaRecord {
        magic: MAGIC.to_string(),
        format_version: FORMAT_VERSION,
        anchor_rules_version: ANCHOR_RULES_VERSION,
        writer_version: env!("CARGO_PKG_VERSION").to_string(),
        next_session_id: 0,
        folded_blocks: 0,
        folded_len_user: 0,
        folded_len_assistant: 0,
        folded_postings: 0,
    }
}

/// Decodes stored metadata and checks that this build can use the file.
pub fn check_meta(path: &Path, bytes: &[u8]) -> Result<MetaRecord, Error> {
    let meta: MetaRecord =
        postcard::from_bytes(bytes).map_err(|_| Error::NotAnIndex { path: path.to_path_buf() })?;
    if meta.magic != MAGIC {
        return Err(Error::NotAnIndex { path: path.to_path_buf() });
    }
    if meta.format_version > FORMAT_VERSION {
        return Err(Error::TooNew {
            path: path.to_path_buf(),
            found: meta.format_version,
            supported: FORMAT_VERSION,
        });
    }
    if meta.format_version < FORMAT_VERSION || meta.anchor_rules_version != ANCHOR_RULES_VERSION {
        return Err(Error::NeedsRebuild {
            path: path.to_path_buf(),
            found_format: meta.format_version,
            found_rules: meta.anchor_rules_version,
            format: FORMAT_VERSION,
            rules: ANCHOR_RULES_VERSION,
        });
    }
    Ok(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(meta: &MetaRecord) -> Vec<u8> {
        postcard::to_allocvec(meta).unwrap()
    }

    #[test]
    fn version_checks() {
        let path = Path::new("x.redb");
        assert!(check_meta(path, &encoded(&new_meta())).is_ok());

        let newer = MetaRecord { format_version: FORMAT_VERSION + 1, ..new_meta() };
        assert!(matches!(check_meta(path, &encoded(&newer)), Err(Error::TooNew { .. })));

        let other_rules = MetaRecord { anchor_rules_version: ANCHOR_RULES_VERSION + 1, ..new_meta() };
        let err = check_meta(path, &encoded(&other_rules)).unwrap_err();
        assert!(matches!(err, Error::NeedsRebuild { .. }), "{err:?}");
        assert!(err.to_string().contains("ctxgate rebuild"), "{err}");

        let foreign = MetaRecord { magic: "other".into(), ..new_meta() };
        assert!(matches!(check_meta(path, &encoded(&foreign)), Err(Error::NotAnIndex { .. })));
        assert!(matches!(check_meta(path, b"\xff\xff"), Err(Error::NotAnIndex { .. })));
    }
}
