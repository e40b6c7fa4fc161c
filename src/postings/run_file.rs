//! The file that holds an import's runs while it lasts: `<index>.runs`, beside the index.
//!
//! A run is written once, in order, and read once, in order, by the merge (`super::runs`).
//! Kept in a redb table, each of its anchors cost a B-tree insert, its pages went through every
//! batch's commit and back through the page cache, and deleting the table freed them all one
//! by one. A flat file does neither.
//!
//! The index records each run's span of the file (`posting_run_files`: run id -> offset,
//! length, checksum) in the transaction of the batch that wrote it, after the bytes are synced
//! to disk: a run the index knows is in the file, whatever crashes when. Bytes after the last
//! recorded span (a batch that failed or was killed before its commit) are cut off by the next
//! append; a merge inside a batch's transaction leaves the file as it is (the new run goes
//! after the merged ones, which the committed index still refers to until the commit). A
//! process that holds the index lock exclusively removes a file no recorded run refers to
//! (`Store::remove_unused_run_file`).
//!
//! A run is a sequence of entries in ascending hash order, each value laid out as
//! `runs::push_list` writes it:
//! ```text
//! entry = hash: u64 LE | value_len: u32 LE | value
//! ```

use super::{Error, corrupt};
use redb::ReadableTable;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom, Take, Write};
use std::path::{Path, PathBuf};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Bytes of an entry's header: hash and value length.
const HEADER: usize = 12;

/// Read buffers of all the runs a merge reads side by side, shared among them (62 runs of a
/// million-turn import fill it), so that a merge's memory does not grow with the number of
/// runs: each gets its share, between 8 KiB and 128 KiB.
const READ_BUDGET: usize = 8 << 20;

/// The read buffer of each of `side_by_side` runs.
fn read_buffer(side_by_side: usize) -> usize {
    (READ_BUDGET / side_by_side.max(1)).clamp(8 << 10, 128 << 10)
}

/// Where one run lies in the file, and the checksum of its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RunSpan {
    pub offset: u64,
    pub len: u64,
    pub checksum: u64,
}

impl RunSpan {
    /// The span as the `posting_run_files` table stores it.
    pub fn to_row(self) -> (u64, u64, u64) {
        (self.offset, self.len, self.checksum)
    }

    /// A span read from the `posting_run_files` table.
    pub fn from_row((offset, len, checksum): (u64, u64, u64)) -> Self {
        RunSpan { offset, len, checksum }
    }

    fn end(self) -> Result<u64, Error> {
        self.offset.checked_add(self.len).ok_or_else(|| corrupt("posting run files", "span past 2^64"))
    }
}

/// The run file of the index at `index`.
pub(crate) fn path_of(index: &Path) -> PathBuf {
    let mut path = index.as_os_str().to_owned();
    path.push(".runs");
    PathBuf::from(path)
}

/// The id of the next run and where it starts in the file: after every recorded run.
pub(crate) fn next_run(spans: &impl ReadableTable<u32, (u64, u64, u64)>) -> Result<(u32, u64), Error> {
    match spans.last()? {
        None => Ok((0, 0)),
        Some((run, span)) => {
            let next = run
                .value()
                .checked_add(1)
                .ok_or_else(|| corrupt("posting run files", "run ids exhausted"))?;
            Ok((next, RunSpan::from_row(span.value()).end()?))
        }
    }
}

/// A run being encoded: its entries, appended in ascending hash order.
#[derive(Debug, Default)]
pub(crate) struct RunBytes {
    bytes: Vec<u8>,
    /// Where the open entry's header starts.
    open: Option<usize>,
    checksum: u64,
}

impl RunBytes {
    /// Starts the entry of `hash`; its value is what goes into [`value`](Self::value) until
    /// [`finish_entry`](Self::finish_entry).
    pub fn start_entry(&mut self, hash: u64) {
        self.open = Some(self.bytes.len());
        self.bytes.extend_from_slice(&hash.to_le_bytes());
        self.bytes.extend_from_slice(&[0; 4]);
    }

    /// The buffer the open entry's value is appended to.
    pub fn value(&mut self) -> &mut Vec<u8> {
        &mut self.bytes
    }

    /// Closes the open entry: fills in its length and adds it to the checksum.
    pub fn finish_entry(&mut self) -> Result<(), Error> {
        let start = self.open.take().ok_or_else(|| corrupt("posting run", "no entry open"))?;
        let value_start = start + HEADER;
        let len = u32::try_from(self.bytes.len() - value_start)
            .map_err(|_| corrupt("posting run", "an anchor's postings over 4 GiB"))?;
        self.bytes[start + 8..value_start].copy_from_slice(&len.to_le_bytes());
        let hash = u64::from_le_bytes(self.bytes[start..start + 8].try_into().expect("eight bytes"));
        self.checksum = next_checksum(self.checksum, hash, &self.bytes[value_start..]);
        Ok(())
    }

