//! Quick start: index the example conversation shipped in `fixtures/example/` and show what
//! ctxgate selects for a few follow-up questions, and why.
//!
//! ```text
//! cargo run --release --example quickstart [-- "your own question"]
//! ```
//! The index is written to `ctxgate-quickstart.redb` in the system's temporary directory
//! (recreated each run).

use ctxgate::{Gatekeeper, Options, Selection};
use serde::Deserialize;
use std::error::Error;

#[derive(Deserialize)]
struct Line {
    session: String,
    user: String,
    assistant: String,
}

const QUESTIONS: &[&str] = &[
    "The billing job ran twice last night after a Sentinel failover. How do we stop that?",
    "orders 表上的慢查询又出现了，索引还在吗？",
    "What TTL should the Redis lock use?",
    "滚动更新时还是有 502，怎么办？",
];

fn main() -> Result<(), Box<dyn Error>> {
    let root = env!("CARGO_MANIFEST_DIR");
    let conversation = std::fs::read_to_string(format!("{root}/fixtures/example/conversation.jsonl"))?;
    let index = std::env::temp_dir().join("ctxgate-quickstart.redb");
    let _ = std::fs::remove_file(&index);
    let gk = Gatekeeper::open(&index, Options::default())?;

    let mut session_name = String::new();
    let mut turns = 0;
    for line in conversation.lines().filter(|l| !l.trim().is_empty()) {
        let line: Line = serde_json::from_str(line)?;
        gk.session(&line.session)?.add_turn(&line.user, &line.assistant)?;
        session_name = line.session;
        turns += 1;
    }
    println!("indexed {turns} turns of session {session_name:?} into {}\n", index.display());

    let session = gk.session(&session_name)?;
    let own: Vec<String> = std::env::args().skip(1).collect();
    let questions: Vec<&str> =
        if own.is_empty() { QUESTIONS.to_vec() } else { own.iter().map(String::as_str).collect() };
    for question in questions {
        show(question, &session.select(question)?);
    }
    Ok(())
}

fn show(question: &str, selection: &Selection) {
    let d = &selection.decision;
    println!("Q: {question}");
    println!(
        "   gate: {:?} (overlap {:.2}, new {:.2}{})",
        d.topic,
        d.overlap,
        d.new_ratio,
        d.deictic.map(|p| format!(", deictic {p}")).unwrap_or_default()
    );
    println!(
        "   {} of {} tokens, {:.0}% of the query's IDF covered, {} turn(s):",
        selection.budget.used,
        selection.budget.limit,
        selection.coverage * 100.0,
        selection.blocks.len()
    );
    for b in &selection.blocks {
        println!("   [turn {}] covers {}", b.turn_id, b.covered_anchors.join(", "));
        if !b.user.is_empty() {
            println!("      user: {}", b.user);
        }
        if !b.assistant.is_empty() {
            println!("      assistant: {}", b.assistant);
        }
    }
    println!();
}
