//! Claude Code session JSONL (DESIGN §8.3): one record per line, `{type, uuid,
//! parentUuid, sessionId, timestamp, isSidechain, message: {role, content}}`.
//!
//! Only `user` and `assistant` records carry turns; `system`, `summary`, `progress`,
//! `file-history-snapshot`, `queue-operation` and the other bookkeeping types are dropped.
//! `message.content` is a string or blocks: `text` is turn text, `thinking` is not, `tool_use`
//! is a tool call and a user record's `tool_result` blocks are its result (not user text); a
//! failed result (`is_error`) marks its call failed, and the words a user typed when rejecting
//! a call are added to the user text of the call's turn.
//!
//! Records form a tree through `parentUuid` (across a compaction, `logicalParentUuid`): a
//! rewind re-sends a message from an earlier point and forks it. Only the active branch is
//! read: each session's last message back to its root, in that order, never the file's
//! (Claude Code can write a reply before the prompt it answers). Results of calls on it are
//! read wherever they sit. Messages at a session's end whose parent is not in the file yet (a
//! reply written before its prompt) wait for it, off the branch. A tree that cannot be followed
//! otherwise (a parent not in the file, a cycle), or records that name no parent at all, are
//! read in file order. A record repeating an earlier
//! `uuid` is read once.
//!
//! Dropped as well: sidechain records (`isSidechain: true`, subagent traffic), harness records
//! (`isMeta: true`, the summary after a compaction `isCompactSummary: true`, assistant messages
//! the harness wrote itself: model `<synthetic>` or `isApiErrorMessage`), and harness text in
//! user text: `<system-reminder>` blocks anywhere, whole `<tag>…</tag>` blocks at its start or
//! end whose tag has a `-` or `_` (`<command-name>`, `<local-command-stdout>`,
//! `<local-command-caveat>`, `<ide_opened_file>`, …) and the `[Request interrupted by user…]`
//! marker. A file may hold
//! several sessions: one conversation per `sessionId`, in order of first appearance; records
//! without one belong to the session the file is named after (its stem: Claude Code names each
//! file by its session id). A turn's time is its first record's `timestamp`.

use super::error::Error;
use super::records::{self, json_text, opt_str, req_object, req_str};
use super::turns::{Carry, Conversation, LiveLog, ParsedFile, Role, TurnBuilder};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The marker Claude Code writes as user text when the person interrupts a reply.
const INTERRUPTED: &str = "[Request interrupted by user";

/// The line of a rejected call's result after which the person's own words follow.
const REJECTION_SAID: &str = "the user said:";

/// A paragraph Claude Code appends to a rejection, after the person's words.
const REJECTION_NOTE: &str = "\n\nNote: The user's next message may contain a correction";

/// Parses a whole session file.
pub(crate) fn parse(path: &Path, text: &str, skip_invalid: bool) -> Result<ParsedFile, Error> {
    parse_from(path, text, skip_invalid, None)
}

/// Parses a session file, or with `resumed` the part of one that starts at the record that
/// began one of its turns (`text` is that part; `resumed`, what the parse of the whole file
/// said of its start). The part's first record is where its tree meets the records before it:
/// a branch that ends anywhere else (another root, a parent not in the part, a record repeated
/// from before the part) makes the result unsure.
pub(crate) fn parse_from(
    path: &Path,
    text: &str,
    skip_invalid: bool,
    resumed: Option<&Carry>,
) -> Result<ParsedFile, Error> {
    let mut parsed = ParsedFile::default();
    let base = text.as_ptr() as usize;
    let mut nodes =
        records::convert(path, records::lines(text), skip_invalid, &mut parsed.skipped, |v, r| {
            node(v, r.text.as_ptr() as usize - base)
        })?;
    let mut seen = HashSet::new();
    nodes.retain(|n| n.uuid.as_ref().is_none_or(|uuid| seen.insert(uuid.clone())));
    let Branches { active, trees, order } = active_branches(&nodes, resumed.is_some());
    // A record repeated from before a part is found only in a tree; in file order it would be
    // read twice.
    let repeatable = nodes.iter().any(|n| n.is_message && n.uuid.is_some());
    let stem = records::name_from_file(
        &path.file_stem().map_or_else(|| "import".into(), |s| s.to_string_lossy().into_owned()),
    );
    let mut sessions: Vec<(String, TurnBuilder)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // Sessions in order of first appearance in the file; their records in reading order.
    for node in nodes.iter().filter(|n| n.row.is_some()) {
        let session = node.session.clone().unwrap_or_else(|| stem.clone());
        index.entry(session.clone()).or_insert_with(|| {
            sessions.push((session, TurnBuilder::new()));
            sessions.len() - 1
        });
    }
    let mut nodes: Vec<Option<(Node, bool)>> = nodes.into_iter().zip(active).map(Some).collect();
    for at in order {
        let Some((node, on_branch)) = nodes.get_mut(at).and_then(Option::take) else { continue };
        let Some(row) = node.row else { continue };
        let session = node.session.unwrap_or_else(|| stem.clone());
        let Some(&i) = index.get(&session) else { continue };
        let b = &mut sessions[i].1;
        b.at(node.offset);
        let time = row.time.as_deref();
        for item in row.items {
            match item {
                Item::Text(text) if on_branch => b.message(row.role, &text, time),
                Item::Call { name, id, arguments } if on_branch => {
                    b.tool_call(&name, id.as_deref(), &arguments, time)
                }
                // A result off the branch still answers a call on it (parallel calls' results
                // may sit on sibling records); one with no id could answer any call.
                Item::Result { id, text, failed, said } if on_branch || id.is_some() => {
                    if failed {
                        b.tool_error(id.as_deref(), &text);
                    } else {
                        b.tool_result(id.as_deref(), &text);
                    }
                    if on_branch && let Some(words) = said {
                        b.user_words_in_turn(&words, time);
                    }
                }
                _ => {}
            }
        }
    }
    let single = sessions.len() == 1;
    for (key, b) in sessions {
        let built = b.finish_with_starts();
        if single {
            // Records with and without `sessionId` feeding one conversation are two trees read
            // as one: never resumed.
            let tree = match (trees.get(&Some(key.clone())), trees.get(&None)) {
                (Some(_), Some(_)) => Tree::Broken,
                (Some(&tree), None) | (None, Some(&tree)) => tree,
                (None, None) => Tree::Unlinked,
            };
            let unsure = match resumed {
                // Read again from a turn: the part must be read as the whole file would be.
                Some(carry) => {
                    let before = if carry.flag { Tree::Followed } else { Tree::Unlinked };
                    built.loose > 0 || key != carry.key || tree != before
                }
                // A tree that cannot be followed is read in file order, which a record added
                // later may change: such a file is always read whole. So is one whose records
                // have ids but name no parents.
                None => tree == Tree::Broken || (tree == Tree::Unlinked && repeatable),
            };
            let carry = Carry { key: key.clone(), flag: tree == Tree::Followed };
            parsed.live = Some(LiveLog { starts: built.starts, carry, unsure });
        }
        records::push(&mut parsed.conversations, Conversation { key, title: None, turns: built.turns });
    }
    Ok(parsed)
}

