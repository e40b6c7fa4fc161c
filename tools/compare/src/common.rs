//! What every engine shares: the run's setup, the corpus file, the queries, the anchors peers
//! index, and how figures are recorded.

use anyhow::{Context, Result, bail};
use corpus::timing::{quantile, time_each, vm_kib};
use corpus::{Corpus, PlacedTurn, TopicId};
use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Named figures of one engine (`bulk.seconds`, `session.warm.p50_ms`, ...).
pub type Figures = BTreeMap<String, f64>;

/// Top-k of every query.
pub const TOP_K: usize = 20;

/// One run's parameters, passed to every child.
#[derive(Debug, Clone)]
pub struct Setup {
    pub turns: u64,
    pub sessions: u32,
    pub samples: usize,
    pub adds: usize,
    pub seed: u64,
    pub dir: PathBuf,
    /// The team layout (`--layout team`): projects × sessions × turns, hook-style names.
    pub team: Option<TeamShape>,
}

/// The shape of a team layout.
#[derive(Debug, Clone, Copy)]
pub struct TeamShape {
    pub projects: u32,
    pub sessions_per_project: u32,
    pub turns_per_session: u32,
}

/// One query of the team layout: a prompt in a session of a project.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The project (the part of session names before `#`).
    pub project: String,
    /// The session the prompt is asked in.
    pub session: String,
    pub prompt: String,
}

impl Setup {
    pub fn to_args(&self) -> Vec<String> {
        vec![
            self.turns.to_string(),
            self.sessions.to_string(),
            self.samples.to_string(),
            self.adds.to_string(),
            self.seed.to_string(),
            self.dir.display().to_string(),
            self.team.map_or(0, |t| t.projects).to_string(),
            self.team.map_or(0, |t| t.sessions_per_project).to_string(),
            self.team.map_or(0, |t| t.turns_per_session).to_string(),
        ]
    }

    pub fn from_args(mut args: impl Iterator<Item = String>) -> Result<Setup> {
        let mut next = |what: &str| args.next().with_context(|| format!("child: {what} missing"));
        Ok(Setup {
            turns: next("turns")?.parse()?,
            sessions: next("sessions")?.parse()?,
            samples: next("samples")?.parse()?,
            adds: next("adds")?.parse()?,
            seed: next("seed")?.parse()?,
            dir: PathBuf::from(next("dir")?),
            team: match [next("projects")?.parse()?, next("sessions")?.parse()?, next("turns")?.parse()?] {
                [0, _, _] => None,
                [projects, sessions_per_project, turns_per_session] => {
                    Some(TeamShape { projects, sessions_per_project, turns_per_session })
                }
            },
        })
    }

    /// The team layout's generator, if this run has one.
    pub fn team(&self) -> Option<corpus::team::Team> {
        let t = self.team?;
        Some(corpus::team::Team::new(self.corpus(), t.projects, t.sessions_per_project, t.turns_per_session))
    }

    /// The team layout's queries: `samples` prompts, rotating over the projects and, within
    /// each, over its sessions.
    pub fn samples(&self) -> Result<Vec<Sample>> {
        let team = self.team().context("the samples of a run without a team layout")?;
        Ok((0..self.samples)
            .map(|i| {
                let p = (i as u32) % team.projects();
                let s = (i as u32 / team.projects()) % team.sessions_per_project();
                Sample {
                    project: team.project_path(p),
                    session: team.session_name(p, s),
                    prompt: team.prompt(p, i as u64),
                }
            })
            .collect())
    }

    pub fn corpus(&self) -> Corpus {
        Corpus::new(self.seed)
    }

    /// The long session is the last one (its own generator stream, like every session).
    pub fn long_session(&self) -> u32 {
        self.sessions - 1
    }

    pub fn long_name(&self) -> String {
        corpus::session_name(self.long_session())
    }

    /// Half the turns, in the long session.
    pub fn long_turns(&self) -> u64 {
        self.turns / 2
    }

    pub fn corpus_path(&self) -> PathBuf {
        self.dir.join("corpus.jsonl")
    }

    /// Writes the corpus file; returns the bytes of turn text in it.
    pub fn write_corpus(&self) -> Result<u64> {
        let path = self.corpus_path();
        let file =
            std::fs::File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = BufWriter::new(file);
        if let Some(team) = self.team() {
            let bytes = team.write_jsonl(&mut out)?;
            out.flush()?;
            return Ok(bytes);
        }
        // The short sessions (spread over sessions 0..S-1), then the long one.
        let corpus = self.corpus();
        let short = self.turns - self.long_turns();
        let mut bytes =
            corpus::jsonl::write(&mut out, corpus.spread(short, self.sessions - 1), corpus::session_name)?;
        let long = self.long_session();
        let long_turns = corpus.session(long).take(self.long_turns() as usize).enumerate();
        let long_turns =
            long_turns.map(|(turn, content)| PlacedTurn { session: long, turn: turn as u32, content });
        bytes += corpus::jsonl::write(&mut out, long_turns, corpus::session_name)?;
        out.flush()?;
        Ok(bytes)
    }

    /// Reads the corpus file in chunks of [`FEED_CHUNK`] lines, each parsed on the rayon pool:
    /// how a peer that indexes from many threads is fed.
    pub fn for_each_chunk(
        &self,
        mut f: impl FnMut(Vec<ctxgate::import::CanonicalLine>) -> Result<()>,
    ) -> Result<()> {
        use rayon::prelude::*;
        let path = self.corpus_path();
        let file = std::fs::File::open(&path).with_context(|| format!("cannot open {}", path.display()))?;
        let mut lines = std::io::BufReader::with_capacity(1 << 20, file).lines();
        loop {
            let raw: Vec<String> = lines.by_ref().take(FEED_CHUNK).collect::<std::io::Result<_>>()?;
            if raw.is_empty() {
                return Ok(());
            }
            let parsed: Vec<ctxgate::import::CanonicalLine> =
                raw.par_iter().map(|line| serde_json::from_str(line)).collect::<Result<_, _>>()?;
            f(parsed)?;
        }
    }