    /// Writes the run at `offset` of the file at `path`, cutting off whatever lay from there
    /// on, and syncs it to disk: it must be there before the index records it.
    pub fn append(&self, path: &Path, offset: u64) -> Result<RunSpan, Error> {
        if self.open.is_some() {
            return Err(corrupt("posting run", "an entry left open"));
        }
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let mut file = File::options().create(true).truncate(false).write(true).open(path).map_err(io)?;
        file.set_len(offset).map_err(io)?;
        file.seek(SeekFrom::Start(offset)).map_err(io)?;
        file.write_all(&self.bytes).map_err(io)?;
        file.sync_data().map_err(io)?;
        Ok(RunSpan { offset, len: self.bytes.len() as u64, checksum: self.checksum })
    }
}

/// The checksum of a run after one more entry. Order matters: entries exchanged change it.
fn next_checksum(checksum: u64, hash: u64, value: &[u8]) -> u64 {
    checksum.rotate_left(1) ^ xxh3_64_with_seed(value, hash)
}

/// Reads every run of `spans` (run number and span) in the file at `path` to its end: each
/// entry in order, each checksum matching, no two spans sharing a byte. Run before a merge
/// that no import of this process wrote the runs for: the merge's write must not begin on runs
/// that writers whose locks did not hold wrote over each other.
///
/// # Errors
/// [`Error::RunsDamaged`] naming the first run that does not verify, [`Error::RunsMissing`],
/// [`Error::Io`].
pub(crate) fn verify(path: &Path, spans: &[(u32, RunSpan)]) -> Result<(), Error> {
    let mut by_offset = spans.to_vec();
    by_offset.sort_by_key(|(_, span)| span.offset);
    for pair in by_offset.windows(2) {
        let ((_, first), (run, second)) = (pair[0], pair[1]);
        if first.end()? > second.offset {
            return Err(Error::RunsDamaged {
                path: path.to_path_buf(),
                run,
                what: format!("it begins at byte {} inside another run", second.offset),
            });
        }
    }
    for &(run, span) in spans {
        let mut reader = RunReader::open(path, run, span, 1)?;
        while reader.advance()?.is_some() {}
    }
    Ok(())
}

/// One run read from the file, an entry at a time.
pub(crate) struct RunReader {
    path: PathBuf,
    run: u32,
    reader: BufReader<Take<File>>,
    span: RunSpan,
    /// Bytes of the span not read yet.
    left: u64,
    checksum: u64,
    previous: Option<u64>,
    value: Vec<u8>,
}