/// A record: its place in the tree and, for a user or assistant record, its content.
struct Node {
    /// Where its record starts in the text.
    offset: usize,
    uuid: Option<String>,
    /// `parentUuid`, or `logicalParentUuid` where that is null (a compaction's boundary).
    parent: Option<String>,
    session: Option<String>,
    /// A user or assistant record of the main conversation (not a sidechain's).
    is_message: bool,
    /// Its turn content, checked before anything is applied; `None` for a record without any.
    row: Option<Row>,
}

/// A user or assistant record that carries turn content.
struct Row {
    role: Role,
    time: Option<String>,
    items: Vec<Item>,
}

/// What a record contributes.
enum Item {
    Text(String),
    Call {
        name: String,
        id: Option<String>,
        arguments: String,
    },
    /// A tool result; `said`: the words the person typed when rejecting the call.
    Result {
        id: Option<String>,
        text: String,
        failed: bool,
        said: Option<String>,
    },
}

/// A string field used to link records; any other value is no link.
fn link(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()).map(str::to_string)
}

/// The record's place in the tree and its content.
fn node(v: &Value, offset: usize) -> Result<Node, String> {
    records::object(v, "", "a JSON object with `type`")?;
    let kind = req_str(v, "", "type")?;
    let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
    let mut node = Node {
        offset,
        uuid: link(v, "uuid"),
        parent: link(v, "parentUuid").or_else(|| link(v, "logicalParentUuid")),
        session: None,
        is_message: matches!(kind, "user" | "assistant") && !flag("isSidechain"),
        row: None,
    };
    if node.is_message {
        node.session = match v.get("sessionId") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s.trim().is_empty() => None,
            Some(Value::String(s)) => Some(records::session_name(s, "sessionId")?),
            Some(_) => return Err("`sessionId` must be a string".into()),
        };
        node.row = row(v, kind)?;
    }
    Ok(node)
}

/// The content of a main-conversation user or assistant record, or `None` for one that is
/// the harness's.
fn row(v: &Value, kind: &str) -> Result<Option<Row>, String> {
    let flag = |key: &str| v.get(key).and_then(Value::as_bool).unwrap_or(false);
    let role = if kind == "user" { Role::User } else { Role::Assistant };
    if role == Role::User && (flag("isMeta") || flag("isCompactSummary")) {
        return Ok(None);
    }
    let time = opt_str(v, "", "timestamp")?.map(str::to_string);
    let message = req_object(v, "", "message")?;
    if role == Role::Assistant
        && (flag("isApiErrorMessage") || message.get("model").and_then(Value::as_str) == Some("<synthetic>"))
    {
        return Ok(None);
    }
    let mut items = Vec::new();
    match message.get("content") {
        Some(Value::String(text)) => items.push(Item::Text(text.clone())),
        Some(Value::Array(blocks)) => {
            for (j, block) in blocks.iter().enumerate() {
                let at = format!("message.content[{j}]");
                records::object(block, &at, "an object with `type`")?;
                match req_str(block, &at, "type")? {
                    "text" => {
                        items.push(Item::Text(opt_str(block, &at, "text")?.unwrap_or_default().to_string()))
                    }
                    "tool_use" => items.push(Item::Call {
                        name: req_str(block, &at, "name")?.to_string(),
                        id: opt_str(block, &at, "id")?.map(str::to_string),
                        arguments: block.get("input").map(json_text).unwrap_or_default(),
                    }),
                    "tool_result" => {
                        let text = block.get("content").map(records::block_text).unwrap_or_default();
                        let failed = block.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                        items.push(Item::Result {
                            id: opt_str(block, &at, "tool_use_id")?.map(str::to_string),
                            said: if failed { rejection_words(&text) } else { None },
                            text,
                            failed,
                        })
                    }
                    _ => {} // thinking, redacted_thinking, image, document
                }
            }
        }
        None | Some(Value::Null) => return Err("missing `message.content`".into()),
        Some(_) => return Err("`message.content` must be a string or an array of blocks".into()),
    }
    if role == Role::User {
        for item in &mut items {
            if let Item::Text(text) = item {
                *text = without_harness_text(text);
            }
        }
    }
    Ok(Some(Row { role, time, items }))
}

