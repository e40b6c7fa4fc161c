//! From a log's messages to turns: the rules every format shares.
//!
//! A user message and the assistant reply that follows form one turn; consecutive messages of
//! one side are joined with a blank line; system messages, reasoning and thinking are not turn
//! text. Tool calls are kept out of the text but recorded with the turn (name, arguments,
//! result size), and mentioned briefly in the assistant text as `[tool: NAME]`, or
//! `[tool: NAME (failed)]` once the log says the call failed. Documents that came with a user
//! message (attachments) are recorded with the turn the same way, as evidence.

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The person.
    User,
    /// The model.
    Assistant,
}

/// A tool call made during a turn.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    /// Tool name.
    pub name: String,
    /// The call id the log joins results by, if any.
    pub call_id: Option<String>,
    /// Arguments as the log wrote them (a JSON string for most formats).
    pub arguments: String,
    /// The result's text, once it is known (kept for evidence, not turn text).
    pub result: Option<String>,
    /// Size of the result in bytes.
    pub result_bytes: u64,
}

/// One turn, as imported.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedTurn {
    /// The user's text.
    pub user: String,
    /// The assistant's text, with `[tool: NAME]` mentions.
    pub assistant: String,
    /// Timestamp of the turn's first message, as written in the log.
    pub time: Option<String>,
    /// Tool calls made during the turn.
    pub tools: Vec<ToolCall>,
}

impl ParsedTurn {
    /// Redacts the turn in place ([`crate::redact`]): its texts and its tool calls' arguments
    /// (a call's result is evidence, redacted where it is stored).
    pub(crate) fn redact(&mut self) {
        crate::redact::redact_in_place(&mut self.user);
        crate::redact::redact_in_place(&mut self.assistant);
        for tool in &mut self.tools {
            if let std::borrow::Cow::Owned(redacted) = crate::redact::redact_text_or_json(&tool.arguments) {
                tool.arguments = redacted;
            }
        }
    }

    /// Bytes it holds on the heap: its texts and its tool calls' (results included).
    pub fn heap_bytes(&self) -> usize {
        let tools: usize = (self.tools.iter())
            .map(|t| {
                t.name.capacity()
                    + t.call_id.as_ref().map_or(0, String::capacity)
                    + t.arguments.capacity()
                    + t.result.as_ref().map_or(0, String::capacity)
            })
            .sum();
        self.user.capacity()
            + self.assistant.capacity()
            + self.time.as_ref().map_or(0, String::capacity)
            + self.tools.capacity() * size_of::<ToolCall>()
            + tools
    }

    /// True if the turn has no reply text yet: empty, or only the `[tool: NAME]` mentions of
    /// calls made so far (an agent still working).
    pub fn is_unanswered(&self) -> bool {
        self.assistant.split("\n\n").all(|part| {
            let part = part.trim();
            part.is_empty() || (part.starts_with("[tool: ") && part.ends_with(']'))
        })
    }
}

/// One conversation of a log file: a session to be.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Conversation {
    /// Session name taken from the source (conversation id, session id).
    pub key: String,
    /// Title, if the source has one.
    pub title: Option<String>,
    /// The turns, in order.
    pub turns: Vec<ParsedTurn>,
}

/// A record skipped with `--skip-invalid`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "server", derive(schemars::JsonSchema))]
pub struct Skipped {
    /// 1-based line (for JSON documents: the line the record starts on).
    pub line: u64,
    /// Why.
    pub reason: String,
}

/// What a format's parser returns for one file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParsedFile {
    /// Conversations in file order.
    pub conversations: Vec<Conversation>,
    /// Records skipped (only with `skip_invalid`).
    pub skipped: Vec<Skipped>,
    /// For a live agent log of one conversation: where a later read may start instead of at
    /// the file's start (`crate::write::resume`).
    pub(crate) live: Option<LiveLog>,
}

/// Where the turns of a live agent log (one conversation) begin in its text, and what a read
/// that starts at one of them must know of the records before it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct LiveLog {
    /// For each turn of the conversation, the byte offset of the record that began it.
    pub starts: Vec<usize>,
    /// What the parse of the records before a start decided for the records after it.
    pub carry: Carry,
    /// True if a read that started inside the file may differ from reading it whole: a record
    /// linked to one before the start, a result for a call it does not hold. The caller reads
    /// the whole file instead.
    pub unsure: bool,
}

