//! Errors from reading conversation logs: each names the file and, where there is one, the line.

use std::path::PathBuf;

/// Where in a file a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// A 1-based line number.
    Line(u64),
    /// The whole file.
    File,
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Line(line) => write!(f, ":{line}"),
            Location::File => Ok(()),
        }
    }
}

/// An error reading a log file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read {}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record is not valid JSON.
    #[error("{}{at}: invalid JSON: {cause}", .path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// Where.
        at: Location,
        /// The parser's message, printed in the message (not also chained as a source).
        cause: serde_json::Error,
    },
    /// A record is valid JSON but not what the format requires.
    #[error("{}{at}: {what}", .path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// Where.
        at: Location,
        /// What is wrong, and what was expected.
        what: String,
    },
    /// The format of a file could not be recognised.
    #[error("{}: cannot tell the log format; pass --format (jsonl, openai, chatgpt, claude, claude-code, codex, sharegpt)", .path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
    },
    /// A file read as the format given does not hold that format, and looks like another.
    #[error("{}: not in format {} ({what}): it looks like {}: pass --format {}, or leave --format out to detect it", .path.display(), .given.name(), .detected.name(), .detected.name())]
    WrongFormat {
        /// The file.
        path: PathBuf,
        /// The format given.
        given: super::Format,
        /// The format the file's first record has.
        detected: super::Format,
        /// What reading it as `given` gave: the parser's error, or no turns.
        what: String,
    },
}

impl Error {
    /// A shape error at a line.
    pub(crate) fn shape(path: &std::path::Path, line: u64, what: impl Into<String>) -> Self {
        Error::Shape { path: path.to_path_buf(), at: Location::Line(line), what: what.into() }
    }

    /// A JSON error at a line.
    pub(crate) fn json(path: &std::path::Path, line: u64, source: serde_json::Error) -> Self {
        Error::Json { path: path.to_path_buf(), at: Location::Line(line), cause: source }
    }

    /// The line this error points at, if any.
    pub fn line(&self) -> Option<u64> {
        match self {
            Error::Json { at: Location::Line(l), .. } | Error::Shape { at: Location::Line(l), .. } => {
                Some(*l)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The full chain (`{:#}`, as the CLI prints errors) names each cause once.
    #[test]
    fn each_cause_is_printed_once() {
        let cause = serde_json::from_str::<serde_json::Value>("{\"a\" 1}").unwrap_err();
        let detail = cause.to_string();
        let err = anyhow::Error::from(Error::json(std::path::Path::new("log.jsonl"), 48, cause));
        let chain = format!("{err:#}");
        assert_eq!(chain.matches(&detail).count(), 1, "{chain}");
        assert!(chain.starts_with("log.jsonl:48: invalid JSON: "), "{chain}");
        let io = Error::Io { path: "log.jsonl".into(), source: std::io::Error::other("disk on fire") };
        let chain = format!("{:#}", anyhow::Error::from(io));
        assert_eq!(chain.matches("disk on fire").count(), 1, "{chain}");
    }
}