/// How a session's records were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tree {
    /// Its messages name no parent: read in file order.
    Unlinked,
    /// Its active branch was followed from its last message to a root (or to `joint`).
    Followed,
    /// The chain met a parent the text does not have, or a cycle: read in file order.
    Broken,
}

/// The nodes' branches: for each node whether it is on its session's active branch, each
/// session's tree, and the order to read the nodes in.
struct Branches {
    /// Per node: on its session's active branch.
    active: Vec<bool>,
    trees: HashMap<Option<String>, Tree>,
    /// The node indices in reading order: a followed session's branch from its root, each
    /// record off it after the nearest of its ancestors on it (else after the branch record
    /// before it in the file); other sessions in file order.
    order: Vec<usize>,
}

/// For each node, whether it is on its session's active branch: the chain from the session's
/// last message back through its parents. The last message is the file's last one of the
/// session, followed down to its latest descendant message: Claude Code can write a reply
/// before the prompt it answers, and the chain, not the file, says which came first. Nodes
/// without a `uuid`, and every node of a session whose chain cannot be followed or whose
/// messages name no parent at all, count as on it.
/// In a `part` of a file (read from a turn's first record), a chain ends at the part's first
/// node as at a root, and only there: one that ends anywhere else is broken, since the records
/// before the part may continue it.
fn active_branches(nodes: &[Node], part: bool) -> Branches {
    let by_uuid: HashMap<&str, usize> =
        nodes.iter().enumerate().filter_map(|(i, n)| Some((n.uuid.as_deref()?, i))).collect();
    let parent_of = |i: usize| nodes[i].parent.as_deref().and_then(|p| by_uuid.get(p).copied());
    let mut children: HashMap<usize, Vec<usize>> = HashMap::new();
    for i in 0..nodes.len() {
        if let Some(p) = parent_of(i) {
            children.entry(p).or_default().push(i);
        }
    }
    // Per session, its messages with ids in file order.
    let mut messages: HashMap<Option<&str>, Vec<usize>> = HashMap::new();
    // Sessions some of whose messages name a parent: in the others there is no tree to follow.
    let mut linked: HashSet<Option<&str>> = HashSet::new();
    for (i, n) in nodes.iter().enumerate() {
        if n.is_message && n.uuid.is_some() {
            messages.entry(n.session.as_deref()).or_default().push(i);
            if n.parent.is_some() {
                linked.insert(n.session.as_deref());
            }
        }
    }
    // A parent the text does not have yet: a reply written before its prompt, the prompt still
    // to come. In a whole read, the messages at the session's end whose parent is missing wait
    // for it (off the branch) when every other message's parent is there; reading them in
    // file order would pair the reply with the turn before, and the next read would differ.
    let dangling = |i: usize| nodes[i].parent.is_some() && parent_of(i).is_none();
    let mut leaves: HashMap<Option<&str>, usize> = HashMap::new();
    for (&session, list) in &messages {
        let mut end = list.len();
        if !part {
            while end > 0 && dangling(list[end - 1]) {
                end -= 1;
            }
            if end == 0 || list[..end].iter().any(|&i| dangling(i)) {
                end = list.len();
            }
        }
        leaves.insert(session, list[end - 1]);
    }
    let mut trees: HashMap<Option<String>, Tree> = (leaves.keys())
        .filter(|s| !linked.contains(*s))
        .map(|s| (s.map(str::to_string), Tree::Unlinked))
        .collect();
    leaves.retain(|session, _| linked.contains(session));
    // Per session: the nodes of its branch from its root, or `None` when the tree cannot be
    // followed.
    let mut branches: HashMap<Option<&str>, Option<Vec<usize>>> = HashMap::new();
    for (session, last) in leaves {
        let leaf = latest_descendant(nodes, &children, last, session);
        let mut chain = Vec::new();
        let mut on_chain = HashSet::new();
        let mut at = leaf;
        let followed = loop {
            if !on_chain.insert(at) {
                break false; // a cycle
            }
            chain.push(at);
            match parent_of(at) {
                Some(next) => at = next,
                // A part's chain meets the records before it at its first node only.
                None if part => break at == 0,
                // A parent the text does not have breaks the tree; no parent is its root.
                None => break nodes[at].parent.is_none(),
            }
        };
        chain.reverse();
        trees.insert(session.map(str::to_string), if followed { Tree::Followed } else { Tree::Broken });
        branches.insert(session, followed.then_some(chain));
    }
    let mut position: HashMap<usize, usize> = HashMap::new();
    for chain in branches.values().flatten() {
        position.extend(chain.iter().enumerate().map(|(k, &i)| (i, k)));
    }
    let active = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            n.uuid.is_none()
                || match branches.get(&n.session.as_deref()) {
                    Some(Some(_)) => position.contains_key(&i),
                    _ => true,
                }
        })
        .collect();
    // Reading order keys: (branch position, 0) on a branch, (position of the record it follows,
    // 1) off it; file order elsewhere. The sort is stable: ties keep file order.
    let mut last_on_branch: HashMap<Option<&str>, i64> = HashMap::new();
    let keys: Vec<(i64, u8)> = (0..nodes.len())
        .map(|i| {
            let session = nodes[i].session.as_deref();
            if !matches!(branches.get(&session), Some(Some(_))) {
                return (i as i64, 0);
            }
            if let Some(&k) = position.get(&i) {
                last_on_branch.insert(session, k as i64);
                return (k as i64, 0);
            }
            let mut seen = HashSet::new();
            let mut at = parent_of(i);
            while let Some(a) = at.filter(|a| seen.insert(*a)) {
                if let Some(&k) = position.get(&a) {
                    return (k as i64, 1);
                }
                at = parent_of(a);
            }
            (last_on_branch.get(&session).copied().unwrap_or(-1), 1)
        })
        .collect();
    let mut order: Vec<usize> = (0..nodes.len()).collect();
    order.sort_by_key(|&i| keys[i]);
    Branches { active, trees, order }
}

