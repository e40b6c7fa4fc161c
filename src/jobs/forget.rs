//! `forget`: deletes sessions, with every trace of them, in one transaction.

use super::derive_forward;
use crate::error::{Error, Result};
use crate::index::Index;
use crate::store::{Removed, Source, View, WriteSource};
use serde::Serialize;

/// What [`crate::Gatekeeper::forget_session`] or [`crate::Gatekeeper::forget_before`] deleted, or what
/// their dry runs would delete.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ForgetReport {
    /// True for a dry run: nothing was deleted, the counts say what would be.
    pub dry_run: bool,
    /// Names of the deleted sessions.
    pub sessions: Vec<String>,
    /// Turns deleted.
    pub turns: u64,
    /// Of them, turns that were still pending.
    pub pending_turns: u64,
    /// Postings deleted.
    pub postings: u64,
    /// Anchors no remaining turn has (their document frequency is gone).
    pub anchors_dropped: u64,
    /// Sessions left in the index, those in `kept_without_time` included.
    pub kept: u64,
    /// Sessions kept because they carry no (readable) end time: only `forget_before`.
    pub kept_without_time: Vec<String>,
    /// Evidence documents of the deleted sessions (their tool output) dropped from the index.
    /// Their files under the evidence root are left in place.
    pub evidence: u64,
}

/// The sessions a forget deletes, by id, and the report without its counts.
type Chosen = (Vec<u32>, ForgetReport);

/// [`crate::Gatekeeper::forget_session`].
pub(crate) fn forget_session(index: &Index, name: &str) -> Result<ForgetReport> {
    index.store().write(|view| {
        let chosen = choose_session(view, name)?;
        forget(view, chosen)
    })
}

/// [`crate::Gatekeeper::forget_session_dry_run`].
pub(crate) fn forget_session_dry_run(index: &Index, name: &str) -> Result<ForgetReport> {
    let view = index.store().read()?;
    let chosen = choose_session(&view, name)?;
    measure(&view, chosen)
}

/// [`crate::Gatekeeper::forget_before`].
pub(crate) fn forget_before(index: &Index, date: &str) -> Result<ForgetReport> {
    let cutoff = cutoff(date)?;
    index.store().write(|view| {
        let chosen = choose_before(view, cutoff)?;
        forget(view, chosen)
    })
}

/// [`crate::Gatekeeper::forget_before_dry_run`].
pub(crate) fn forget_before_dry_run(index: &Index, date: &str) -> Result<ForgetReport> {
    let cutoff = cutoff(date)?;
    let view = index.store().read()?;
    let chosen = choose_before(&view, cutoff)?;
    measure(&view, chosen)
}

fn cutoff(date: &str) -> Result<f64> {
    parse_time(date).ok_or_else(|| Error::InvalidInput {
        what: "date",
        reason: format!("{date:?} is not a date: use YYYY-MM-DD or an RFC 3339 time"),
    })
}

fn choose_session<S: Source>(view: &View<S>, name: &str) -> Result<Chosen> {
    let Some((id, _)) = view.session_by_name(name)? else {
        return Err(Error::UnknownSession { name: name.to_string() });
    };
    let kept = view.sessions()?.len().saturating_sub(1) as u64;
    Ok((vec![id], ForgetReport { sessions: vec![name.to_string()], kept, ..ForgetReport::default() }))
}

fn choose_before<S: Source>(view: &View<S>, cutoff: f64) -> Result<Chosen> {
    let mut report = ForgetReport::default();
    let mut ids = Vec::new();
    for (id, record) in view.sessions()? {
        match record.time_end.as_deref().and_then(parse_time) {
            Some(end) if end < cutoff => {
                ids.push(id);
                report.sessions.push(record.name);
            }
            Some(_) => report.kept += 1,
            None => {
                report.kept += 1;
                report.kept_without_time.push(record.name);
            }
        }
    }
    Ok((ids, report))
}

fn forget(view: &mut View<WriteSource<'_>>, (ids, mut report): Chosen) -> Result<ForgetReport> {
    let removed = view.remove_sessions(&ids, folded_lengths)?;
    report.evidence = view.remove_session_evidence(&ids)?;
    if !ids.is_empty() {
        view.clear_import_checkpoints()?;
    }
    Ok(with_counts(report, removed))
}

fn measure<S: Source>(view: &View<S>, (ids, mut report): Chosen) -> Result<ForgetReport> {
    let removed = view.measure_removal(&ids)?;
    report.evidence = view.count_session_evidence(&ids)?;
    report.dry_run = true;
    Ok(with_counts(report, removed))
}

fn with_counts(report: ForgetReport, removed: Removed) -> ForgetReport {
    ForgetReport {
        turns: removed.turns,
        pending_turns: removed.pending,
        postings: removed.postings,
        anchors_dropped: removed.anchors,
        ..report
    }
}

fn folded_lengths(turn: &crate::store::records::TurnRecord) -> (u32, u32) {
    let forward = derive_forward(&turn.user, &turn.assistant);
    (forward.len_user, forward.len_assistant)
}

