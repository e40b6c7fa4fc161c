//! Streaming import of the canonical JSONL format, in memory bounded by the batches in flight.
//!
//! Pass 1 reads every line to check it (so a malformed line fails the file before anything is
//! written), counts each session's turns, and checks the file's first turns of each session
//! against what the index holds ([`Continuation`]). Pass 2 reads the file again and hands the
//! new turns to the writer a batch at a time. Per-session counters are the only state kept
//! across lines. The file must not change between the two passes.

use super::batch::{Destination, Writer};
use super::plan::Continuation;
use super::{FileReport, ImportOptions, SessionReport};
use crate::error::Result;
use crate::import::lines::{LineBlocks, ParsedLines, Positions};
use crate::import::tool_evidence::{self, StoredToolOutputs, ToolOutput};
use crate::import::turns::Skipped;
use crate::import::{Format, jsonl};
use crate::index::Index;
use std::collections::HashMap;
use std::path::Path;

/// Imports one canonical JSONL file.
pub(super) fn import(
    index: &Index,
    path: &Path,
    options: &ImportOptions,
    offsets: &mut HashMap<String, usize>,
) -> Result<FileReport> {
    let (forced_session, skip_invalid) = (options.session.as_deref(), options.skip_invalid);
    // Whether a line carries tool results to store as evidence (pass 3 reads them).
    let mut has_results = false;
    // Pass 1: check every line and plan each session.
    let started = std::time::Instant::now();
    let view = index.store().read()?;
    let mut plans: Vec<Continuation> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    let mut positions = Positions::default();
    // The plan of each session `positions` numbers: several share one when `--session` joins
    // them.
    let mut plan_of: Vec<Option<usize>> = Vec::new();
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
            plan_of.resize(positions.sessions(), None);
            let i = match plan_of[slot] {
                Some(i) => i,
                None => {
                    let name = forced_session.unwrap_or(&line.session);
                    let i = match by_name.get(name) {
                        Some(&i) => i,
                        None => {
                            let plan = Continuation::new(index, &view, offsets, name)?;
                            by_name.insert(plan.name.clone(), plans.len());
                            plans.push(plan);
                            plans.len() - 1
                        }
                    };
                    plan_of[slot] = Some(i);
                    i
                }
            };
            has_results |= line.has_results();
            plans[i].observe(&view, path, &line.user, &line.assistant)?;
        }
        if let Some(e) = failed {
            return Err(e.into());
        }
    }
    for plan in &plans {
        if plan.needs_check() {
            // A rare path: the file is read again for this session's turns.
            plan.check(&view, path, session_turns(path, forced_session, &plan.name)?)?;
        }
    }
    drop(view);
    log::debug!(
        "checked {} lines of {} sessions in {:.0} ms",
        plans.iter().map(Continuation::seen).sum::<usize>() + skipped.len(),
        plans.len(),
        started.elapsed().as_secs_f64() * 1e3
    );

    // Pass 2: the new turns, a batch at a time.
    let existing: Vec<usize> = plans.iter().map(Continuation::existing).collect();
    let first_turns: Vec<u32> = plans.iter().map(Continuation::offset).collect();
    let names: Vec<String> = plans.iter().map(|p| p.name.clone()).collect();
    let destinations = (plans.iter().zip(&existing))
        .map(|(plan, &existing)| Destination {
            name: plan.name.clone(),
            title: None,
            first_turn: plan.offset() + existing as u32,
        })
        .collect();
    let plan_of_pass3 = plan_of.clone();
    let lines = ParsedLines::open(path)?;
    let mut seen = vec![0usize; plans.len()];
    // The same lines in the same order: each session gets the number it had in pass 1.
    let mut positions = Positions::default();
    let skip = existing.clone();
    let turns = lines.filter_map(move |item| {
        let (line_no, parsed) = match item {
            Ok(item) => item,
            Err(e) => return Some(Err(e.into())),
        };
        // Pass 1 checked every line: the ones it skipped are skipped again.
        let line = parsed.ok()?;
        let slot = positions.count(path, line_no, &line.session, line.turn).ok()?;
        let i = plan_of.get(slot).copied().flatten()?;
        seen[i] += 1;
        (seen[i] > skip[i]).then(|| Ok((i, jsonl::into_turn(line))))
    });
    let writer =
        Writer::new(index, path, destinations).with_memory(options.memory_bytes).with_until(options.until);
    writer.write_all(turns)?;
    // Pass 3, after the turns (as for every format): the tool results lines carry (`export`
    // writes the stored ones), those of turns already there included. Not for a file cut
    // short: the next import stores them.
    let outputs = if options.evidence && has_results && !writer.cut_short() {
        store_results(index, path, &plan_of_pass3, &names, &first_turns)?
    } else {
        StoredToolOutputs::default()
    };

    let mut sessions = Vec::new();
    for (i, (plan, existing)) in plans.iter().zip(existing).enumerate() {
        let new = if writer.cut_short() { writer.written(i) } else { (plan.seen() - existing) as u64 };
        sessions.push(SessionReport {
            session: plan.name.clone(),
            new_turns: new,
            existing_turns: existing as u64,
            held_back: 0,
            held_back_request: None,
        });
        plan.advance(offsets);
    }
    let file = FileReport::imported(path, Format::Jsonl, None, sessions, skipped, outputs);
    Ok(FileReport { unfinished: writer.cut_short(), ..file })
}

