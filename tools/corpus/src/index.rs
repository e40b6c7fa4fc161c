//! Indexes of generated turns, built once and cached under `target/` for benches and `measure`.
//!
//! Building 100k turns with durable `add_turn` takes minutes, so the finished file is kept in
//! `target/ctxgate-bench/`, keyed by turn count, seed, ctxgate's format and anchor-rules versions,
//! [`crate::CORPUS_VERSION`] and a fingerprint of the sources that decide what is on disk
//! (`src/store/`, `src/anchor/`): while the format is in flux, a changed record layout must not
//! be read from a stale cache. A cached file is also checked before reuse (it opens, its session
//! decodes, it holds the turns). A build writes a `.partial` file and renames it when done, so
//! an interrupted build is never reused. Measurements that write run on a [`working_copy`].

use crate::Corpus;
use anyhow::{Context, Result, bail};
use ctxgate::{Gatekeeper, Options};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The one session of a cached index.
pub const SESSION: &str = "bench";

/// A cached index of `turns` turns of [`Corpus::session`] 0, in one session named [`SESSION`].
#[derive(Debug, Clone)]
pub struct CachedIndex {
    /// The index file.
    pub path: PathBuf,
    /// How it was built.
    pub build: BuildInfo,
    /// True if this call built it, false if it was reused.
    pub built_now: bool,
}

/// How a cached index was built (kept beside it as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildInfo {
    /// Turns added.
    pub turns: u32,
    /// Corpus seed.
    pub seed: u64,
    /// Wall time of the build in seconds.
    pub seconds: f64,
    /// Index file size after the build.
    pub file_bytes: u64,
}

impl BuildInfo {
    /// Build throughput.
    pub fn turns_per_second(&self) -> f64 {
        f64::from(self.turns) / self.seconds.max(f64::MIN_POSITIVE)
    }
}

/// `target/ctxgate-bench` (or `$CARGO_TARGET_DIR/ctxgate-bench`), created if missing.
pub fn cache_dir() -> Result<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    let dir = target.join("ctxgate-bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir)
}

/// The workspace root: two levels above this crate's manifest (`tools/corpus`).
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.ancestors().nth(2).unwrap_or(manifest).to_path_buf()
}

