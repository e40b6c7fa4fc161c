//! Confusion counts for a binary continue/switch judgement, with switch as the positive class.

use serde::Serialize;

/// How many tasks fell in each cell of the confusion matrix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Expected switch, judged switch.
    pub true_switch: u64,
    /// Expected continue, judged switch.
    pub false_switch: u64,
    /// Expected switch, judged continue.
    pub missed_switch: u64,
    /// Expected continue, judged continue.
    pub true_continue: u64,
}

impl Confusion {
    /// Counts one task.
    pub fn record(&mut self, expected_switch: bool, judged_switch: bool) {
        match (expected_switch, judged_switch) {
            (true, true) => self.true_switch += 1,
            (false, true) => self.false_switch += 1,
            (true, false) => self.missed_switch += 1,
            (false, false) => self.true_continue += 1,
        }
    }

    /// All tasks counted.
    pub fn tasks(&self) -> u64 {
        self.true_switch + self.false_switch + self.missed_switch + self.true_continue
    }

    /// Tasks whose expected answer is switch.
    pub fn expected_switches(&self) -> u64 {
        self.true_switch + self.missed_switch
    }

    /// Tasks judged switch.
    pub fn judged_switches(&self) -> u64 {
        self.true_switch + self.false_switch
    }

    /// Share of expected switches judged switch; `None` without expected switches.
    pub fn switch_recall(&self) -> Option<f64> {
        ratio(self.true_switch, self.expected_switches())
    }

    /// Share of expected continues judged continue; `None` without expected continues.
    pub fn continue_recall(&self) -> Option<f64> {
        ratio(self.true_continue, self.true_continue + self.false_switch)
    }

    /// Share of switch judgements that were expected; `None` when nothing was judged switch.
    pub fn switch_precision(&self) -> Option<f64> {
        ratio(self.true_switch, self.judged_switches())
    }

    /// Mean of switch recall and continue recall; `None` unless both classes occur.
    pub fn balanced_accuracy(&self) -> Option<f64> {
        Some((self.switch_recall()? + self.continue_recall()?) / 2.0)
    }

    /// Share of tasks judged correctly; `None` for no tasks.
    pub fn accuracy(&self) -> Option<f64> {
        ratio(self.true_switch + self.true_continue, self.tasks())
    }

    /// Share of tasks judged switch; `None` for no tasks.
    pub fn judged_switch_share(&self) -> Option<f64> {
        ratio(self.judged_switches(), self.tasks())
    }

    /// The figures reported for a method.
    pub fn summary(&self) -> Summary {
        Summary {
            tasks: self.tasks(),
            switches: self.expected_switches(),
            balanced_accuracy: self.balanced_accuracy(),
            switch_precision: self.switch_precision(),
            switch_recall: self.switch_recall(),
            continue_recall: self.continue_recall(),
            judged_switch_share: self.judged_switch_share(),
            confusion: *self,
        }
    }
}

/// The reported figures of one method on one set; a ratio with a zero denominator is `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Tasks answered.
    pub tasks: u64,
    /// Tasks whose expected answer is switch.
    pub switches: u64,
    /// Mean of switch recall and continue recall.
    pub balanced_accuracy: Option<f64>,
    /// Share of switch judgements that were expected.
    pub switch_precision: Option<f64>,
    /// Share of expected switches judged switch.
    pub switch_recall: Option<f64>,
    /// Share of expected continues judged continue.
    pub continue_recall: Option<f64>,
    /// Share of tasks judged switch.
    pub judged_switch_share: Option<f64>,
    /// The counts behind the figures.
    pub confusion: Confusion,
}

fn ratio(numerator: u64, denominator: u64) -> Option<f64> {
    (denominator > 0).then(|| numerator as f64 / denominator as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 switches (6 caught) and 30 continues (3 wrongly judged switch).
    fn hand_made() -> Confusion {
        let mut c = Confusion::default();
        for i in 0..10 {
            c.record(true, i < 6);
        }
        for i in 0..30 {
            c.record(false, i < 3);
        }
        c
    }

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-12)
    }

    #[test]
    fn counts() {
        let c = hand_made();
        assert_eq!(c, Confusion { true_switch: 6, false_switch: 3, missed_switch: 4, true_continue: 27 });
        assert_eq!((c.tasks(), c.expected_switches(), c.judged_switches()), (40, 10, 9));
    }

    #[test]
    fn ratios() {
        let c = hand_made();
        assert!(close(c.switch_recall(), 0.6));
        assert!(close(c.continue_recall(), 0.9));
        assert!(close(c.switch_precision(), 6.0 / 9.0));
        assert!(close(c.balanced_accuracy(), 0.75));
        assert!(close(c.accuracy(), 33.0 / 40.0));
        assert!(close(c.judged_switch_share(), 9.0 / 40.0));
    }

    #[test]
    fn always_continue_is_half_balanced_accuracy_without_precision() {
        let mut c = Confusion::default();
        for i in 0..20 {
            c.record(i % 4 == 0, false);
        }
        assert!(close(c.balanced_accuracy(), 0.5));
        assert!(close(c.switch_recall(), 0.0));
        assert_eq!(c.switch_precision(), None);
        assert!(close(c.judged_switch_share(), 0.0));
    }

    #[test]
    fn empty_and_one_class() {
        let empty = Confusion::default();
        assert_eq!(empty.balanced_accuracy(), None);
        assert_eq!(empty.accuracy(), None);
        let mut only_continues = Confusion::default();
        only_continues.record(false, false);
        assert_eq!(only_continues.balanced_accuracy(), None);
        assert!(close(only_continues.continue_recall(), 1.0));
    }
}
