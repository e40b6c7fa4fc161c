//! The text a hook hands the agent: the selection for a prompt with the best turns of the
//! project's other sessions, or, after a compaction, a resume or a clear, the session's
//! requests in order with the selection for the latest one.

use super::given::{Given, request_key, turn_key};
use super::project_of;
use crate::Result;
use crate::{Gatekeeper, SessionInfo};
use crate::{SelectOptions, SelectedBlock};
use std::fmt::Write as _;

/// Most turns of other sessions of the project added to a prompt's context.
pub const OTHER_SESSION_HITS: usize = 3;

/// Hits of the search of the project's other sessions looked at to find
/// [`OTHER_SESSION_HITS`] that bear on the prompt and were not given before. Each distinct
/// session among them costs a judgement of its bearing (`SearchHit::bears`).
const SEARCH_POOL: usize = 16;

/// The share of the budget the prompt's own session may use (the rest is for other sessions,
/// and what the session leaves unused too).
const OWN_SHARE: (u32, u32) = (2, 3);

/// What marks a request not answered yet in the requests list.
const UNANSWERED: &str = " (not answered yet)";

/// The share of a recovery's budget for the requests (the rest is for the latest one's
/// selection, and what the requests leave unused too).
const REQUESTS_SHARE: (u32, u32) = (1, 2);

/// The context handed to the agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The text, ready for the agent.
    pub text: String,
    /// Its estimated tokens (the index's estimator): never above the budget.
    pub tokens: u32,
}

fn share(budget: u32, (num, den): (u32, u32)) -> u32 {
    (u64::from(budget) * u64::from(num) / u64::from(den)).max(1) as u32
}

/// The session's summary, `None` if it has no turn yet: one lookup by name
/// ([`crate::Session::info`]), not a walk of every session.
fn info(gatekeeper: &Gatekeeper, name: &str) -> Result<Option<SessionInfo>> {
    match gatekeeper.session(name)?.info() {
        Ok(info) => Ok(Some(info)),
        Err(e) if e.kind() == crate::ErrorKind::UnknownSession => Ok(None),
        Err(e) => Err(e),
    }
}

fn render_block(out: &mut String, label: &str, block_user: &str, block_assistant: &str) {
    let _ = writeln!(out, "[{label}]");
    if !block_user.is_empty() {
        let _ = writeln!(out, "User: {block_user}");
    }
    if !block_assistant.is_empty() {
        let _ = writeln!(out, "Assistant: {block_assistant}");
    }
    out.push('\n');
}

/// The selection of `session` for `query` as text under `heading`, in at most `budget` tokens.
fn selection_text(
    gatekeeper: &Gatekeeper,
    session: &str,
    query: &str,
    heading: &str,
    budget: u32,
    given: &mut Given,
) -> Result<String> {
    let estimator = gatekeeper.token_estimator();
    let overhead = estimator.estimate(&format!("{heading}\n\n"))
        + estimator.estimate(&crate::prompt::block_framing(u32::MAX));
    if overhead >= budget {
        return Ok(String::new());
    }
    let options =
        SelectOptions { budget: Some(budget - overhead), no_evidence: true, ..SelectOptions::default() };
    let selection = gatekeeper.session(session)?.select_with(query, &options)?;
    let blocks: Vec<&SelectedBlock> = selection.blocks.iter().collect();
    let mut out = String::new();
    let mut out_tokens = 0;
    let mut labels = crate::prompt::BlockLabels::default();
    for block in blocks {
        // A turn this agent session was given (by any event) is not given again.
        if given.has(turn_key(session, block.turn_id)) {
            continue;
        }
        let mut one = String::new();
        let label = labels.label(block.turn_id, block.time.as_deref());
        render_block(&mut one, &label, &block.user, &block.assistant);
        let heading_cost = if out.is_empty() { estimator.estimate(&format!("{heading}\n\n")) } else { 0 };
        if out_tokens + heading_cost + estimator.estimate(&one) > budget {
            continue;
        }
        if out.is_empty() {
            let _ = write!(out, "{heading}\n\n");
        }
        out.push_str(&one);
        given.add(turn_key(session, block.turn_id));
        labels.shown(block.time.as_deref());
        out_tokens = estimator.estimate(&out);
    }
    Ok(out)
}

