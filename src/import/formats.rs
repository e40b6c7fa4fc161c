//! Which parser reads which format. One parser per log format, each in its own module; and
//! the check that a format given for a file is the file's.

use super::error::Error;
use super::turns::ParsedFile;
use super::{Format, chatgpt, claude, claude_code, codex, jsonl, openai, sharegpt};
use std::path::Path;

/// Parses `text` (the whole file) as `format`.
pub fn parse(format: Format, path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    match format {
        Format::Jsonl => jsonl::parse(path, text, skip_invalid),
        Format::OpenAi => openai::parse(path, text, skip_invalid),
        Format::ChatGpt => chatgpt::parse(path, text, skip_invalid),
        Format::Claude => claude::parse(path, text, skip_invalid),
        Format::ClaudeCode => claude_code::parse(path, text, skip_invalid),
        Format::Codex => codex::parse(path, text, skip_invalid),
        Format::ShareGpt => sharegpt::parse(path, text, skip_invalid),
        Format::Auto => Err(Error::UnknownFormat { path: path.to_path_buf() }),
    }
}

/// The error for a file read as `given` that failed with `what` (a parser's message) or held
/// no turns: [`Error::WrongFormat`] naming the format the file looks like, if detection finds
/// another one. `None` if it finds `given` or nothing: the parser's own result stands.
pub fn wrong_format(path: &Path, given: Format, what: impl FnOnce() -> String) -> Option<Error> {
    match super::detect_file(path) {
        Ok(detected) if detected != given => {
            Some(Error::WrongFormat { path: path.to_path_buf(), given, detected, what: what() })
        }
        _ => None,
    }
}