/// Seconds since the Unix epoch of a timestamp as logs write them: RFC 3339 / ISO 8601
/// (`2025-10-02T07:00:18.358Z`, `2025-10-02 07:00:18+02:00`, `2025-10-02`; without an offset,
/// UTC) or Unix seconds (`1712131200.512`; milliseconds when above 10^11). Dates are checked
/// by jiff: `2024-02-31` or `25:00` is no time.
pub(crate) fn parse_time(text: &str) -> Option<f64> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        let value: f64 = text.parse().ok()?;
        return Some(if value > 1e11 { value / 1000.0 } else { value });
    }
    let seconds = |ts: jiff::Timestamp| ts.as_nanosecond() as f64 / 1e9;
    if let Ok(ts) = text.parse::<jiff::Timestamp>() {
        return Some(seconds(ts));
    }
    // No offset: a civil time (or date), read as UTC. One with an offset jiff refused above.
    if text.bytes().skip(10).any(|b| matches!(b, b'+' | b'-' | b'Z' | b'z')) {
        return None;
    }
    let civil = text.parse::<jiff::civil::DateTime>().ok()?;
    Some(seconds(jiff::tz::TimeZone::UTC.to_timestamp(civil).ok()?))
}

/// A timestamp as sessions report it: Unix seconds (`1712131200.512`, as ChatGPT exports
/// write them; milliseconds when above 10^11, as [`parse_time`] reads them) as RFC 3339 in
/// UTC (`2024-04-03T08:00:00.512Z`); any other text as the source wrote it.
pub(crate) fn display_time(text: String) -> String {
    epoch_as_rfc3339(&text).unwrap_or(text)
}

fn epoch_as_rfc3339(text: &str) -> Option<String> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole: i64 = whole.parse().ok()?;
    // Nanoseconds of a fraction of one `unit_nanos`, from its first digits (the rest is
    // below a nanosecond).
    let nanos_of = |unit_digits: usize| -> i64 {
        let kept: String = fraction.chars().chain(std::iter::repeat('0')).take(unit_digits).collect();
        kept.parse().unwrap_or(0)
    };
    let in_millis = text.parse::<f64>().is_ok_and(|v| v > 1e11);
    let (seconds, nanos) = if in_millis {
        (whole / 1000, (whole % 1000) * 1_000_000 + nanos_of(6))
    } else {
        (whole, nanos_of(9))
    };
    let nanos = i32::try_from(nanos).ok()?;
    Some(jiff::Timestamp::new(seconds, nanos).ok()?.to_string())
}

#[cfg(test)]
mod tests {
    use super::{display_time, parse_time};

    #[test]
    fn epoch_times_display_as_rfc3339_and_other_text_as_written() {
        let shown = |t: &str| display_time(t.to_string());
        assert_eq!(shown("1712131200"), "2024-04-03T08:00:00Z");
        assert_eq!(shown("1712131200.512"), "2024-04-03T08:00:00.512Z");
        assert_eq!(shown("1712131200.5123456789"), "2024-04-03T08:00:00.512345678Z");
        assert_eq!(shown("1712131200512"), "2024-04-03T08:00:00.512Z", "milliseconds");
        assert_eq!(shown("0"), "1970-01-01T00:00:00Z");
        assert_eq!(shown("12."), "1970-01-01T00:00:12Z");
        for kept in ["2025-10-02T07:00:18.358Z", "", ".5", "1e9", "-5", "9999999999999999999999", "x1"] {
            assert_eq!(shown(kept), kept, "{kept:?} is not Unix seconds: shown as written");
        }
        // The shown time is the time forget reads.
        for epoch in ["1712131200.512", "1712131200512", "1759388418.25"] {
            let (read, written) = (parse_time(&shown(epoch)).unwrap(), parse_time(epoch).unwrap());
            assert!((read - written).abs() < 1e-6, "{epoch}: {read} vs {written}");
        }
    }

    #[test]
    fn times_parse_and_order() {
        assert_eq!(parse_time("1970-01-02"), Some(86400.0));
        assert_eq!(parse_time("2025-10-02T07:00:18.5Z"), Some(1_759_388_418.5));
        assert_eq!(parse_time("2025-10-02T09:00:18.5+02:00"), parse_time("2025-10-02T07:00:18.5Z"));
        assert_eq!(parse_time("1712131200.512"), Some(1_712_131_200.512));
        assert_eq!(parse_time("1712131200512"), Some(1_712_131_200.512));
        assert!(parse_time("2024-01-01") < parse_time("2024-01-01T00:00:01Z"));
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2024-13-01"), None);
        assert_eq!(parse_time("2025-10-02T12:30:18+0530"), parse_time("2025-10-02T07:00:18Z"));
        assert_eq!(parse_time("2025-10-02T12:00:18+05"), parse_time("2025-10-02T07:00:18Z"));
        assert_eq!(parse_time("2025-10-02 07:00:18"), parse_time("2025-10-02T07:00:18Z"), "no offset: UTC");
    }

    #[test]
    fn impossible_dates_and_times_are_refused() {
        assert_eq!(parse_time("2024-02-31"), None);
        assert_eq!(parse_time("2024-02-31T99:99:99Z"), None);
        assert_eq!(parse_time("2023-02-29"), None);
        assert_eq!(parse_time("2024-02-29"), Some(1_709_164_800.0), "a leap day");
        assert_eq!(parse_time("2024-01-01T25:00:00Z"), None);
        assert_eq!(parse_time("2024-01-01T10:61:00+01:00"), None);
    }

    /// Found by `fuzz/fuzz_targets/date_parse.rs`: an offset whose minutes are a signed
    /// 19-digit number overflowed (a panic in a debug build, a wrong time in a release one).
    #[test]
    fn offsets_are_two_digits_each() {
        assert_eq!(parse_time("2025-10-02 04:00:25-10-3333333333366636366"), None);
        assert_eq!(parse_time("2025-10-02T04:00:25+05:-30"), None);
        assert_eq!(parse_time("2025-10-02T04:00:25+5:30"), None);
        assert_eq!(parse_time("2025-10-02T04:00:25+99999999999999:00"), None);
    }
}
