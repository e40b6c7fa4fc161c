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
use rayon::prelude::*;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
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

/// Imports one canonical JSONL file.
pub fn import(
    gatekeeper: &Gatekeeper,
    path: &Path,
    forced_session: Option<&str>,
    skip_invalid: bool,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport, crate::Error> {
    // Pass 1: check every line and plan each session.
    let view = gatekeeper.store().read()?;
    let mut scans: Vec<SessionScan> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut positions: HashMap<String, u64> = HashMap::new();
    let mut skipped = Vec::new();
    for item in ParsedLines::open(path)? {
        let (line_no, parsed) = item?;
        let line = match check(path, line_no, parsed, &mut positions) {
            Ok(line) => line,
            Err(e) if skip_invalid => {
                skipped.push(Skipped { line: line_no, reason: jsonl::reason(&e) });
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let name = forced_session.map_or(line.session, str::to_string);
        let i = match by_name.get(&name) {
            Some(&i) => i,
            None => {
                gatekeeper.session(&name)?; // validates the name
                let offset = offsets.get(&name).copied().unwrap_or(0);
                let (id, count, record_digest) = match view.session_by_name(&name)? {
                    Some((id, r)) => (Some(id), r.turn_count as usize, r.digest),
                    None => (None, 0, 0),
                };
                scans.push(SessionScan {
                    name: name.clone(),
                    turns: 0,
                    stored: count.saturating_sub(offset),
                    offset,
                    digest: 0,
                    record_digest,
                    id,
                });
                by_name.insert(name, scans.len() - 1);
                scans.len() - 1
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

    // Pass 2: the new turns, a batch at a time.
    let existing: Vec<usize> = scans.iter().map(|s| s.turns.min(s.stored)).collect();
    let destinations: Vec<(String, Option<String>)> = scans.iter().map(|s| (s.name.clone(), None)).collect();
    let lines = ParsedLines::open(path)?;
    let mut seen = vec![0usize; scans.len()];
    let mut positions: HashMap<String, u64> = HashMap::new();
    let skip = existing.clone();
    let mut lines = lines.filter_map(move |item| {
        let (line_no, parsed) = match item {
            Ok(item) => item,
            Err(e) => return Some(Err(e)),
        };
        // Pass 1 checked every line: the ones it skipped are skipped again.
        let line = check(path, line_no, parsed, &mut positions).ok()?;
        let name = forced_session.unwrap_or(&line.session);
        let i = *by_name.get(name)?;
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
    })
}

/// Checks a parsed line's `turn` against its position in its session in this file.
fn check(
    path: &Path,
    line_no: u64,
    parsed: Result<jsonl::Line, Error>,
    positions: &mut HashMap<String, u64>,
) -> Result<jsonl::Line, Error> {
    let line = parsed?;
    let position = positions.get(&line.session).copied().unwrap_or(0);
    if let Some(turn) = line.turn
        && turn != position
    {
        return Err(Error::shape(
            path,
            line_no,
            format!(
                "`turn` is {turn} but this is turn {position} of session {:?} in this file",
                line.session
            ),
        ));
    }
    match positions.get_mut(&line.session) {
        Some(next) => *next += 1,
        None => {
            positions.insert(line.session.clone(), 1);
        }
    }
    Ok(line)
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
    let mut positions = HashMap::new();
    for item in ParsedLines::open(path)? {
        let (line_no, parsed) = item?;
        let Ok(line) = check(path, line_no, parsed, &mut positions) else { continue };
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

/// Lines parsed per block: a few MB of text, parsed on the rayon pool.
const PARSE_BLOCK: usize = 4096;

/// The lines of a file, each parsed, in order. Lines are parsed a block at a time on the
/// rayon pool: parsing JSON is most of the work of reading a file, and both passes read it
/// all.
struct ParsedLines {
    lines: LineReader,
    /// Parsed lines of the current block, then a read error if the block ended on one.
    ready: std::vec::IntoIter<ParsedItem>,
}

type ParsedItem = Result<(u64, Result<jsonl::Line, Error>), crate::Error>;

impl ParsedLines {
    fn open(path: &Path) -> Result<Self, Error> {
        Ok(ParsedLines { lines: LineReader::open(path)?, ready: Vec::new().into_iter() })
    }
}

impl Iterator for ParsedLines {
    type Item = ParsedItem;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(item) = self.ready.next() {
            return Some(item);
        }
        let mut raw = Vec::with_capacity(PARSE_BLOCK);
        let mut failed = None;
        for item in self.lines.by_ref() {
            match item {
                Ok(line) => raw.push(line),
                Err(e) => {
                    failed = Some(e); // handed out after the lines before it
                    break;
                }
            }
            if raw.len() == PARSE_BLOCK {
                break;
            }
        }
        let path = self.lines.path.as_path();
        let mut parsed: Vec<ParsedItem> = raw
            .into_par_iter()
            .map(|(line_no, text)| Ok((line_no, jsonl::parse_line(path, line_no, &text))))
            .collect();
        parsed.extend(failed.map(Err));
        self.ready = parsed.into_iter();
        self.ready.next()
    }
}

/// Non-blank lines of a file with their 1-based numbers; a line that is not UTF-8 is an error.
struct LineReader {
    path: std::path::PathBuf,
    reader: BufReader<std::fs::File>,
    line_no: u64,
    buffer: Vec<u8>,
}

impl LineReader {
    fn open(path: &Path) -> Result<Self, Error> {
        let file =
            std::fs::File::open(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Ok(LineReader {
            path: path.to_path_buf(),
            reader: BufReader::with_capacity(1 << 20, file),
            line_no: 0,
            buffer: Vec::new(),
        })
    }
}

impl Iterator for LineReader {
    type Item = Result<(u64, String), crate::Error>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.buffer.clear();
            match self.reader.read_until(b'\n', &mut self.buffer) {
                Ok(0) => return None,
                Ok(_) => {}
                Err(source) => return Some(Err(Error::Io { path: self.path.clone(), source }.into())),
            }
            self.line_no += 1;
            let bytes = if self.line_no == 1 {
                self.buffer.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&self.buffer)
            } else {
                &self.buffer[..]
            };
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => text.trim_end_matches(['\n', '\r']),
                Err(_) => {
                    return Some(Err(Error::shape(&self.path, self.line_no, "not valid UTF-8").into()));
                }
            };
            if !text.trim().is_empty() {
                return Some(Ok((self.line_no, text.to_string())));
            }
        }
    }
}