    /// The queries: follow-up questions rotating over every topic, `samples` of them.
    pub fn queries(&self) -> Vec<String> {
        let corpus = self.corpus();
        let topics: Vec<TopicId> = TopicId::all().collect();
        (0..self.samples)
            .map(|i| corpus.query_for(topics[i % topics.len()], (i / topics.len()) as u64))
            .collect()
    }

    /// The turns durable adds append to the long session, after its last one.
    pub fn upcoming(&self) -> impl Iterator<Item = corpus::Turn> {
        self.corpus().session(self.long_session()).skip(self.long_turns() as usize).take(self.adds)
    }
}

/// Lines a parallel feed parses and indexes at a time.
pub const FEED_CHUNK: usize = 4096;

/// `compare child extract anchors`: the corpus read, parsed and its anchors extracted on the
/// rayon pool, nothing indexed: the floor under every engine's bulk import here, since all of
/// them index ctxgate's anchors.
pub fn extract_only(setup: &Setup) -> Result<Figures> {
    use rayon::prelude::*;
    let started = std::time::Instant::now();
    let mut turns = 0u64;
    let mut anchors = 0u64;
    setup.for_each_chunk(|lines| {
        turns += lines.len() as u64;
        anchors += lines
            .par_iter()
            .map(|line| {
                let mut n = 0u64;
                turn_anchors(&line.user, &line.assistant, |_| n += 1);
                n
            })
            .sum::<u64>();
        Ok(())
    })?;
    let mut figures = Figures::new();
    figures.insert("extract.seconds".into(), started.elapsed().as_secs_f64());
    figures.insert("extract.turns".into(), turns as f64);
    figures.insert("extract.anchors".into(), anchors as f64);
    record_peak_rss(&mut figures, "extract.peak_rss_kib");
    Ok(figures)
}

/// The anchors of a turn as ctxgate indexes them (user and assistant extracted apart), each
/// repeated as often as it occurs.
pub fn turn_anchors(user: &str, assistant: &str, mut emit: impl FnMut(&str)) {
    for side in [user, assistant] {
        for (anchor, tf) in ctxgate::anchor::extract(side).entries() {
            for _ in 0..*tf {
                emit(anchor);
            }
        }
    }
}

/// The distinct anchors of a query (ctxgate's fallback anchor if it has none).
pub fn query_anchors(query: &str) -> Vec<String> {
    let counts = ctxgate::anchor::extract(query);
    if counts.is_empty() {
        return ctxgate::anchor::fallback_anchor(query).into_iter().collect();
    }
    counts.anchors().map(str::to_string).collect()
}

/// Records p50 and p99 of `times` under `name`.
pub fn record(figures: &mut Figures, name: &str, times: &[Duration]) {
    figures.insert(format!("{name}.p50_ms"), quantile(times, 0.5).as_secs_f64() * 1e3);
    figures.insert(format!("{name}.p99_ms"), quantile(times, 0.99).as_secs_f64() * 1e3);
}

/// Times `queries` against a freshly opened engine (`reopen`: every query once, first touch in
/// this handle), then again after one untimed pass over them all (`warm`).
pub fn cold_then_warm<H, Q>(
    figures: &mut Figures,
    name: &str,
    queries: &[Q],
    open: impl FnOnce() -> Result<H>,
    mut run: impl FnMut(&H, &Q) -> Result<usize>,
) -> Result<()> {
    let handle = open()?;
    let mut hits = 0usize;
    let cold = time_each(queries.len(), |i| {
        hits += run(&handle, &queries[i])?;
        Ok(())
    })?;
    for query in queries {
        run(&handle, query)?;
    }
    let warm = time_each(queries.len(), |i| {
        run(&handle, &queries[i])?;
        Ok(())
    })?;
    if hits == 0 {
        bail!("{name}: no query found anything");
    }
    figures.insert(format!("{name}.hits"), hits as f64 / queries.len() as f64);
    record(figures, &format!("{name}.reopen"), &cold);
    record(figures, &format!("{name}.warm"), &warm);
    Ok(())
}

/// Peak resident set size of this process so far, in KiB, under `name`.
pub fn record_peak_rss(figures: &mut Figures, name: &str) {
    if let Some(kib) = vm_kib("VmHWM") {
        figures.insert(name.to_string(), kib as f64);
    }
}

/// Bytes of every file under `path` (a file or a directory).
pub fn disk_bytes(path: &Path) -> Result<u64> {
    Ok(file_bytes(path)?.0)
}

/// The bytes the disk holds for a file or a directory tree: its allocated blocks. redb grows
/// its file by doubling and leaves the growth unwritten (a sparse file), so the length says
/// more than `du`.
pub fn allocated_bytes(path: &Path) -> Result<u64> {
    Ok(file_bytes(path)?.1)
}

/// (length, allocated bytes) of a file, or summed over a directory tree.
fn file_bytes(path: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| format!("cannot stat {}", path.display()))?;
    if !meta.is_dir() {
        return Ok((meta.len(), meta.blocks() * 512));
    }
    let (mut length, mut allocated) = (0, 0);
    for entry in std::fs::read_dir(path)? {
        let (l, a) = file_bytes(&entry?.path())?;
        length += l;
        allocated += a;
    }
    Ok((length, allocated))
}