/// Tool results stored per transaction by pass 3: memory bounded by a chunk of them.
const RESULTS_PER_CHUNK: usize = 1024;

/// Stores the tool results of the file's lines as evidence: line after line of the plan
/// `plan_of[slot]`, the first of which is turn `first_turns[plan]` of session `names[plan]`.
fn store_results(
    index: &Index,
    path: &Path,
    plan_of: &[Option<usize>],
    names: &[String],
    first_turns: &[u32],
) -> Result<StoredToolOutputs> {
    let mut positions = Positions::default();
    let mut seen = vec![0u32; names.len()];
    let mut chunk = Vec::new();
    let mut stored = StoredToolOutputs::default();
    let mut flush = |chunk: &mut Vec<ToolOutput>| -> Result<()> {
        let done = crate::evidence::storage::store_tool_outputs(index, chunk)?;
        stored.stored += done.stored;
        stored.failed.extend(done.failed);
        chunk.clear();
        Ok(())
    };
    for item in ParsedLines::open(path)? {
        let (line_no, parsed) = item?;
        // Lines pass 1 skipped are skipped again, and numbered as it numbered them.
        let Ok(line) = parsed else { continue };
        let Ok(slot) = positions.count(path, line_no, &line.session, line.turn) else { continue };
        let Some(i) = plan_of.get(slot).copied().flatten() else { continue };
        let turn_id = first_turns[i].saturating_add(seen[i]);
        seen[i] += 1;
        if line.tools.iter().any(|t| t.result.is_some()) {
            chunk.extend(tool_evidence::outputs_of(&names[i], turn_id, &[jsonl::into_turn(line)]));
            if chunk.len() >= RESULTS_PER_CHUNK {
                flush(&mut chunk)?;
            }
        }
    }
    flush(&mut chunk)?;
    Ok(stored)
}

/// The turns of the file that go to `session`, in order, read again from the file (the lines
/// pass 1 skipped are skipped again).
fn session_turns<'a>(
    path: &'a Path,
    forced_session: Option<&'a str>,
    session: &'a str,
) -> Result<impl Iterator<Item = Result<(String, String)>> + 'a> {
    let mut positions = Positions::default();
    let lines = ParsedLines::open(path)?;
    Ok(lines.filter_map(move |item| {
        let (line_no, parsed) = match item {
            Ok(item) => item,
            Err(e) => return Some(Err(e.into())),
        };
        let line = parsed.ok().filter(|l| positions.count(path, line_no, &l.session, l.turn).is_ok())?;
        (forced_session.unwrap_or(&line.session) == session).then_some(Ok((line.user, line.assistant)))
    }))
}
