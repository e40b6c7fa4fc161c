//! Prompt assembly: the selected turns, then the question, as text ready to send.

use crate::query::select::Selection;

/// Heading before the selected turns.
pub const CONTEXT_HEADING: &str =
    "Earlier conversation (selected by ctxgate, pruned to the relevant sentences):";
/// Heading before the evidence projections.
pub const EVIDENCE_HEADING: &str = "Evidence (projections of documents kept on disk: facts are exact copies; \
read anything omitted by its evidence_ref):";
/// Heading before the question.
pub const QUESTION_HEADING: &str = "Current question:";

/// The prompt text for `query` with `selection`'s blocks (no system prompt).
pub fn render(selection: &Selection, query: &str) -> String {
    let mut out = String::new();
    if !selection.blocks.is_empty() {
        out.push_str(CONTEXT_HEADING);
        out.push_str("\n\n");
        let mut labels = BlockLabels::default();
        for block in &selection.blocks {
            out.push_str(&format!("[{}]\n", labels.label(block.turn_id, block.time.as_deref())));
            labels.shown(block.time.as_deref());
            if !block.user.is_empty() {
                out.push_str(&format!("User: {}\n", block.user));
            }
            if !block.assistant.is_empty() {
                out.push_str(&format!("Assistant: {}\n", block.assistant));
            }
            out.push('\n');
        }
    }
    if !selection.evidence.is_empty() {
        out.push_str(EVIDENCE_HEADING);
        out.push_str("\n\n");
        for evidence in &selection.evidence {
            out.push_str(&format!("[evidence]\n{}\n\n", evidence.projection));
        }
    }
    out.push_str(&render_question(query));
    out
}

/// The question part of a prompt: all a prompt is when nothing is selected.
pub fn render_question(query: &str) -> String {
    format!("{QUESTION_HEADING}\n{}\n", query.trim())
}

/// The framing text around the blocks whose tokens the prompt's budget must leave room for.
pub fn framing(query: &str) -> String {
    format!("{CONTEXT_HEADING}\n\n{QUESTION_HEADING}\n{}\n", query.trim())
}

/// The part of a block's label its time adds (` · TIME`): its tokens are the block's.
pub fn time_label(time: &str) -> String {
    format!(" · {time}")
}

/// What a block's label says in place of the time the block shown before it already gave.
pub const SAME_TIME: &str = "same time";

/// Labels blocks in the order they are shown: `turn N · TIME`, or `turn N · same time` when the
/// block shown before it has the same time, so a run of blocks of one sitting (or one
/// timestamp) says its time once. A block's `tokens` count the label it gets here.
#[derive(Debug, Default)]
pub struct BlockLabels<'a> {
    previous: Option<&'a str>,
}

impl<'a> BlockLabels<'a> {
    /// The label of the block of `turn` and `time` if it is shown next.
    pub fn label(&self, turn: u32, time: Option<&str>) -> String {
        format!("turn {turn}{}", time.map(|t| time_label(self.says(t))).unwrap_or_default())
    }

    /// What the label says of `time` if shown next: the time, or [`SAME_TIME`].
    pub fn says<'t>(&self, time: &'t str) -> &'t str {
        if self.previous == Some(time) { SAME_TIME } else { time }
    }

    /// Records that the block of `time` was shown.
    pub fn shown(&mut self, time: Option<&'a str>) {
        self.previous = time;
    }
}

/// The per-block framing: `[turn N]`, the side labels and line breaks (a time label, ` · TIME`,
/// is counted in the block's own tokens).
pub fn block_framing(turn_id: u32) -> String {
    format!("[turn {turn_id}]\nUser: \nAssistant: \n\n")
}

/// The framing of one projection in a prompt, counted once per projection (the heading with
/// it, so a prompt with any evidence has room for the heading).
pub fn evidence_framing() -> String {
    format!("{EVIDENCE_HEADING}\n\n[evidence]\n\n\n")
}
