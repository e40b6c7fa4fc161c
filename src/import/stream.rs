//! Streaming import of the canonical JSONL format, in memory bounded by one batch.
//!
//! Pass 1 reads every line to check it (so a malformed line fails the file before anything is
//! written), counts each session's turns, and checks the file's first turns of each session
//! against what the index holds (by digest). Pass 2 reads the file again and hands the new
//! turns to the writer a batch at a time. Per-session counters are the only state kept across
//! lines. The file must not change between the two passes.

use super::error::Error;
use super::turns::Skipped;
use super::writer::{BATCH_TURNS, Batch, Writer};
use super::{FileReport, Format, SessionReport, jsonl};
use crate::gatekeeper::Gatekeeper;
use crate::store::records::next_digest;
use crate::store::{ReadSource, View};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;

/// What pass 1 learns about one session of the file.
struct SessionScan {
    name: String,
    /// Turns of this session in the file.
    turns: usize,
    /// Turns the index already has (after earlier files of this import).
    stored: usize,
    /// Where earlier files of this import left the session.
    offset: usize,
    /// Digest of the file's first `stored` turns (when `offset` is 0).
    digest: u64,
    record_digest: u64,
    id: Option<u32>,
}

impl SessionScan {
    /// The plan of a session the file names, before its first line is counted.
    fn new(
        gatekeeper: &Gatekeeper,
        view: &View<ReadSource>,
        offsets: &HashMap<String, usize>,
        name: &str,
    ) -> Result<Self, crate::Error> {
        gatekeeper.session(name)?; // validates the name
        let offset = offsets.get(name).copied().unwrap_or(0);
        let (id, count, record_digest) = match view.session_by_name(name)? {
            Some((id, r)) => (Some(id), r.turn_count as usize, r.digest),
            None => (None, 0, 0),
        };
        Ok(SessionScan {
            name: name.to_string(),
            turns: 0,
            stored: count.saturating_sub(offset),
            offset,
            digest: 0,
            record_digest,
            id,
        })
    }
}