/// The context for a prompt: this session's selection, then the best turns of other sessions
/// of the project, each labelled with its session and time.
pub(crate) fn for_prompt(
    gatekeeper: &Gatekeeper,
    name: &str,
    prompt: &str,
    budget: u32,
    given: &mut Given,
) -> Result<Option<Context>> {
    let estimator = gatekeeper.token_estimator();
    // The search counts no tokens: done first, it runs while a hook process still loads the
    // encoding (`tokens::Tokenizer::load`), which the selection waits for. Only the project's
    // other sessions are searched: a search of the whole index spent most of its time judging
    // other projects' hits, and its pool held fewer of this project's the larger the index.
    let project = project_of(name);
    let sessions = gatekeeper.sessions()?;
    let others: Vec<&str> = (sessions.iter())
        .filter(|s| s.name != name && project.is_some() && project_of(&s.name) == project)
        .map(|s| s.name.as_str())
        .collect();
    let hits =
        if others.is_empty() { Vec::new() } else { gatekeeper.search_in(prompt, SEARCH_POOL, &others)? };
    let mut text = String::new();
    if info(gatekeeper, name)?.is_some_and(|s| s.turns > 0) {
        text = selection_text(
            gatekeeper,
            name,
            prompt,
            "ctxgate: earlier turns of this session that bear on this prompt (pruned to the relevant sentences):",
            share(budget, OWN_SHARE),
            given,
        )?;
    }
    let heading = "ctxgate: related turns from other sessions of this project (pruned):";
    let mut others = String::new();
    let mut taken = 0;
    let (text_tokens, mut others_tokens) = (estimator.estimate(&text), 0);
    for hit in hits {
        if taken == OTHER_SESSION_HITS {
            break;
        }
        // A turn that shares only everyday words with the prompt is not related (`SearchHit::bears`).
        if hit.session == name || project.is_none() || project_of(&hit.session) != project || !hit.bears {
            continue;
        }
        if given.has(turn_key(&hit.session, hit.turn_id)) {
            continue;
        }
        let session = gatekeeper.session(&hit.session)?;
        let time = match session.turn(hit.turn_id)?.and_then(|t| t.time) {
            Some(time) => time,
            None => session.info()?.time_end.unwrap_or_else(|| "time unknown".into()),
        };
        let id = hit.session.rsplit_once('#').map_or(hit.session.as_str(), |(_, id)| id);
        let mut one = String::new();
        render_block(
            &mut one,
            &format!("session {id} · {time} · turn {}", hit.turn_id),
            &hit.user,
            &hit.assistant,
        );
        let prefix = if others.is_empty() { format!("{heading}\n\n") } else { String::new() };
        let cost = text_tokens + others_tokens + estimator.estimate(&prefix) + estimator.estimate(&one);
        if cost > budget {
            continue;
        }
        others.push_str(&prefix);
        others.push_str(&one);
        given.add(turn_key(&hit.session, hit.turn_id));
        others_tokens = estimator.estimate(&others);
        taken += 1;
    }
    text.push_str(&others);
    Ok(finish(gatekeeper, text))
}

fn finish(gatekeeper: &Gatekeeper, text: String) -> Option<Context> {
    if text.trim().is_empty() {
        return None;
    }
    let tokens = gatekeeper.token_estimator().estimate(&text);
    Some(Context { text, tokens })
}

