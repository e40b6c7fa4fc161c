//! What the hooks already handed one agent session, so that no event gives it again: a resume's
//! `SessionStart` and the prompt after it, or a compaction after a resume, would otherwise put
//! the same turn or request into one model request twice (issue 50, items 4 and 7). A
//! compaction rebuilds the model's window without what was given before it: its recovery
//! clears the record first (`Given::clear`), so it can give that again, and records what it gives.
//!
//! One small file per agent session id in a directory beside the index (`hook-given/`): one
//! key per line, a hash of what was given (a turn of a session, a request's text). Bounded: a
//! file keeps its latest [`MAX_KEYS`] keys, the directory its [`MAX_SESSIONS`] most recently
//! written files. A record that cannot be read is an empty one (the worst case is context
//! given twice, as before); one that cannot be written is reported by the caller.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Keys one session's record keeps (the latest).
pub const MAX_KEYS: usize = 4096;

/// Session records the directory keeps (the most recently written).
pub const MAX_SESSIONS: usize = 256;

/// The record of one agent session: what the hooks gave it.
#[derive(Debug, Default)]
pub struct Given {
    /// The record's file; `None`: kept in memory only.
    path: Option<PathBuf>,
    keys: Vec<u64>,
    set: HashSet<u64>,
    /// Whether the record changed since the load (a key added, or the record cleared).
    changed: bool,
}

impl Given {
    /// The record of agent session `session_id` in `dir` (empty when there is none yet, or it
    /// cannot be read).
    pub fn load(dir: &Path, session_id: &str) -> Given {
        let name = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(session_id.as_bytes()));
        let path = dir.join(name);
        let keys: Vec<u64> = std::fs::read_to_string(&path)
            .map(|text| text.lines().filter_map(|l| u64::from_str_radix(l.trim(), 16).ok()).collect())
            .unwrap_or_default();
        let set = keys.iter().copied().collect();
        Given { path: Some(path), keys, set, changed: false }
    }

    /// A record kept in memory only.
    pub fn in_memory() -> Given {
        Given::default()
    }

    /// Whether `key` was given.
    pub(crate) fn has(&self, key: u64) -> bool {
        self.set.contains(&key)
    }

    /// Notes `key` as given.
    pub(crate) fn add(&mut self, key: u64) {
        if self.set.insert(key) {
            self.keys.push(key);
            self.changed = true;
        }
    }

    /// Forgets everything given: the agent rebuilt the model's window (a compaction), so what
    /// was given before is no longer in front of the model.
    pub(crate) fn clear(&mut self) {
        if !self.keys.is_empty() {
            self.keys.clear();
            self.set.clear();
            self.changed = true;
        }
    }

    /// Writes the record if it changed: a temporary file renamed over it, so that a
    /// hook of the same session never reads half of one; then the directory's oldest records
    /// past [`MAX_SESSIONS`] go.
    ///
    /// # Errors
    /// A directory or file that cannot be created or written.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(path) = self.path.as_deref().filter(|_| self.changed) else { return Ok(()) };
        let dir = path.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let keep = &self.keys[self.keys.len().saturating_sub(MAX_KEYS)..];
        let mut text = String::with_capacity(keep.len() * 17);
        for key in keep {
            text.push_str(&format!("{key:016x}\n"));
        }
        let temp = path.with_extension(format!("tmp-{}", std::process::id()));
        let written = std::fs::File::create(&temp)
            .and_then(|mut file| file.write_all(text.as_bytes()))
            .and_then(|()| std::fs::rename(&temp, path));
        if written.is_err() {
            // A full disk or a vanished directory leaves no half-written file behind.
            let _ = std::fs::remove_file(&temp);
        }
        written?;
        prune(dir, MAX_SESSIONS);
        Ok(())
    }
}

/// Removes the oldest records of `dir` past `keep` (failures ignored: the next save retries).
fn prune(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            Some((e.metadata().ok()?.modified().ok()?, e.path()))
        })
        .collect();
    if files.len() <= keep {
        return;
    }
    files.sort();
    for (_, path) in &files[..files.len() - keep] {
        let _ = std::fs::remove_file(path);
    }
}

/// The key of turn `turn` of the index's session `session`.
pub(crate) fn turn_key(session: &str, turn: u32) -> u64 {
    xxhash_rust::xxh3::xxh3_64(format!("turn\0{session}\0{turn}").as_bytes())
}

/// The key of a request of `session` as the requests list shows it.
pub(crate) fn request_key(session: &str, request: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(format!("request\0{session}\0{}", request.trim()).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_that_fails_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut given = Given::load(dir.path(), "session");
        given.add(7);
        // The record's own path is a directory that is not empty: the rename over it fails.
        let path = given.path.clone().unwrap();
        std::fs::create_dir_all(path.join("in-the-way")).unwrap();
        assert!(given.save().is_err());
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| !n.contains("tmp-")), "{names:?}");
    }

    #[test]
    fn a_record_survives_a_reload_and_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let mut given = Given::load(dir.path(), "s1");
        assert!(!given.has(turn_key("p#s1", 3)));
        for turn in 0..(MAX_KEYS as u32 + 10) {
            given.add(turn_key("p#s1", turn));
        }
        given.save().unwrap();
        let again = Given::load(dir.path(), "s1");
        assert!(again.has(turn_key("p#s1", MAX_KEYS as u32 + 9)));
        assert!(!again.has(turn_key("p#s1", 0)), "the oldest keys go past MAX_KEYS");
        assert!(!Given::load(dir.path(), "s2").has(turn_key("p#s1", 5000)), "another session's record");
        assert_ne!(request_key("p#s1", "a"), turn_key("p#s1", 0));
    }

    #[test]
    fn a_cleared_record_is_saved_empty() {
        let dir = tempfile::tempdir().unwrap();
        let mut given = Given::load(dir.path(), "s1");
        given.add(request_key("p#s1", "a"));
        given.save().unwrap();
        let mut again = Given::load(dir.path(), "s1");
        again.clear();
        assert!(!again.has(request_key("p#s1", "a")));
        again.add(turn_key("p#s1", 1));
        again.save().unwrap();
        let last = Given::load(dir.path(), "s1");
        assert!(!last.has(request_key("p#s1", "a")), "the clear was saved");
        assert!(last.has(turn_key("p#s1", 1)), "what was given after it was saved");
        let mut empty = Given::load(dir.path(), "s1");
        empty.clear();
        empty.save().unwrap();
        assert!(!Given::load(dir.path(), "s1").has(turn_key("p#s1", 1)), "a clear alone is saved");
    }

    #[test]
    fn the_directory_keeps_the_latest_records() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("{i:016x}")), "1\n").unwrap();
        }
        prune(dir.path(), 3);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
    }
}
