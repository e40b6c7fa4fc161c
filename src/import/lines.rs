//! The canonical JSONL format read a block of lines at a time, in memory bounded by the
//! block: lines are found on the reading thread and checked or parsed on the rayon pool.
//! A streaming import reads a file twice through these (see `write::stream`).

use super::error::Error;
use super::jsonl;
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;

/// How many lines of each session of a file came before, to check each line's `turn`.
/// Sessions are numbered in the order they first appear; the previous line's is looked at
/// before the map, since a log's lines come in runs of one session (a hash lookup per line was
/// a tenth of the reading thread's time in pass 1).
#[derive(Default)]
pub(crate) struct Positions {
    numbers: HashMap<String, usize>,
    /// Each session's name and lines counted, by number.
    sessions: Vec<(String, u64)>,
    last: usize,
}

impl Positions {
    /// Checks a line's `turn` (if it has one) against its position in its session in this
    /// file, counts the line and returns the session's number.
    pub(crate) fn count(
        &mut self,
        path: &Path,
        line_no: u64,
        session: &str,
        turn: Option<u64>,
    ) -> Result<usize, Error> {
        let number = match self.sessions.get(self.last) {
            Some((name, _)) if name == session => self.last,
            _ => match self.numbers.get(session) {
                Some(&number) => number,
                None => {
                    self.numbers.insert(session.to_string(), self.sessions.len());
                    self.sessions.push((session.to_string(), 0));
                    self.sessions.len() - 1
                }
            },
        };
        self.last = number;
        let position = &mut self.sessions[number].1;
        if let Some(turn) = turn
            && turn != *position
        {
            return Err(Error::shape(
                path,
                line_no,
                format!("`turn` is {turn} but this is turn {position} of session {session:?} in this file"),
            ));
        }
        *position += 1;
        Ok(number)
    }

    /// Sessions numbered so far.
    pub(crate) fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

/// Bytes read per block: a few thousand lines, parsed on the rayon pool. Tests read a few
/// dozen bytes at a time, so that lines cross blocks.
const BLOCK_BYTES: usize = if cfg!(test) { 40 } else { 4 << 20 };

/// Longest line read ([`crate::limits::MAX_LINE_BYTES`]); tests use a short one.
const MAX_LINE: usize = if cfg!(test) { 200 } else { crate::limits::MAX_LINE_BYTES };

/// Whole lines of a file as read: the bytes and, for each line, its 1-based number and where
/// it is in them (without its `\n`, and without the byte order mark of line 1).
pub(crate) struct Block {
    /// Where `bytes` start in the file.
    start: u64,
    bytes: Vec<u8>,
    lines: Vec<(u64, std::ops::Range<usize>)>,
    /// A line longer than [`MAX_LINE`], skipped unread: its number and length.
    too_long: Option<(u64, u64)>,
}

impl Block {
    /// The text of a line, `None` if it is blank. Called on the rayon pool: checking that a
    /// line is UTF-8 costs as much as finding it.
    fn text(&self, path: &Path, line_no: u64, range: &std::ops::Range<usize>) -> Result<Option<&str>, Error> {
        let bytes = self.bytes.get(range.clone()).unwrap_or_default();
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let at = e.valid_up_to();
            let offset = self.start + (range.start + at) as u64;
            Error::shape(path, line_no, super::not_utf8_reason(bytes.get(at).copied(), offset))
        })?;
        let text = text.trim_end_matches(['\n', '\r']);
        Ok((!text.trim().is_empty()).then_some(text))
    }

    /// Applies `f` to each non-blank line's number and text on the rayon pool; results in
    /// line order (a line that is not UTF-8 is an error there).
    pub(crate) fn map_lines<'b, T: Send>(
        &'b self,
        path: &Path,
        f: impl Fn(u64, &'b str) -> Result<T, Error> + Sync,
    ) -> Vec<(u64, Result<T, Error>)> {
        let too_long = self.too_long.map(|(line_no, length)| {
            let why = format!(
                "the line is {length} bytes long, over the limit of {MAX_LINE} bytes a line \
                 (a turn may hold {} bytes of text): split the turn, or leave its largest text out of the log",
                crate::limits::MAX_TURN_BYTES
            );
            (line_no, Err(Error::shape(path, line_no, why)))
        });
        let lines: Vec<(u64, Result<T, Error>)> = self
            .lines
            .par_iter()
            .filter_map(|(line_no, range)| match self.text(path, *line_no, range) {
                Ok(None) => None,
                Ok(Some(text)) => Some((*line_no, f(*line_no, text))),
                Err(e) => Some((*line_no, Err(e))),
            })
            .collect();
        too_long.into_iter().chain(lines).collect()
    }
}