/// What the agent lost after a compaction, a resume or a clear: the session's requests in
/// order (verbatim; the middle ones left out when they do not fit, the latest and the first
/// kept first) and the selection for the latest one. A session with no turns yet (a clear
/// starts a new one) stands for the project's latest other session. `pending`: the session's
/// last request, not answered yet (held back from the index until its reply is logged): it is
/// a request all the same, the latest. Requests and turns the agent session was given before
/// are not given again.
pub(crate) fn recovery(
    gatekeeper: &Gatekeeper,
    name: &str,
    budget: u32,
    pending: Option<&str>,
    given: &mut Given,
) -> Result<Option<Context>> {
    let estimator = gatekeeper.token_estimator();
    let sessions = gatekeeper.sessions()?;
    let own = sessions.iter().find(|s| s.name == name && (s.turns > 0 || pending.is_some()));
    let project = project_of(name);
    let (target, whose) = match own {
        Some(s) => (s.name.clone(), "this session".to_string()),
        None => match sessions
            .iter()
            .rev()
            .find(|s| s.name != name && s.turns > 0 && project.is_some() && project_of(&s.name) == project)
        {
            Some(s) => {
                let id = s.name.rsplit_once('#').map_or(s.name.as_str(), |(_, id)| id);
                let time = s.time_end.clone().unwrap_or_else(|| "time unknown".into());
                (s.name.clone(), format!("the previous session of this project ({id}, last active {time})"))
            }
            None => return Ok(None),
        },
    };
    let mut requests: Vec<String> = Vec::new();
    if own.is_none_or(|s| s.turns > 0) {
        gatekeeper.session(&target)?.for_each_turn(|turn| {
            if !turn.user.trim().is_empty() {
                requests.push(turn.user);
            }
            Ok(())
        })?;
    }
    if let Some(pending) = pending.filter(|p| !p.trim().is_empty() && own.is_some()) {
        requests.push(format!("{}{UNANSWERED}", pending.trim_end()));
    }
    // A request is the same whether or not it was answered when it was given.
    let key = |r: &str| request_key(&target, r.strip_suffix(UNANSWERED).unwrap_or(r));
    let Some(latest) = requests.last().cloned() else {
        return Ok(None);
    };
    let before = requests.len();
    requests.retain(|r| !given.has(key(r)));
    let mut text = String::new();
    if !requests.is_empty() {
        let whose = match before - requests.len() {
            0 => whose.clone(),
            n => format!("{whose} not given before ({n} given earlier are not repeated)"),
        };
        let kept;
        (text, kept) = requests_text(gatekeeper, &requests, &whose, share(budget, REQUESTS_SHARE));
        for i in kept {
            given.add(key(&requests[i]));
        }
    }
    let rest = budget.saturating_sub(estimator.estimate(&text));
    text.push_str(&selection_text(
        gatekeeper,
        &target,
        &latest,
        &format!("ctxgate: earlier turns of {whose} that bear on the latest request (pruned):"),
        rest,
        given,
    )?);
    Ok(finish(gatekeeper, text))
}

/// The requests in order within `budget`: the latest, the first, then the latest ones before it
/// while they fit; the ones left out are counted where they were. A request too long on its
/// own is cut to fit, marked with "…".
fn requests_text(
    gatekeeper: &Gatekeeper,
    requests: &[String],
    whose: &str,
    budget: u32,
) -> (String, Vec<usize>) {
    let estimator = gatekeeper.token_estimator();
    let heading = format!("ctxgate: the user's requests in {whose}, in order (verbatim):\n\n");
    let entry =
        |i: usize, text: &str| format!("[request {} of {}]\n{}\n\n", i + 1, requests.len(), text.trim_end());
    let gap_note = |n: usize| format!("[{n} requests left out to fit]\n\n");
    // Room for two notes: the kept requests are the first and the latest ones, but a long first
    // one can be left out while later ones fit.
    let mut used = estimator.estimate(&heading) + 2 * estimator.estimate(&gap_note(requests.len()));
    if used >= budget || requests.is_empty() {
        return (String::new(), Vec::new());
    }
    let last = requests.len() - 1;
    let mut kept = vec![false; requests.len()];
    let mut order: Vec<usize> = vec![last];
    if last > 0 {
        order.push(0);
    }
    order.extend((1..last).rev());
    let mut cut: Option<(usize, String)> = None;
    for i in order {
        let cost = estimator.estimate(&entry(i, &requests[i]));
        if used + cost <= budget {
            used += cost;
            kept[i] = true;
        } else if i == last {
            // The latest request is what the agent works on: a cut copy beats none.
            let room = budget - used;
            let mut chars: Vec<char> = requests[i].chars().collect();
            while !chars.is_empty() {
                let candidate: String = chars.iter().collect::<String>() + "…";
                if estimator.estimate(&entry(i, &candidate)) <= room {
                    used += estimator.estimate(&entry(i, &candidate));
                    cut = Some((i, candidate));
                    kept[i] = true;
                    break;
                }
                let drop = (chars.len() / 8).max(1);
                chars.truncate(chars.len() - drop);
            }
        }
    }
    let mut out = heading;
    let mut gap = 0;
    for (i, request) in requests.iter().enumerate() {
        if !kept[i] {
            gap += 1;
            continue;
        }
        if gap > 0 {
            out.push_str(&gap_note(gap));
            gap = 0;
        }
        match &cut {
            Some((j, text)) if *j == i => out.push_str(&entry(i, text)),
            _ => out.push_str(&entry(i, request)),
        }
    }
    if gap > 0 {
        out.push_str(&gap_note(gap));
    }
    (out, (0..requests.len()).filter(|&i| kept[i]).collect())
}