/// What a parse knew from the start of a live log, kept with a resume point.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Carry {
    /// The conversation's key.
    pub key: String,
    /// Claude Code: the session's record tree could be followed (else it is read in file
    /// order). Codex: the rollout holds `response_item` messages (else `event_msg` ones are
    /// read).
    pub flag: bool,
}

/// What a failed call's mention says after its name.
pub const FAILED_MARK: &str = " (failed)";

/// Builds turns from messages fed in log order.
#[derive(Debug, Default)]
pub(crate) struct TurnBuilder {
    turns: Vec<ParsedTurn>,
    current: Option<ParsedTurn>,
    /// For each tool of each turn (`turns`, then `current`), where its `[tool: NAME]` mention
    /// ends in the assistant text (`None` for a document without a mention).
    mentions: Vec<Vec<Option<usize>>>,
    /// Where the record being fed starts in the file ([`Self::at`]).
    at: usize,
    /// Where the record that began each turn of `turns` starts, then `current`'s.
    starts: Vec<usize>,
    current_start: usize,
    /// Results a read that starts later might attach elsewhere ([`BuiltTurns::loose`]).
    loose: usize,
}

/// A builder's turns with where each began and how many results matched no call.
#[derive(Debug, Default)]
pub(crate) struct BuiltTurns {
    /// The turns, in order.
    pub turns: Vec<ParsedTurn>,
    /// For each turn, the byte offset (as given to [`TurnBuilder::at`]) of the earliest record
    /// of it or of a turn after it: where a read that holds the turn and the rest must start.
    pub starts: Vec<usize>,
    /// Results that matched no call waiting for one, or matched one only by order (they name
    /// no call): a read that starts at a later turn might attach them to another call.
    pub loose: usize,
}

impl TurnBuilder {
    /// A builder with no turns.
    pub fn new() -> Self {
        Self::default()
    }

    /// Says where the record whose items come next starts in the file.
    pub fn at(&mut self, offset: usize) {
        self.at = offset;
    }

