//! Which parser reads which format. One parser per log format, each in its own module.

use super::error::Error;
use super::turns::ParsedFile;
use super::{Format, jsonl};
use std::path::Path;

/// Parses `text` (the whole file) as `format`.
pub fn parse(format: Format, path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    match format {
        Format::Jsonl => jsonl::parse(path, text, skip_invalid),
        Format::Auto => Err(Error::UnknownFormat { path: path.to_path_buf() }),
        _ => Err(Error::Shape {
            path: path.to_path_buf(),
            at: super::error::Location::File,
            what: format!("the {} format is not supported yet", format.name()),
        }),
    }
}