/// Imports one canonical JSONL file.
pub fn import(
    gatekeeper: &Gatekeeper,
    path: &Path,
    forced_session: Option<&str>,
    skip_invalid: bool,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport, crate::Error> {
    // Pass 1: check every line and plan each session.
    let started = std::time::Instant::now();
    let view = gatekeeper.store().read()?;
    let mut scans: Vec<SessionScan> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut positions = Positions::default();
    // The scan of each session `positions` numbers: several when `--session` joins them.
    let mut scan_of: Vec<Option<usize>> = Vec::new();
    let mut skipped = Vec::new();
    let mut blocks = LineBlocks::open(path)?;
    while let Some((block, failed)) = blocks.next_block() {
        // Strings borrowed from the block: checking needs no copy of each turn's text.
        let parsed = block.map_lines(path, |line_no, text| jsonl::check_line(path, line_no, text));
        for (line_no, parsed) in parsed {
            let (line, slot) = match parsed
                .and_then(|line| positions.count(path, line_no, &line.session, line.turn).map(|s| (line, s)))
            {
                Ok(counted) => counted,
                Err(e) if skip_invalid => {
                    skipped.push(Skipped { line: line_no, reason: jsonl::reason(&e) });
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            scan_of.resize(positions.sessions(), None);
            let i = match scan_of[slot] {
                Some(i) => i,
                None => {
                    let name = forced_session.unwrap_or(&line.session);
                    let i = match by_name.get(name) {
                        Some(&i) => i,
                        None => {
                            let scan = SessionScan::new(gatekeeper, &view, offsets, name)?;
                            by_name.insert(scan.name.clone(), scans.len());
                            scans.push(scan);
                            scans.len() - 1
                        }
                    };
                    scan_of[slot] = Some(i);
                    i
                }
            };
            let scan = &mut scans[i];
            if scan.turns < scan.stored {
                if scan.offset == 0 {
                    scan.digest = next_digest(scan.digest, &line.user, &line.assistant);
                } else if let Some(id) = scan.id {
                    let stored = view.turn_record(id, (scan.offset + scan.turns) as u32)?;
                    if stored.is_none_or(|s| s.user != line.user || s.assistant != line.assistant) {
                        return Err(conflict(path, scan, scan.turns).into());
                    }
                }
            }
            scan.turns += 1;
        }
        if let Some(e) = failed {
            return Err(e);
        }
    }
    for scan in &scans {
        let digest_matches = scan.turns >= scan.stored && scan.digest == scan.record_digest;
        if scan.offset == 0
            && scan.stored > 0
            && !digest_matches
            && let Some(conflict) = find_conflict(gatekeeper, path, forced_session, scan)?
        {
            return Err(conflict.into());
        }
    }
    drop(view);
    log::debug!(
        "checked {} lines of {} sessions in {:.0} ms",
        scans.iter().map(|s| s.turns).sum::<usize>() + skipped.len(),
        scans.len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    // Pass 2: the new turns, a batch at a time.
    let existing: Vec<usize> = scans.iter().map(|s| s.turns.min(s.stored)).collect();
    let destinations: Vec<(String, Option<String>)> = scans.iter().map(|s| (s.name.clone(), None)).collect();
    let lines = ParsedLines::open(path)?;
    let mut seen = vec![0usize; scans.len()];
    // The same lines in the same order: each session gets the number it had in pass 1.
    let mut positions = Positions::default();
    let skip = existing.clone();
    let mut lines = lines.filter_map(move |item| {
        let (line_no, parsed) = match item {
            Ok(item) => item,
            Err(e) => return Some(Err(e)),
        };
        // Pass 1 checked every line: the ones it skipped are skipped again.
        let line = parsed.ok()?;
        let slot = positions.count(path, line_no, &line.session, line.turn).ok()?;
        let i = scan_of.get(slot).copied().flatten()?;
        seen[i] += 1;
        (seen[i] > skip[i]).then(|| Ok((i, jsonl::into_turn(line))))
    });
    let batches = std::iter::from_fn(move || {
        let mut batch: Batch = Vec::new();
        for item in lines.by_ref() {
            match item {
                Ok(turn) => batch.push(turn),
                Err(e) => return Some(Err(e)),
            }
            if batch.len() == BATCH_TURNS {
                break;
            }
        }
        (!batch.is_empty()).then_some(Ok(batch))
    });
    Writer::new(gatekeeper, path.display().to_string(), destinations).write_all(batches)?;

    let mut sessions = Vec::new();
    let (mut new_turns, mut existing_turns) = (0, 0);
    for (scan, existing) in scans.iter().zip(existing) {
        let new = (scan.turns - existing) as u64;
        sessions.push(SessionReport {
            session: scan.name.clone(),
            new_turns: new,
            existing_turns: existing as u64,
            held_back: 0,
        });
        new_turns += new;
        existing_turns += existing as u64;
        *offsets.entry(scan.name.clone()).or_default() += scan.turns;
    }
    Ok(FileReport {
        path: path.to_path_buf(),
        format: Format::Jsonl,
        sessions,
        new_turns,
        existing_turns,
        skipped,
        tool_outputs: 0, // canonical lines carry no tool results
        tool_outputs_failed: 0,
        failed_tool_outputs: Vec::new(),
    })
}

/// Checks a parsed line's `turn` against its position in its session in this file.
/// How many lines of each session of a file came before, to check each line's `turn`.
/// Sessions are numbered in the order they first appear; the previous line's is looked at
/// before the map, since a log's lines come in runs of one session (a hash lookup per line was
/// a tenth of the reading thread's time in pass 1).
#[derive(Default)]
struct Positions {
    numbers: HashMap<String, usize>,
    /// Each session's name and lines counted, by number.
    sessions: Vec<(String, u64)>,
    last: usize,
}

impl Positions {
    /// Checks a line's `turn` (if it has one) against its position in its session in this
    /// file, counts the line and returns the session's number.
    fn count(&mut self, path: &Path, line_no: u64, session: &str, turn: Option<u64>) -> Result<usize, Error> {
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
    fn sessions(&self) -> usize {
        self.sessions.len()
    }
}

fn conflict(path: &Path, scan: &SessionScan, turn: usize) -> Error {
    Error::Conflict {
        path: path.to_path_buf(),
        session: scan.name.clone(),
        turn: (scan.offset + turn) as u32,
    }
}

/// The digest could not confirm that the file's turns of a session start the same way as the
/// index's (the file is shorter, or differs): compare turn by turn, reading the file again (a
/// rare path). `None` if the file's turns are a prefix of the index's.
fn find_conflict(
    gatekeeper: &Gatekeeper,
    path: &Path,
    forced_session: Option<&str>,
    scan: &SessionScan,
) -> Result<Option<Error>, crate::Error> {
    let view = gatekeeper.store().read()?;
    let Some(id) = scan.id else { return Ok(None) };
    let mut position = 0usize;
    let mut found = None;
    let mut positions = Positions::default();
    for item in ParsedLines::open(path)? {
        let (line_no, parsed) = item?;
        let Some(line) = parsed.ok().filter(|l| positions.count(path, line_no, &l.session, l.turn).is_ok())
        else {
            continue;
        };
        if found.is_some() || position >= scan.stored || forced_session.unwrap_or(&line.session) != scan.name
        {
            continue;
        }
        let stored = view.turn_record(id, position as u32)?;
        if stored.is_none_or(|s| s.user != line.user || s.assistant != line.assistant) {
            found = Some(position);
        }
        position += 1;
    }
    // Every compared turn equal but the digests differ: only a hash collision could do that.
    let collided = found.is_none() && scan.turns >= scan.stored;
    Ok(found.or(collided.then(|| scan.stored - 1)).map(|turn| conflict(path, scan, turn)))
}

/// Bytes read per block: a few thousand lines, parsed on the rayon pool. Tests read a few
/// dozen bytes at a time, so that lines cross blocks.
const BLOCK_BYTES: usize = if cfg!(test) { 40 } else { 4 << 20 };

/// Whole lines of a file as read: the bytes and, for each line, its 1-based number and where
/// it is in them (without its `\n`, and without the byte order mark of line 1).
struct Block {
    bytes: Vec<u8>,
    lines: Vec<(u64, std::ops::Range<usize>)>,
}

impl Block {
    /// The text of a line, `None` if it is blank. Called on the rayon pool: checking that a
    /// line is UTF-8 costs as much as finding it.
    fn text(&self, path: &Path, line_no: u64, range: &std::ops::Range<usize>) -> Result<Option<&str>, Error> {
        let bytes = self.bytes.get(range.clone()).unwrap_or_default();
        let text = std::str::from_utf8(bytes).map_err(|_| Error::shape(path, line_no, "not valid UTF-8"))?;
        let text = text.trim_end_matches(['\n', '\r']);
        Ok((!text.trim().is_empty()).then_some(text))
    }

    /// Applies `f` to each non-blank line's number and text on the rayon pool; results in
    /// line order (a line that is not UTF-8 is an error there).
    fn map_lines<'b, T: Send>(
        &'b self,
        path: &Path,
        f: impl Fn(u64, &'b str) -> Result<T, Error> + Sync,
    ) -> Vec<(u64, Result<T, Error>)> {
        self.lines
            .par_iter()
            .filter_map(|(line_no, range)| match self.text(path, *line_no, range) {
                Ok(None) => None,
                Ok(Some(text)) => Some((*line_no, f(*line_no, text))),
                Err(e) => Some((*line_no, Err(e))),
            })
            .collect()
    }
}

/// The lines of a file a block at a time. Only finding the lines is left to the reading
/// thread: each line used to be copied into a `String` of its own and checked there.
struct LineBlocks {
    path: std::path::PathBuf,
    file: std::fs::File,
    line_no: u64,
    /// The start of a line the last block ended in the middle of.
    carry: Vec<u8>,
    done: bool,
}

impl LineBlocks {
    fn open(path: &Path) -> Result<Self, Error> {
        let file =
            std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Ok(LineBlocks { path: path.to_path_buf(), file, line_no: 0, carry: Vec::new(), done: false })
    }

    /// The next block of whole lines, and the read error it ended on, if it did (to be reported
    /// after its lines; the line it cut is dropped). `None` at the end of the file.
    fn next_block(&mut self) -> Option<(Block, Option<crate::Error>)> {
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
                    failed = Some(Error::Io { path: self.path.clone(), source }.into());
                }
            }
        }
        let end = complete.unwrap_or(bytes.len());
        self.carry = bytes.get(end..).unwrap_or_default().to_vec();
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
        (!lines.is_empty() || failed.is_some()).then_some((Block { bytes, lines }, failed))
    }
}

/// The lines of a file, each parsed, in order.
struct ParsedLines {
    blocks: LineBlocks,
    /// Parsed lines of the current block, then a read error if the block ended on one.
    ready: std::vec::IntoIter<ParsedItem>,
}

type ParsedItem = Result<(u64, Result<jsonl::Line, Error>), crate::Error>;

impl ParsedLines {
    fn open(path: &Path) -> Result<Self, Error> {
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
        let bad = Error::shape(&path, 6, "not valid UTF-8").to_string();
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
}