    /// Adds a message's text; blank text is ignored.
    pub fn message(&mut self, role: Role, text: &str, time: Option<&str>) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        match role {
            Role::User => {
                if self.current.as_ref().is_some_and(|t| !t.assistant.is_empty()) {
                    self.close();
                }
                let turn = self.open(time);
                join(&mut turn.user, text);
            }
            Role::Assistant => {
                let turn = self.open(time);
                join(&mut turn.assistant, text);
            }
        }
    }

    /// Adds words of the user's that came during the current turn (typed when rejecting a tool
    /// call) to its user text, without starting a turn; blank text is ignored.
    pub fn user_words_in_turn(&mut self, text: &str, time: Option<&str>) {
        let text = text.trim();
        if !text.is_empty() {
            join(&mut self.open(time).user, text);
        }
    }

    /// Records a tool call made by the assistant in the current turn.
    pub fn tool_call(&mut self, name: &str, call_id: Option<&str>, arguments: &str, time: Option<&str>) {
        let turn = self.open(time);
        join(&mut turn.assistant, &format!("[tool: {name}]"));
        let end = turn.assistant.len();
        turn.tools.push(ToolCall {
            name: name.to_string(),
            call_id: call_id.map(str::to_string),
            arguments: arguments.to_string(),
            ..ToolCall::default()
        });
        self.current_mentions().push(Some(end));
    }

    /// Records a document that came with the current turn's user message (an attachment): kept
    /// as evidence like a tool result, with no `[tool: NAME]` mention. Call it after the user
    /// message, which says what the document is.
    pub fn user_document(&mut self, name: &str, id: &str, arguments: &str, content: &str) {
        let turn = self.open(None);
        turn.tools.push(ToolCall {
            name: name.to_string(),
            call_id: Some(id.to_string()),
            arguments: arguments.to_string(),
            result: Some(content.to_string()),
            result_bytes: content.len() as u64,
        });
        self.current_mentions().push(None);
    }

    /// Attaches a tool's result to its call: by id, else the earliest call still waiting for a
    /// result (parallel calls are answered in the order they were made).
    pub fn tool_result(&mut self, call_id: Option<&str>, result: &str) {
        self.result(call_id, result, false);
    }

    /// Attaches the result of a call that failed (the log says so): as [`Self::tool_result`],
    /// and the call's mention says `(failed)`.
    pub fn tool_error(&mut self, call_id: Option<&str>, result: &str) {
        self.result(call_id, result, true);
    }

    fn result(&mut self, call_id: Option<&str>, result: &str, failed: bool) {
        let found =
            {
                let mut open =
                    self.turns.iter().chain(self.current.iter()).enumerate().flat_map(|(t, turn)| {
                        turn.tools.iter().enumerate().map(move |(c, call)| (t, c, call))
                    });
                match call_id {
                    Some(id) => open.find(|(_, _, c)| c.result.is_none() && c.call_id.as_deref() == Some(id)),
                    None => open.find(|(_, _, c)| c.result.is_none()),
                }
                .map(|(t, c, _)| (t, c))
            };
        if found.is_none() || call_id.is_none() {
            self.loose += 1;
        }
        let Some((t, c)) = found else { return };
        let closed = self.turns.len();
        if t == closed {
            self.current_start = self.current_start.min(self.at);
        }
        let Some(turn) = (if t < closed { self.turns.get_mut(t) } else { self.current.as_mut() }) else {
            return;
        };
        let Some(call) = turn.tools.get_mut(c) else { return };
        call.result_bytes = result.len() as u64;
        call.result = Some(result.to_string());
        let mentions = self.mentions.get_mut(t);
        if failed && let Some(mentions) = mentions {
            mark_failed(&mut turn.assistant, mentions, c);
        }
    }

    /// The turns; a turn with neither text nor tools is dropped.
    pub fn finish(self) -> Vec<ParsedTurn> {
        self.finish_with_starts().turns
    }

    /// The turns, with where each began.
    pub fn finish_with_starts(mut self) -> BuiltTurns {
        self.close();
        // A read from a turn's start must hold every record of it and of the turns after it.
        for i in (1..self.starts.len()).rev() {
            self.starts[i - 1] = self.starts[i - 1].min(self.starts[i]);
        }
        BuiltTurns { turns: self.turns, starts: self.starts, loose: self.loose }
    }

    fn open(&mut self, time: Option<&str>) -> &mut ParsedTurn {
        if self.current.is_none() {
            self.mentions.truncate(self.turns.len());
            self.mentions.push(Vec::new());
            self.current_start = self.at;
        }
        // Records fed out of file order (a Claude Code reply written before its prompt): the
        // turn starts at its earliest record.
        self.current_start = self.current_start.min(self.at);
        self.current
            .get_or_insert_with(|| ParsedTurn { time: time.map(str::to_string), ..ParsedTurn::default() })
    }

    /// The mentions of the current turn's tools (the current turn is open).
    fn current_mentions(&mut self) -> &mut Vec<Option<usize>> {
        let at = self.turns.len();
        if self.mentions.len() <= at {
            self.mentions.resize_with(at + 1, Vec::new);
        }
        &mut self.mentions[at]
    }

    fn close(&mut self) {
        if let Some(turn) = self.current.take() {
            if !turn.user.is_empty() || !turn.assistant.is_empty() || !turn.tools.is_empty() {
                self.turns.push(turn);
                self.starts.push(self.current_start);
            }
            self.mentions.truncate(self.turns.len());
        }
    }
}

/// Adds [`FAILED_MARK`] to the mention of call `index`, moving the later mentions' ends.
fn mark_failed(assistant: &mut String, mentions: &mut [Option<usize>], index: usize) {
    let Some(Some(end)) = mentions.get(index).copied() else { return };
    let Some(close) = end.checked_sub(1).filter(|&at| assistant.get(at..end) == Some("]")) else { return };
    if assistant.get(..close).is_some_and(|before| before.ends_with(FAILED_MARK)) {
        return;
    }
    assistant.insert_str(close, FAILED_MARK);
    for later in mentions.iter_mut().flatten().filter(|e| **e >= end) {
        *later += FAILED_MARK.len();
    }
}