impl RunReader {
    /// Opens run `run`, recorded at `span` of the file at `path`, to be read beside
    /// `side_by_side - 1` others (which share the read budget).
    pub fn open(path: &Path, run: u32, span: RunSpan, side_by_side: usize) -> Result<Self, Error> {
        let io = |source| Error::Io { path: path.to_path_buf(), source };
        let mut file = File::open(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::RunsMissing { path: path.to_path_buf() },
            _ => io(e),
        })?;
        let end = span.end()?;
        let file_len = file.metadata().map_err(io)?.len();
        if file_len < end {
            return Err(Error::RunsDamaged {
                path: path.to_path_buf(),
                run,
                what: format!("the file ends at byte {file_len}, before the run's end at {end}"),
            });
        }
        file.seek(SeekFrom::Start(span.offset)).map_err(io)?;
        Ok(RunReader {
            path: path.to_path_buf(),
            run,
            reader: BufReader::with_capacity(read_buffer(side_by_side), file.take(span.len)),
            span,
            left: span.len,
            checksum: 0,
            previous: None,
            value: Vec::new(),
        })
    }

    /// Moves to the next entry and returns its hash; `None` at the end of the run, once its
    /// checksum matched.
    pub fn advance(&mut self) -> Result<Option<u64>, Error> {
        self.value.clear();
        if self.left == 0 {
            if self.checksum != self.span.checksum {
                return Err(self.damaged("its checksum does not match"));
            }
            return Ok(None);
        }
        let mut header = [0u8; HEADER];
        self.read(&mut header)?;
        let hash = u64::from_le_bytes(header[..8].try_into().expect("eight bytes"));
        let len = u32::from_le_bytes(header[8..].try_into().expect("four bytes")) as u64;
        if self.previous.is_some_and(|previous| previous >= hash) {
            return Err(self.damaged("its anchors are out of order"));
        }
        if len > self.left {
            return Err(self.damaged("an entry runs past its end"));
        }
        self.value.resize(len as usize, 0);
        self.reader
            .read_exact(&mut self.value)
            .map_err(|source| Error::Io { path: self.path.clone(), source })?;
        self.left -= len;
        self.checksum = next_checksum(self.checksum, hash, &self.value);
        self.previous = Some(hash);
        Ok(Some(hash))
    }

    /// The current entry's value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    fn read(&mut self, into: &mut [u8]) -> Result<(), Error> {
        if (into.len() as u64) > self.left {
            return Err(self.damaged("an entry runs past its end"));
        }
        self.reader.read_exact(into).map_err(|source| Error::Io { path: self.path.clone(), source })?;
        self.left -= into.len() as u64;
        Ok(())
    }

    fn damaged(&self, what: &str) -> Error {
        Error::RunsDamaged { path: self.path.clone(), run: self.run, what: what.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_of(entries: &[(u64, &[u8])]) -> Result<RunBytes, Error> {
        let mut run = RunBytes::default();
        for (hash, value) in entries {
            run.start_entry(*hash);
            run.value().extend_from_slice(value);
            run.finish_entry()?;
        }
        Ok(run)
    }

    fn read_all(path: &Path, run: u32, span: RunSpan) -> Result<Vec<(u64, Vec<u8>)>, Error> {
        let mut reader = RunReader::open(path, run, span, 1)?;
        let mut out = Vec::new();
        while let Some(hash) = reader.advance()? {
            out.push((hash, reader.value().to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn runs_read_side_by_side_share_the_read_budget() {
        assert_eq!(read_buffer(1), 128 << 10, "a few runs get the largest buffer");
        assert!(62 * read_buffer(62) <= READ_BUDGET, "a million-turn import's runs fit the budget");
        assert!(500 * read_buffer(500) <= READ_BUDGET);
        assert_eq!(read_buffer(100_000), 8 << 10, "never below the smallest useful read");
    }

    #[test]
    fn runs_read_back_as_written_and_an_append_cuts_off_what_followed() -> Result<(), Error> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io { path: "tmp".into(), source })?;
        let path = path_of(&dir.path().join("index.redb"));
        assert!(path.ends_with("index.redb.runs"));
        let first: Vec<(u64, &[u8])> = vec![(3, b"abc"), (7, b""), (u64::MAX, &[0xff; 300])];
        let span = run_of(&first)?.append(&path, 0)?;
        // A batch that failed after writing its run: bytes no span records, more than the next
        // run's.
        run_of(&[(1, &[7; 100])])?.append(&path, span.len)?;
        let second: Vec<(u64, &[u8])> = vec![(1, b"x"), (2, b"yz")];
        let next = run_of(&second)?.append(&path, span.len)?;
        assert_eq!(next.offset, span.len, "the second run replaces the failed one's bytes");
        let file_len =
            std::fs::metadata(&path).map_err(|source| Error::Io { path: path.clone(), source })?.len();
        assert_eq!(file_len, next.offset + next.len);
        let owned =
            |entries: &[(u64, &[u8])]| entries.iter().map(|(h, v)| (*h, v.to_vec())).collect::<Vec<_>>();
        assert_eq!(read_all(&path, 0, span)?, owned(&first));
        assert_eq!(read_all(&path, 1, next)?, owned(&second));
        Ok(())
    }

    #[test]
    fn verify_reads_every_run_and_refuses_overlapping_spans() -> Result<(), Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.runs");
        let first = run_of(&[(1, b"one"), (2, b"two")])?.append(&path, 0)?;
        let second = run_of(&[(3, b"three")])?.append(&path, first.len)?;
        verify(&path, &[(0, first), (1, second)])?;
        // A span that starts inside another: what two writers without locks leave.
        let inside = RunSpan { offset: first.offset + 1, ..second };
        let err = verify(&path, &[(0, first), (1, inside)]).unwrap_err();
        assert!(matches!(err, Error::RunsDamaged { run: 1, .. }), "{err}");
        // A flipped byte fails the run's checksum.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0x40;
        std::fs::write(&path, bytes).unwrap();
        let err = verify(&path, &[(0, first), (1, second)]).unwrap_err();
        assert!(matches!(err, Error::RunsDamaged { run: 1, .. }), "{err}");
        Ok(())
    }

    #[test]
    fn a_damaged_or_short_run_is_refused() -> Result<(), Error> {
        let dir = tempfile::tempdir().map_err(|source| Error::Io { path: "tmp".into(), source })?;
        let path = path_of(&dir.path().join("index.redb"));
        let span = run_of(&[(1, b"one"), (2, b"two")])?.append(&path, 0)?;
        let io = |source| Error::Io { path: path.clone(), source };
        let mut bytes = std::fs::read(&path).map_err(io)?;
        // A flipped byte in a value.
        bytes[HEADER + 1] ^= 1;
        std::fs::write(&path, &bytes).map_err(io)?;
        let err = read_all(&path, 0, span).unwrap_err();
        assert!(err.to_string().contains("checksum"), "{err}");
        // Entries exchanged: still framed, out of order.
        let swapped = run_of(&[(2, b"two"), (1, b"one")]);
        let span = swapped?.append(&path, 0)?;
        let err = read_all(&path, 0, span).unwrap_err();
        assert!(err.to_string().contains("out of order"), "{err}");
        // A file cut short.
        let span = run_of(&[(1, b"one"), (2, b"two")])?.append(&path, 0)?;
        File::options().write(true).open(&path).and_then(|f| f.set_len(span.len - 1)).map_err(io)?;
        let err = RunReader::open(&path, 0, span, 1).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("before the run's end"), "{err}");
        // A span that claims more than its entries hold.
        let span = run_of(&[(1, b"one")])?.append(&path, 0)?;
        let longer = RunSpan { len: span.len - 1, ..span };
        let err = read_all(&path, 0, longer).unwrap_err();
        assert!(err.to_string().contains("past its end"), "{err}");
        Ok(())
    }
}
