//! The recall run as markdown tables for a reader (the JSON is [`RecallReport`] itself).

use crate::recall::{BUDGETS, Method, RecallReport, RecallRow, Scope};
use std::fmt::Write;

fn figure(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

impl RecallReport {
    fn row(&self, method: Method, budget: u32, scope: Scope) -> Option<&RecallRow> {
        self.rows.iter().find(|r| r.method == method && r.budget == budget && r.scope == scope)
    }

    /// The tables for a reader: overall and categories 1–4 per method and budget (with, for
    /// ctxgate, answer kept had its turns been handed over unpruned), then turn recall and
    /// answer kept per category.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let by_category: Vec<String> =
            self.questions_by_category.iter().enumerate().map(|(i, n)| format!("{}: {n}", i + 1)).collect();
        let _ = writeln!(
            out,
            "== recall: {} questions ({}), {} sessions, {} turns ({} imported in {:.2} s); ctxgate {:.2} s, baselines {:.2} s",
            self.questions,
            by_category.join(", "),
            self.sessions,
            self.turns,
            self.imported_turns,
            self.import_seconds,
            self.select_seconds,
            self.baseline_seconds
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| method | budget | turn recall | full hit | turn recall 1–4 | full hit 1–4 | answer kept 1–4 | unpruned | turns | est tokens | empty |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for method in Method::ALL {
            for budget in BUDGETS {
                let (Some(all), Some(main)) =
                    (self.row(method, budget, Scope::All), self.row(method, budget, Scope::Categories1To4))
                else {
                    continue;
                };
                let _ = writeln!(
                    out,
                    "| {} | {budget} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} | {:.1} | {:.0} | {} ({:.1}%) |",
                    method.label(),
                    all.turn_recall,
                    all.full_hit,
                    main.turn_recall,
                    main.full_hit,
                    figure(main.answer_kept),
                    figure(main.answer_kept_unpruned),
                    all.turns,
                    all.tokens,
                    all.empty,
                    100.0 * all.empty_share
                );
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "| method | budget | recall 1 multi-hop | 2 temporal | 3 open-domain | 4 single-hop | 5 adversarial | answer kept 1 | 2 | 3 | 4 |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|");
        for method in Method::ALL {
            for budget in BUDGETS {
                let _ = write!(out, "| {} | {budget} |", method.label());
                for c in 1..=5 {
                    let recall = self.row(method, budget, Scope::Category(c)).map(|r| r.turn_recall);
                    let _ = write!(out, " {} |", figure(recall));
                }
                for c in 1..=4 {
                    let kept = self.row(method, budget, Scope::Category(c)).and_then(|r| r.answer_kept);
                    let _ = write!(out, " {} |", figure(kept));
                }
                let _ = writeln!(out);
            }
        }
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "Precision: categories 1–4, each asked in its own conversation's session (related) and in the next conversation's (unrelated)"
        );
        let _ = writeln!(out);
        out.push_str(&crate::precision::to_text(&self.precision));
        out
    }
}