/// The cached index of `turns` turns for `seed`, built first if it is missing, stale or
/// `rebuild` is set. `progress` is called with the number of turns added so far, every 1000.
pub fn cached_index(turns: u32, seed: u64, rebuild: bool, progress: impl FnMut(u32)) -> Result<CachedIndex> {
    let dir = cache_dir()?;
    let stem = stem("index", turns, seed);
    let path = dir.join(format!("{stem}.redb"));
    let info_path = dir.join(format!("{stem}.json"));
    if !rebuild && let Some(build) = reusable(&path, &info_path, turns) {
        return Ok(CachedIndex { path, build, built_now: false });
    }
    remove_stale(&dir, turns, seed, &stem);
    let partial = dir.join(format!("{stem}.partial-{}", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    let build = build_index(&partial, turns, seed, progress)?;
    std::fs::rename(&partial, &path).with_context(|| format!("cannot rename to {}", path.display()))?;
    std::fs::write(&info_path, serde_json::to_vec_pretty(&build)?)
        .with_context(|| format!("cannot write {}", info_path.display()))?;
    Ok(CachedIndex { path, build, built_now: true })
}

/// The cache file name (without extension) of an index of `kind` ("index": built by
/// `add_turn`, "imported": by `ctxgate import`).
fn stem(kind: &str, turns: u32, seed: u64) -> String {
    format!(
        "{kind}-t{turns}-s{seed}-f{}-a{}-c{}-{:016x}",
        ctxgate::store::FORMAT_VERSION,
        ctxgate::anchor::ANCHOR_RULES_VERSION,
        crate::CORPUS_VERSION,
        source_fingerprint()
    )
}

/// Like [`cached_index`] (same turns, same session), but built the fast way: the turns are
/// written as canonical JSONL and imported with `ctxgate import` (the binary at `ctxgate`),
/// one transaction per batch instead of one per turn. Cached as `imported-…` beside the others.
pub fn cached_imported_index(turns: u32, seed: u64, ctxgate: &Path, rebuild: bool) -> Result<CachedIndex> {
    let dir = cache_dir()?;
    let stem = stem("imported", turns, seed);
    let path = dir.join(format!("{stem}.redb"));
    let info_path = dir.join(format!("{stem}.json"));
    if !rebuild && let Some(build) = reusable(&path, &info_path, turns) {
        return Ok(CachedIndex { path, build, built_now: false });
    }
    let partial = dir.join(format!("{stem}.partial-{}", std::process::id()));
    let log = dir.join(format!("{stem}.partial-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&partial);
    {
        use std::io::Write;
        let mut out = std::io::BufWriter::new(std::fs::File::create(&log)?);
        for turn in Corpus::new(seed).session(0).take(turns as usize) {
            let line =
                serde_json::json!({"session": SESSION, "user": turn.user, "assistant": turn.assistant});
            writeln!(out, "{line}")?;
        }
        out.flush()?;
    }
    let started = Instant::now();
    let status = std::process::Command::new(ctxgate)
        .arg("--db")
        .arg(&partial)
        .args(["-q", "import", "--format", "jsonl"])
        .arg(&log)
        .status()
        .with_context(|| format!("cannot run {}", ctxgate.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&log);
    if !status.success() {
        bail!("ctxgate import failed: {status}");
    }
    std::fs::rename(&partial, &path).with_context(|| format!("cannot rename to {}", path.display()))?;
    let build = BuildInfo { turns, seed, seconds, file_bytes: std::fs::metadata(&path)?.len() };
    std::fs::write(&info_path, serde_json::to_vec_pretty(&build)?)
        .with_context(|| format!("cannot write {}", info_path.display()))?;
    match reusable(&path, &info_path, turns) {
        Some(build) => Ok(CachedIndex { path, build, built_now: true }),
        None => bail!("the imported index at {} does not hold the {turns} turns", path.display()),
    }
}

/// The build info of a cached index that opens, decodes and holds exactly `turns` turns.
fn reusable(path: &Path, info_path: &Path, turns: u32) -> Option<BuildInfo> {
    let info: BuildInfo = serde_json::from_slice(&std::fs::read(info_path).ok()?).ok()?;
    let gk = Gatekeeper::open(path, Options::default()).ok()?;
    let stats = gk.stats().ok()?;
    let sessions = gk.sessions().ok()?;
    let probe = Corpus::new(info.seed).query_for(crate::TopicId::all().next()?, 0);
    let fits = stats.turns == u64::from(turns)
        && info.turns == turns
        && sessions.len() == 1
        && sessions[0].name == SESSION
        && sessions[0].turns == turns
        && gk.session(SESSION).ok()?.select(&probe).is_ok();
    fits.then_some(info)
}

/// Removes the cached indexes of `turns` and `seed` other than `keep` (earlier formats).
fn remove_stale(dir: &Path, turns: u32, seed: u64, keep: &str) {
    let prefix = format!("index-t{turns}-s{seed}-");
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.filter_map(|e| e.ok()) {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(&prefix) && !name.starts_with(keep) && !name.contains(".partial-") {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// FNV-1a over the paths and contents of ctxgate's `src/store/` and `src/anchor/`, 0 if the
/// sources are not there (an installed binary).
fn source_fingerprint() -> u64 {
    let root = workspace_root().join("src");
    let mut files = Vec::new();
    for dir in ["store", "anchor"] {
        if let Ok(entries) = std::fs::read_dir(root.join(dir)) {
            files.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()));
        }
    }
    files.sort();
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for file in files {
        let name = file.strip_prefix(&root).unwrap_or(&file).to_string_lossy().into_owned();
        let contents = std::fs::read(&file).unwrap_or_default();
        for byte in name.bytes().chain(contents) {
            hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// Builds a fresh index of `turns` turns at `path` with durable `add_turn` calls.
///
/// Uses `quick_repair: false` (one fsync per commit instead of two): the file is closed
/// cleanly at the end, so nothing is lost.
pub fn build_index(path: &Path, turns: u32, seed: u64, mut progress: impl FnMut(u32)) -> Result<BuildInfo> {
    let started = Instant::now();
    {
        let gk = Gatekeeper::open(path, Options { quick_repair: false, ..Options::default() })
            .with_context(|| format!("cannot create {}", path.display()))?;
        let session = gk.session(SESSION)?;
        for (expected, turn) in (0..turns).zip(Corpus::new(seed).session(0)) {
            let id = session.add_turn(&turn.user, &turn.assistant)?;
            if id != expected {
                bail!("add_turn returned id {id}, expected {expected}");
            }
            if (id + 1) % 1000 == 0 {
                progress(id + 1);
            }
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    let file_bytes = std::fs::metadata(path)?.len();
    Ok(BuildInfo { turns, seed, seconds, file_bytes })
}

/// A copy of `index` in a fresh temporary directory under [`cache_dir`] (the same file
/// system, so fsync costs what it costs for the real index). The directory is removed on drop.
pub fn working_copy(index: &Path) -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::Builder::new().prefix("work-").tempdir_in(cache_dir()?)?;
    let path = dir.path().join("index.redb");
    std::fs::copy(index, &path).with_context(|| format!("cannot copy {}", index.display()))?;
    Ok((dir, path))
}