/// The latest message of `session` below `node` (or `node` itself): down through the children,
/// the latest message child of the session first, else the latest child of another kind.
fn latest_descendant(
    nodes: &[Node],
    children: &HashMap<usize, Vec<usize>>,
    node: usize,
    session: Option<&str>,
) -> usize {
    let is_own =
        |i: usize| nodes[i].is_message && nodes[i].uuid.is_some() && nodes[i].session.as_deref() == session;
    let (mut at, mut latest) = (node, node);
    let mut seen = HashSet::from([node]);
    loop {
        let kids = children.get(&at).map(Vec::as_slice).unwrap_or_default();
        let next = kids
            .iter()
            .rev()
            .find(|&&c| is_own(c))
            .or_else(|| kids.iter().rev().find(|&&c| !nodes[c].is_message));
        match next {
            Some(&c) if seen.insert(c) => {
                at = c;
                if is_own(c) {
                    latest = c;
                }
            }
            _ => return latest,
        }
    }
}

/// The tag of the reminders the harness adds to user text, wherever they sit in it.
const REMINDER: &str = "system-reminder";

/// User text without what the harness wraps around it or writes in its place.
fn without_harness_text(text: &str) -> String {
    let text = without_blocks(text, REMINDER);
    let mut rest = text.trim();
    loop {
        if let Some(after) = leading_tag_block(rest) {
            rest = after.trim();
        } else if let Some(before) = trailing_tag_block(rest) {
            rest = before.trim();
        } else {
            break;
        }
    }
    if rest.starts_with(INTERRUPTED) && rest.ends_with(']') && !rest.contains('\n') {
        return String::new();
    }
    rest.to_string()
}

/// `text` without its whole `<tag …>…</tag>` blocks (an unclosed one is kept).
fn without_blocks(text: &str, tag: &str) -> String {
    let (open, close) = (format!("<{tag}"), format!("</{tag}>"));
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(&open) {
        let after = &rest[at + open.len()..];
        let end =
            after.starts_with(|c: char| c == '>' || c.is_whitespace()).then(|| after.find(&close)).flatten();
        let Some(end) = end else {
            out.push_str(&rest[..at + open.len()]);
            rest = after;
            continue;
        };
        out.push_str(&rest[..at]);
        rest = &after[end + close.len()..];
    }
    out.push_str(rest);
    out
}

/// Whether a tag name is one the harness uses: lower-case ASCII words joined by `-` or `_`
/// (`system-reminder`, `local-command-stdout`, `ide_opened_file`), never an HTML element.
fn is_harness_tag(name: &str) -> bool {
    let words: Vec<&str> = name.split(['-', '_']).collect();
    words.len() > 1
        && words
            .iter()
            .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()))
        && name.starts_with(|c: char| c.is_ascii_lowercase())
}

/// The text after a whole harness `<tag …>…</tag>` block it starts with.
fn leading_tag_block(text: &str) -> Option<&str> {
    let rest = text.strip_prefix('<')?;
    let name_end = rest.find(|c: char| c == '>' || c.is_whitespace())?;
    let name = &rest[..name_end];
    if !is_harness_tag(name) {
        return None;
    }
    let open_end = rest.find('>')? + 1;
    let close = format!("</{name}>");
    let body_end = rest[open_end..].find(&close)? + open_end;
    Some(&rest[body_end + close.len()..])
}

