//! Small measuring helpers shared by `measure` and the `compare` tool: timed calls,
//! percentiles, and the peak resident set size of this process (Linux `/proc/self/status`).

use std::time::{Duration, Instant};

/// Runs `f(i)` for `i` in `0..n`, timing each call.
pub fn time_each(n: usize, mut f: impl FnMut(usize) -> anyhow::Result<()>) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let started = Instant::now();
        f(i)?;
        times.push(started.elapsed());
    }
    Ok(times)
}

/// The `q` quantile (0.0–1.0, nearest rank) of `times`; zero for no times.
pub fn quantile(times: &[Duration], q: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    match sorted.len() {
        0 => Duration::ZERO,
        n => sorted[((n - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize],
    }
}

/// A duration in milliseconds with three decimals, such as `0.153 ms`.
pub fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Prints one line of latency figures: p50, p90, p99, max and mean of `times`.
pub fn report(what: &str, times: &[Duration]) {
    if times.is_empty() {
        println!("{what:<12} no calls");
        return;
    }
    let mean = times.iter().sum::<Duration>() / times.len() as u32;
    println!(
        "{what:<12} p50 {} | p90 {} | p99 {} | max {} | mean {} ({} calls)",
        ms(quantile(times, 0.5)),
        ms(quantile(times, 0.9)),
        ms(quantile(times, 0.99)),
        ms(quantile(times, 1.0)),
        ms(mean),
        times.len()
    );
}

/// A `VmHWM`/`VmRSS` line of /proc/self/status, in KiB.
pub fn vm_kib(field: &str) -> Option<u64> {
    status_kib("/proc/self/status", field)
}

/// A `VmHWM`/`VmRSS` line of another process's `/proc/<pid>/status`, in KiB.
pub fn process_vm_kib(pid: u32, field: &str) -> Option<u64> {
    status_kib(&format!("/proc/{pid}/status"), field)
}

fn status_kib(path: &str, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(path).ok()?;
    let line = status.lines().find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?;
    line[field.len() + 1..].trim().trim_end_matches("kB").trim().parse().ok()
}

/// Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs), so a later peak covers
/// only what follows. Returns false if the kernel refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}