/// The lines of a file a block at a time. Only finding the lines is left to the reading
/// thread: each line used to be copied into a `String` of its own and checked there.
pub(crate) struct LineBlocks {
    path: std::path::PathBuf,
    file: std::fs::File,
    line_no: u64,
    /// The start of a line the last block ended in the middle of.
    carry: Vec<u8>,
    /// Where `carry` starts in the file.
    carry_start: u64,
    done: bool,
}

impl LineBlocks {
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let file =
            std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Ok(LineBlocks {
            path: path.to_path_buf(),
            file,
            line_no: 0,
            carry: Vec::new(),
            carry_start: 0,
            done: false,
        })
    }

    /// The next block of whole lines, and the read error it ended on, if it did (to be reported
    /// after its lines; the line it cut is dropped). `None` at the end of the file.
    pub(crate) fn next_block(&mut self) -> Option<(Block, Option<Error>)> {
        use std::io::Read;
        let mut bytes = std::mem::take(&mut self.carry);
        let mut failed = None;
        // Up to the last newline once a block's worth is read (or the end of the file).
        let mut searched = 0;
        let mut complete = None;
        while !self.done {
            if bytes.len() >= BLOCK_BYTES {
                complete = memchr::memrchr(b'\n', &bytes[searched..]).map(|i| searched + i + 1);
                searched = bytes.len();
                if complete.is_some() {
                    break;
                }
            }
            if bytes.len() > MAX_LINE && complete.is_none() && memchr::memchr(b'\n', &bytes).is_none() {
                return Some(self.skip_long_line(bytes));
            }
            // Read into spare capacity: no block-sized zero fill before each read.
            bytes.reserve(BLOCK_BYTES);
            match (&mut self.file).take(BLOCK_BYTES as u64).read_to_end(&mut bytes) {
                Ok(0) => self.done = true,
                Ok(_) => {}
                Err(source) => {
                    self.done = true;
                    // The line it cut has no end to be found: it goes with the error.
                    let cut = memchr::memrchr(b'\n', &bytes).map_or(0, |i| i + 1);
                    bytes.truncate(cut);
                    failed = Some(Error::Io { path: self.path.clone(), source });
                }
            }
        }
        let end = complete.unwrap_or(bytes.len());
        let start = self.carry_start;
        self.carry = bytes.get(end..).unwrap_or_default().to_vec();
        self.carry_start = start + end as u64;
        bytes.truncate(end);
        let mut lines = Vec::with_capacity(bytes.len() / 512 + 1);
        let mut line_start = 0;
        let ends =
            memchr::memchr_iter(b'\n', &bytes).chain((bytes.last() != Some(&b'\n')).then_some(bytes.len()));
        for line_end in ends {
            if line_end == line_start && line_end == bytes.len() {
                break; // no last line after the last newline
            }
            self.line_no += 1;
            let mut range = line_start..line_end;
            if self.line_no == 1 && bytes[range.clone()].starts_with(b"\xef\xbb\xbf") {
                range.start += 3;
            }
            lines.push((self.line_no, range));
            line_start = line_end + 1;
        }
        (!lines.is_empty() || failed.is_some())
            .then_some((Block { start, bytes, lines, too_long: None }, failed))
    }

    /// Reads past the rest of a line longer than [`MAX_LINE`] (`read`: its start) without
    /// keeping it, and returns a block that holds only the line's error.
    fn skip_long_line(&mut self, read: Vec<u8>) -> (Block, Option<Error>) {
        use std::io::Read;
        self.line_no += 1;
        let start = self.carry_start;
        let mut length = read.len() as u64;
        let mut chunk = read;
        let mut failed = None;
        loop {
            chunk.clear();
            match (&mut self.file).take(BLOCK_BYTES as u64).read_to_end(&mut chunk) {
                Ok(0) => {
                    self.done = true;
                    break;
                }
                Ok(_) => match memchr::memchr(b'\n', &chunk) {
                    Some(end) => {
                        length += end as u64;
                        self.carry = chunk[end + 1..].to_vec();
                        break;
                    }
                    None => length += chunk.len() as u64,
                },
                Err(source) => {
                    self.done = true;
                    failed = Some(Error::Io { path: self.path.clone(), source });
                    break;
                }
            }
        }
        // The line and its newline are behind; `carry` starts after them.
        self.carry_start = start + length + 1;
        let block =
            Block { start, bytes: Vec::new(), lines: Vec::new(), too_long: Some((self.line_no, length)) };
        (block, failed)
    }
}

/// The lines of a file, each parsed, in order.
pub(crate) struct ParsedLines {
    blocks: LineBlocks,
    /// Parsed lines of the current block, then a read error if the block ended on one.
    ready: std::vec::IntoIter<ParsedItem>,
}

/// A parsed line with its number (or why it is not a line), or a read error that ends the file.
pub(crate) type ParsedItem = Result<(u64, Result<jsonl::Line, Error>), Error>;