/// The text before a whole harness `<tag …>…</tag>` block it ends with.
fn trailing_tag_block(text: &str) -> Option<&str> {
    let before_close = text.strip_suffix('>')?;
    let close_start = before_close.rfind("</")?;
    let name = &before_close[close_start + 2..];
    if !is_harness_tag(name) {
        return None;
    }
    let head = &text[..close_start];
    let open = format!("<{name}");
    let mut search = head.len();
    while let Some(at) = head[..search].rfind(&open) {
        let after = &head[at + open.len()..];
        if after.starts_with(|c: char| c == '>' || c.is_whitespace()) {
            return Some(&text[..at]);
        }
        search = at;
    }
    None
}

/// The words a person typed when rejecting a tool call: what follows Claude Code's "…the user
/// said:" line in the failed result, without the note it appends.
fn rejection_words(result: &str) -> Option<String> {
    let (_, said) = result.split_once(REJECTION_SAID)?;
    let said = said.split(REJECTION_NOTE).next().unwrap_or_default();
    let said = without_harness_text(said);
    (!said.is_empty()).then_some(said)
}

#[cfg(test)]
mod tests {
    use super::super::records::fixtures::{assert_absent, counts, expected, keys, read, tools};
    use super::super::turns::Skipped;
    use super::*;

    const S1: &str = "3f6a2b1c-8d4e-4f5a-9b6c-7d8e9f0a1b2c";
    const S2: &str = "b7c8d9e0-1f2a-4b3c-8d4e-5f6a7b8c9d0e";