fn join(side: &mut String, text: &str) {
    if !side.is_empty() {
        side.push_str("\n\n");
    }
    side.push_str(text);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_joins_and_records_tools() {
        let mut b = TurnBuilder::new();
        b.message(Role::Assistant, "Hi, how can I help?", Some("t0"));
        b.message(Role::User, "Fix the build.", Some("t1"));
        b.message(Role::User, "It fails on CI.", None);
        b.tool_call("Bash", Some("c1"), r#"{"command":"cargo build"}"#, None);
        b.tool_result(Some("c1"), "error[E0308]: mismatched types");
        b.message(Role::Assistant, "The types differ in main.rs.", None);
        b.message(Role::User, "   ", None);
        b.message(Role::User, "Thanks!", Some("t2"));
        let turns = b.finish();
        assert_eq!(turns.len(), 3);
        assert_eq!((turns[0].user.as_str(), turns[0].assistant.as_str()), ("", "Hi, how can I help?"));
        assert_eq!(turns[1].user, "Fix the build.\n\nIt fails on CI.");
        assert_eq!(turns[1].assistant, "[tool: Bash]\n\nThe types differ in main.rs.");
        assert_eq!(turns[1].time.as_deref(), Some("t1"));
        assert_eq!(turns[1].tools[0].result.as_deref(), Some("error[E0308]: mismatched types"));
        assert_eq!((turns[2].user.as_str(), turns[2].assistant.as_str()), ("Thanks!", ""));
    }

    #[test]
    fn id_less_results_answer_calls_in_order() {
        let mut b = TurnBuilder::new();
        b.message(Role::User, "Weather in Porto and Faro?", None);
        b.tool_call("weather", None, "Porto", None);
        b.tool_call("weather", None, "Faro", None);
        b.tool_result(None, "17 C");
        b.tool_result(None, "24 C here");
        let turns = b.finish();
        let results: Vec<_> =
            turns[0].tools.iter().map(|t| (t.arguments.as_str(), t.result.as_deref())).collect();
        assert_eq!(results, [("Porto", Some("17 C")), ("Faro", Some("24 C here"))]);
    }

    #[test]
    fn a_failed_result_marks_its_own_mention() {
        let mut b = TurnBuilder::new();
        b.message(Role::User, "Check both hosts.", None);
        b.tool_call("ssh", Some("c1"), "a", None);
        b.tool_call("ssh", Some("c2"), "b", None);
        b.message(Role::Assistant, "Waiting for [tool: ssh] output.", None);
        b.message(Role::User, "And the third?", None);
        b.tool_call("ssh", Some("c3"), "c", None);
        b.user_document("attachment", "doc-1", "{}", "notes");
        b.tool_error(Some("c2"), "connection refused");
        b.tool_result(Some("c1"), "up");
        b.tool_error(Some("c3"), "timeout");
        b.tool_error(Some("c3"), "a second result for an answered call changes nothing");
        let turns = b.finish();
        assert_eq!(
            turns[0].assistant,
            "[tool: ssh]\n\n[tool: ssh (failed)]\n\nWaiting for [tool: ssh] output."
        );
        assert_eq!(turns[1].assistant, "[tool: ssh (failed)]");
        let results: Vec<Option<&str>> = turns[1].tools.iter().map(|t| t.result.as_deref()).collect();
        assert_eq!(results, [Some("timeout"), Some("notes")]);
        assert!(turns[1].is_unanswered(), "a failed call alone is no reply yet");
    }

    #[test]
    fn each_turn_starts_at_the_record_that_began_it() {
        let mut b = TurnBuilder::new();
        b.at(0);
        b.message(Role::User, "first", None);
        b.at(10);
        b.message(Role::Assistant, "reply", None);
        b.at(20);
        b.message(Role::User, "   ", None); // blank: begins nothing
        b.at(30);
        b.message(Role::User, "second", None);
        b.at(40);
        b.tool_result(Some("nobody"), "a result for a call not made");
        b.tool_call("Bash", None, "{}", None);
        b.tool_result(None, "matched by order only");
        b.tool_call("Read", Some("r1"), "{}", None);
        b.tool_result(Some("r1"), "matched by id");
        let built = b.finish_with_starts();
        assert_eq!(built.turns.len(), 2);
        assert_eq!(built.starts, [0, 30]);
        assert_eq!(built.loose, 2, "the unmatched result and the one matched by order");
    }
}
