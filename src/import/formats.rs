//! Which parser reads which format. One parser per log format, each in its own module.

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