    #[test]
    fn turns_tools_and_what_is_dropped() {
        let (path, text) = read("fixtures/import/claude-code/session.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), [S1, S2], "one conversation per sessionId, in order of appearance");
        assert_eq!(counts(&parsed), [5, 2]);
        let main = &parsed.conversations[0].turns;
        assert_eq!(main[0].user, "The `parse_duration` tests fail on CI but pass locally. Can you look? 🤔");
        assert_eq!(main[0].time.as_deref(), Some("2025-06-14T09:00:05.185Z"));
        assert!(
            main[0].assistant.starts_with(
                "I'll run the failing test first.\n\n[tool: Bash (failed)]\n\n[tool: Read]\n\n`split_units(s).rev()`"
            ),
            "{}",
            main[0].assistant
        );
        let bash = &main[0].tools[0];
        assert_eq!((bash.name.as_str(), bash.call_id.as_deref()), ("Bash", Some("toolu_01AbCdEf")));
        assert!(bash.arguments.contains("cargo test parse_duration"));
        assert!(bash.result.as_deref().unwrap().starts_with("running 3 tests\n"));
        assert_eq!(tools(&main[0])[1], ("Read", Some("toolu_01GhIjKl"), 156));
        // The subagent's own traffic stays out; its answer is the Task call's result.
        assert_eq!(main[1].user, "Fix it, and add a test for \"1h30m\".");
        let found = "Found 2 callers: src/config.rs:88 and src/cli.rs:142.";
        assert_eq!(
            tools(&main[1]),
            [("Task", Some("toolu_01MnOpQr"), found.len() as u64), ("Edit", Some("toolu_01StUvWx"), 189)]
        );
        // After the compaction: the summary is no user turn.
        assert_eq!(main[2].user, "Now run clippy and commit. コミットメッセージは日本語でお願いします。");
        assert_eq!(main[2].assistant.matches("[tool: Bash]").count(), 2);
        let last = main.last().unwrap();
        assert_eq!(
            (last.user.as_str(), last.assistant.as_str()),
            (
                "Push it to a fix/duration branch.",
                "Pushing.\n\n[tool: Bash]\n\nPushed to origin/fix/duration. 🚀"
            )
        );
        let resumed = &parsed.conversations[1].turns;
        assert_eq!(resumed[0].user, "Does `parse_duration` handle negative values?");
        assert_eq!(resumed[1].user, "Should it accept \"0\" without a unit?");
        assert!(resumed[1].assistant.starts_with("Yes: \"0\" is unambiguous"));
        assert_absent(
            &parsed,
            &[
                "HIDDEN-THINKING",
                "SIDECHAIN-ONLY",
                "let ttl = parse_duration",
                "output_mode",
                "COMPACT-SUMMARY",
                "being continued from a previous conversation",
                "<command-name>",
                "<local-command-stdout>",
                "cost is unavailable",
                "Caveat: The messages below",
                "Conversation compacted",
                "Fix parse_duration unit order on CI",
                "Compiling ctxgate-demo",
                "Auto-update failed",
            ],
        );
    }

    #[test]
    fn bad_content_fails_the_file_or_is_skipped() {
        let name = "fixtures/import/claude-code/bad_content.jsonl";
        let (path, text) = read(name);
        assert_eq!(parse(&path, &text, false).unwrap_err().to_string(), expected(name));
        let parsed = parse(&path, &text, true).unwrap();
        assert_eq!(keys(&parsed), [S1]);
        let reason = "`message.content` must be a string or an array of blocks";
        assert_eq!(parsed.skipped, [Skipped { line: 4, reason: reason.into() }]);
        assert_eq!(
            parsed.conversations[0].turns[0].assistant,
            "I'll run the failing test first.\n\nI could not read that message."
        );
    }

    #[test]
    fn bad_records_name_the_field() {
        let rows = [
            (r#"{"type":"user","sessionId":7,"message":{"content":"hi"}}"#, "`sessionId` must be a string"),
            (
                r#"{"type":"user","sessionId":"a\u0007b","message":{"content":"hi"}}"#,
                "`sessionId` cannot be a session name: it contains control characters",
            ),
            (r#"{"type":"user","sessionId":"s"}"#, "missing `message`"),
            (
                r#"{"type":"assistant","sessionId":"s","message":{"content":[{"type":"tool_use","id":"t"}]}}"#,
                "missing `message.content[0].name`",
            ),
            (
                r#"{"type":"assistant","sessionId":"s","message":{"content":["hi"]}}"#,
                "`message.content[0]` must be an object with `type`",
            ),
            (r#"{"sessionId":"s"}"#, "missing `type`"),
        ];
        for (row, what) in rows {
            let err = parse(Path::new("s.jsonl"), &format!("\n{row}\n"), false).unwrap_err();
            assert_eq!(err.to_string(), format!("s.jsonl:2: {what}"), "for {row}");
        }
        // Rows that carry no turn are not checked.
        let quiet = r#"{"type":"user","isSidechain":true}
{"type":"progress"}
{"type":"user","isMeta":true,"sessionId":"s"}"#;
        assert_eq!(parse(Path::new("s.jsonl"), quiet, false).unwrap(), ParsedFile::default());
    }

    /// Issue 22, findings 3, 5 and 6: the branch a rewind abandoned, harness rows and text, a
    /// repeated record and a rejection's words.
    #[test]
    fn r22_the_active_branch_without_harness_text() {
        let (path, text) = read("fixtures/import/claude-code/rewind.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["5b0c3e1a-7d2f-4c8e-9a1b-3e4f5a6b7c8d"]);
        let turns: Vec<(&str, &str)> =
            parsed.conversations[0].turns.iter().map(|t| (t.user.as_str(), t.assistant.as_str())).collect();
        assert_eq!(
            turns,
            [
                (
                    "Add a TTL cache to `load_config`.\n\nHold. I want to keep it simple - no connection pooling \
                     for now.",
                    "I'll wrap it in a connection pool first.\n\n[tool: Edit (failed)]\n\nUnderstood: a plain \
                     `HashMap` with an expiry per entry, no pool.\n\n[tool: Read]\n\n[tool: Grep]\n\nDone: entries \
                     expire after 60 s."
                ),
                ("Now add a unit test for the expiry.", "[tool: Bash]\n\nThe test passes."),
                ("Commit it.", "Committed as 3f2a9c1."),
            ]
        );
        let main = &parsed.conversations[0].turns;
        // The rejected call keeps its result (evidence) too.
        assert!(main[0].tools[0].result.as_deref().unwrap().ends_with("for future sessions."));
        // Parallel calls: the result on the sibling record still answers its call.
        let results: Vec<Option<&str>> = main[0].tools[1..].iter().map(|t| t.result.as_deref()).collect();
        assert_eq!(
            results,
            [
                Some("pub fn load_config(path: &Path) -> Result<Config> {"),
                Some("src/main.rs:12:    let cfg = load_config(&args.config)?;")
            ]
        );
        assert_eq!(tools(&main[1]), [("Bash", Some("toolu_01Test"), 33)], "the repeated record is read once");
        assert_eq!(main[1].time.as_deref(), Some("2025-09-03T10:00:54.378Z"));
        assert_absent(
            &parsed,
            &[
                "ABANDONED",
                "REMINDER-NOISE",
                "system-reminder",
                "Caveat",
                "/cost",
                "Total cost",
                "Request interrupted",
                "COMPACT-SUMMARY",
                "No response requested",
                "HIDDEN-THINKING",
            ],
        );
    }

    /// Issue 22, finding 7: records without `sessionId` belong to the session the file is named
    /// after; a rewind to the first prompt makes a new root, and the old root's branch goes.
    #[test]
    fn r22_no_session_id_and_a_rewind_to_the_start() {
        let (path, text) = read("fixtures/import/claude-code/9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        assert_eq!(keys(&parsed), ["9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b"]);
        let turns: Vec<(&str, &str)> =
            parsed.conversations[0].turns.iter().map(|t| (t.user.as_str(), t.assistant.as_str())).collect();
        assert_eq!(
            turns,
            [
                (
                    "What does the `?` operator do on an `Option`?",
                    "It returns `None` early from a function that returns an `Option`."
                ),
                ("And in `main`?", "`main` must return `Option` or `Result` for `?` to compile there."),
            ]
        );
    }

    /// Issue 50, items 2 and 8: a reply written before the prompt it answers is read in the
    /// `parentUuid` chain's order, and a hook's context echoed back as an attachment is no turn.
    #[test]
    fn r50_records_are_read_in_chain_order() {
        let (path, text) = read("fixtures/import/claude-code/misordered.jsonl");
        let parsed = parse(&path, &text, false).unwrap();
        let turns: Vec<(&str, &str)> =
            parsed.conversations[0].turns.iter().map(|t| (t.user.as_str(), t.assistant.as_str())).collect();
        assert_eq!(
            turns,
            [
                ("Add a TTL cache to `load_config`.", "Done: entries expire after 60 s."),
                ("Now add a unit test for the expiry.", "The test passes."),
                ("Commit it.", "Committed as 3f2a9c1."),
            ]
        );
        assert_absent(&parsed, &["HOOK-CONTEXT-ECHO", "ctxgate:"]);
        // Each turn's start is where a read that holds it and the turns after it begins.
        let live = parsed.live.as_ref().unwrap();
        let offset =
            |uuid: &str| text.find(uuid).map(|i| text[..i].rfind('\n').map_or(0, |n| n + 1)).unwrap();
        let reply_first = offset(r#""uuid":"a0000000-0000-4000-8000-000000000006""#);
        assert_eq!(live.starts[1], reply_first, "turn 1's reply comes first in the file");
        assert!(!live.unsure);
        // The reply is the file's last record but one: the chain still ends at it, below the
        // prompt written after it.
        let end = text.find(r#"{"parentUuid":"a0000000-0000-4000-8000-000000000006""#).unwrap();
        let parsed = parse(&path, &text[..end], false).unwrap();
        let last = parsed.conversations[0].turns.last().unwrap();
        assert_eq!(
            (last.user.as_str(), last.assistant.as_str()),
            ("Now add a unit test for the expiry.", "The test passes.")
        );
        // Read from turn 1's start, the part reaches before it (the prompt's parent): it is read
        // whole instead, never half.
        let carry = parsed.live.as_ref().unwrap().carry.clone();
        let start = parsed.live.as_ref().unwrap().starts[1];
        let part = parse_from(&path, &text[start..end], false, Some(&carry)).unwrap();
        assert!(part.live.unwrap().unsure, "a part whose first turn began before its prompt is unsure");
    }

    /// Issue 50, item 2, live: the reply is in the file before its prompt is; it waits for the
    /// prompt instead of joining the turn before, so the read after the prompt agrees.
    #[test]
    fn r50_a_reply_before_its_prompt_waits_for_it() {
        let row = |uuid: &str, parent: &str, kind: &str, text: &str| {
            format!(
                r#"{{"type":"{kind}","uuid":"{uuid}","parentUuid":{parent},"sessionId":"s","message":{{"role":"{kind}","content":"{text}"}}}}"#
            )
        };
        let head = [
            row("u1", "null", "user", "one"),
            row("a1", r#""u1""#, "assistant", "two"),
            row("a2", r#""u2""#, "assistant", "four"),
        ];
        let turns = |rows: &[String]| -> Vec<(String, String)> {
            let parsed = parse(Path::new("s.jsonl"), &rows.join("\n"), false).unwrap();
            parsed.conversations[0].turns.iter().map(|t| (t.user.clone(), t.assistant.clone())).collect()
        };
        assert_eq!(turns(&head), [("one".to_string(), "two".to_string())]);
        let full = [&head[..], &[row("u2", r#""a1""#, "user", "three")]].concat();
        assert_eq!(
            turns(&full),
            [("one".to_string(), "two".to_string()), ("three".to_string(), "four".to_string())]
        );
    }

    /// A tree that cannot be followed is read in file order: a parent the file lacks, a cycle.
    #[test]
    fn a_broken_tree_is_read_in_file_order() {
        let row = |uuid: &str, parent: &str, kind: &str, text: &str| {
            format!(
                r#"{{"type":"{kind}","uuid":"{uuid}","parentUuid":{parent},"sessionId":"s","message":{{"role":"{kind}","content":"{text}"}}}}"#
            )
        };
        let broken = [
            row("u1", r#""gone""#, "user", "one"),
            row("a1", r#""u1""#, "assistant", "two"),
            row("u2", "null", "user", "three"),
            row("a2", r#""u2""#, "assistant", "four"),
            row("u3", r#""elsewhere""#, "user", "five"),
        ];
        let cycle = [
            row("u1", r#""a2""#, "user", "one"),
            row("a1", r#""u1""#, "assistant", "two"),
            row("u2", r#""a1""#, "user", "three"),
            row("a2", r#""u2""#, "assistant", "four"),
        ];
        let unlinked = [
            row("u1", "null", "user", "one"),
            row("a1", "null", "assistant", "two"),
            row("u2", "null", "user", "three"),
            row("a2", "null", "assistant", "four"),
        ];
        let cases = [
            (&broken[..], vec!["one", "three", "five"]),
            (&cycle[..], vec!["one", "three"]),
            (&unlinked[..], vec!["one", "three"]),
        ];
        for (rows, users) in cases {
            let parsed = parse(Path::new("s.jsonl"), &rows.join("\n"), false).unwrap();
            let got: Vec<&str> = parsed.conversations[0].turns.iter().map(|t| t.user.as_str()).collect();
            assert_eq!(got, users, "{rows:?}");
        }
    }

    /// A part read from a turn's record is sure only when nothing in it can reach before it:
    /// each case below reads differently whole, and is reported unsure.
    #[test]
    fn a_part_that_reaches_before_its_start_is_unsure() {
        let row = |uuid: &str, parent: &str, kind: &str, session: &str, content: &str| {
            format!(
                r#"{{"type":"{kind}","uuid":"{uuid}","parentUuid":{parent},{session}"message":{{"role":"{kind}","content":{content}}}}}"#
            )
        };
        let s = r#""sessionId":"s","#;
        let text = |t: &str| format!("\"{t}\"");
        let head =
            [row("u1", "null", "user", s, &text("one")), row("a1", r#""u1""#, "assistant", s, &text("two"))];
        // The part starts at u2, the record that began turn 1.
        let part = |rows: &[String]| {
            let file = [&head[..], rows].concat().join("\n");
            let whole = parse(Path::new("s.jsonl"), &file, false).unwrap();
            let carry = whole.live.as_ref().map(|l| l.carry.clone()).unwrap_or_default();
            let start = file.find(r#""uuid":"u2""#).map(|i| file[..i].rfind('{').unwrap()).unwrap();
            let part = parse_from(Path::new("s.jsonl"), &file[start..], false, Some(&carry)).unwrap();
            part.live.unwrap().unsure
        };
        let grown = [
            row("u2", r#""a1""#, "user", s, &text("three")),
            row("a2", r#""u2""#, "assistant", s, &text("four")),
        ];
        assert!(!part(&grown), "a plain continuation is sure");
        let cases = [
            ("a rewind to a new root", vec![row("u3", "null", "user", s, &text("five"))]),
            ("a branch from before the part", vec![row("u3", r#""a1""#, "user", s, &text("five"))]),
            (
                "a record repeated from before the part",
                vec![
                    row("a1", r#""u1""#, "assistant", s, &text("two")),
                    row("u3", r#""a1""#, "user", s, &text("five")),
                ],
            ),
            ("a record without `sessionId`", vec![row("u3", r#""a2""#, "user", "", &text("five"))]),
            (
                "a result that names no call",
                vec![
                    row("u3", r#""a2""#, "user", s, &text("five")),
                    row(
                        "a3",
                        r#""u3""#,
                        "assistant",
                        s,
                        r#"[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]"#,
                    ),
                    row("r3", r#""a3""#, "user", s, r#"[{"type":"tool_result","content":"ok"}]"#),
                ],
            ),
        ];
        for (what, rows) in cases {
            assert!(part(&[&grown[..], &rows].concat()), "{what}");
        }
        // Records with ids that name no parents are read in file order, where a record
        // repeated from before a part would be read twice: never resumed.
        let unlinked = |uuids: bool| {
            let rows: Vec<String> = ["one", "two", "three"]
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let kind = if i % 2 == 0 { "user" } else { "assistant" };
                    let id = if uuids { format!(r#""uuid":"r{i}","#) } else { String::new() };
                    format!(r#"{{"type":"{kind}",{id}"sessionId":"s","message":{{"content":"{t}"}}}}"#)
                })
                .collect();
            parse(Path::new("s.jsonl"), &rows.join("\n"), false).unwrap().live.unwrap().unsure
        };
        assert!(unlinked(true));
        assert!(!unlinked(false));
    }

    #[test]
    fn harness_blocks_are_stripped_and_typed_text_is_kept() {
        let rows = [
            (
                "<system-reminder>x</system-reminder>\nFix it.\n<system-reminder a=\"1\">y</system-reminder>",
                "Fix it.",
            ),
            ("<ide_opened_file>The user opened a.rs</ide_opened_file>", ""),
            ("<command-message>init</command-message>\n<command-name>/init</command-name>", ""),
            ("<bash-input>git status</bash-input>", ""),
            ("[Request interrupted by user for tool use]", ""),
            // Not harness: HTML elements, a tag in the middle, an unclosed block, a bracket in prose.
            ("<div>hello</div>", "<div>hello</div>"),
            (
                "Why does <my-widget>x</my-widget> render twice?",
                "Why does <my-widget>x</my-widget> render twice?",
            ),
            ("<system-reminder>never closed", "<system-reminder>never closed"),
            ("Fix this\n<system-reminder>r</system-reminder>\nand that.", "Fix this\n\nand that."),
            (
                "[Request interrupted by user] happened twice, why?\nSee above.",
                "[Request interrupted by user] happened twice, why?\nSee above.",
            ),
        ];
        for (text, kept) in rows {
            assert_eq!(without_harness_text(text), kept, "for {text:?}");
        }
    }

    #[test]
    fn the_words_of_a_rejection() {
        let said = "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a \
                    file edit, the new_string was NOT written to the file). To tell you how to proceed, the user said:\n";
        let rows = [
            (format!("{said}Use rustls, not openssl."), Some("Use rustls, not openssl.")),
            (
                format!(
                    "{said}Two lines\nof words.\n\nNote: The user's next message may contain a correction or preference."
                ),
                Some("Two lines\nof words."),
            ),
            (format!("{said}   "), None),
            (
                "The user doesn't want to proceed with this tool use. STOP what you are doing.".to_string(),
                None,
            ),
            ("error: file not found".to_string(), None),
        ];
        for (result, words) in rows {
            assert_eq!(rejection_words(&result).as_deref(), words, "for {result:?}");
        }
    }

    proptest::proptest! {
        /// Harness stripping never panics (multi-byte text, tags cut anywhere) and keeps no
        /// more than it was given.
        #[test]
        fn harness_stripping_is_total(text in "(<|>|/|-|_|[a-z]|é|語|system-reminder| |\n|\\[Request interrupted by user\\]){0,40}") {
            let kept = without_harness_text(&text);
            proptest::prop_assert!(kept.len() <= text.len());
            let _ = rejection_words(&format!("x the user said:\n{text}"));
        }
    }
}