impl ParsedLines {
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        Ok(ParsedLines { blocks: LineBlocks::open(path)?, ready: Vec::new().into_iter() })
    }
}

impl Iterator for ParsedLines {
    type Item = ParsedItem;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(item) = self.ready.next() {
                return Some(item);
            }
            let (block, failed) = self.blocks.next_block()?;
            let path = self.blocks.path.as_path();
            let mut parsed: Vec<ParsedItem> = block
                .map_lines(path, |line_no, text| jsonl::parse_line(path, line_no, text))
                .into_iter()
                .map(Ok)
                .collect();
            parsed.extend(failed.map(Err));
            self.ready = parsed.into_iter();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every non-blank line's number and text, or its error, read through blocks.
    fn read_all(path: &Path) -> Vec<(u64, Result<String, String>)> {
        let mut blocks = LineBlocks::open(path).unwrap_or_else(|e| panic!("{e}"));
        let mut out = Vec::new();
        while let Some((block, failed)) = blocks.next_block() {
            assert!(failed.is_none());
            let lines = block.map_lines(path, |_, text| Ok(text.to_string()));
            out.extend(lines.into_iter().map(|(no, text)| (no, text.map_err(|e| e.to_string()))));
        }
        out
    }

    #[test]
    fn positions_follow_each_session_through_interleaved_lines() {
        let path = Path::new("log.jsonl");
        let mut positions = Positions::default();
        let lines =
            [("a", Some(0)), ("a", None), ("b", Some(0)), ("a", Some(2)), ("c", None), ("b", Some(1))];
        let numbers: Vec<usize> = (1..)
            .zip(lines)
            .map(|(no, (session, turn))| positions.count(path, no, session, turn).unwrap_or(usize::MAX))
            .collect();
        assert_eq!(numbers, [0, 0, 1, 0, 2, 1]);
        assert_eq!(positions.sessions(), 3);
        // `a` has had three lines: turn 3 is next, whatever the previous line's session.
        let err = positions.count(path, 7, "a", Some(2)).unwrap_err().to_string();
        assert!(err.contains("log.jsonl:7") && err.contains("this is turn 3"), "{err}");
        assert_eq!(positions.count(path, 8, "a", Some(3)).ok(), Some(0), "a refused line is not counted");
    }

    #[test]
    fn lines_are_found_across_blocks() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("lines.jsonl");
        let long = "长".repeat(50); // 150 bytes: longer than a test block, cut mid-character
        let mut bytes = b"\xef\xbb\xbffirst\r\n\n   \nsecond line\n".to_vec();
        bytes.extend_from_slice(format!("{long}\n").as_bytes());
        bytes.extend_from_slice(b"\xff\xfe bad\n");
        bytes.extend_from_slice(b"third\r\n\nlast without newline");
        std::fs::write(&path, &bytes)?;
        let bad_at = bytes.windows(2).position(|w| w == b"\xff\xfe").ok_or("no bad bytes")? as u64;
        let bad = Error::shape(&path, 6, crate::import::not_utf8_reason(Some(0xff), bad_at)).to_string();
        let expected: Vec<(u64, Result<String, String>)> = vec![
            (1, Ok("first".into())),
            (4, Ok("second line".into())),
            (5, Ok(long)),
            (6, Err(bad)),
            (7, Ok("third".into())),
            (9, Ok("last without newline".into())),
        ];
        assert_eq!(read_all(&path), expected);
        // A file that ends with its newline has no empty last line; an empty file, no line.
        std::fs::write(&path, b"a\nb\n")?;
        assert_eq!(read_all(&path), vec![(1, Ok("a".into())), (2, Ok("b".into()))]);
        std::fs::write(&path, b"")?;
        assert!(read_all(&path).is_empty());
        Ok(())
    }

    #[test]
    fn a_line_past_the_limit_is_an_error_and_the_lines_after_it_are_read()
    -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("long.jsonl");
        let long = "x".repeat(MAX_LINE * 3 + 7);
        let at_limit = "y".repeat(MAX_LINE);
        std::fs::write(&path, format!("first\n{long}\nafter\n{at_limit}\n{long}"))?;
        let read = read_all(&path);
        let numbers: Vec<u64> = read.iter().map(|(no, _)| *no).collect();
        assert_eq!(numbers, [1, 2, 3, 4, 5]);
        assert_eq!(read[0].1, Ok("first".into()));
        let err = read[1].1.clone().unwrap_err();
        assert!(err.contains(":2:") && err.contains(&format!("{} bytes long", long.len())), "{err}");
        assert_eq!(read[2].1, Ok("after".into()));
        assert_eq!(read[3].1, Ok(at_limit));
        assert!(read[4].1.is_err(), "a last line past the limit, without its newline");
        Ok(())
    }
}
