//! Sampling a process under attack from `/proc` while a test runs: [`Peak`] keeps the most a
//! sample read, and [`Watchdog`] is a peak of the resident size (`VmRSS`) that kills the
//! process once it has grown past a bound, so that a regression fails the test instead of
//! exhausting the machine.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

/// How often a [`Peak`] samples.
const EVERY: Duration = Duration::from_millis(20);

/// The resident size of `pid` in KiB, while it runs.
pub fn rss_kb(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// How many descriptors `pid` has open.
pub fn open_fds(pid: u32) -> u64 {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64)
}

/// The most `sample` has read, sampled every 20 ms on a thread of its own until dropped (or
/// until `sample` answers `None`).
pub struct Peak {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Peak {
    pub fn on(start: u64, mut sample: impl FnMut() -> Option<u64> + Send + 'static) -> Self {
        let peak = Arc::new(AtomicU64::new(start));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            // A sampling period, not a wait for a condition.
            while !s.load(Ordering::Relaxed) {
                match sample() {
                    Some(v) => p.fetch_max(v, Ordering::Relaxed),
                    None => return,
                };
                std::thread::sleep(EVERY);
            }
        });
        Peak { peak, stop }
    }

    /// The most read so far.
    pub fn get(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for Peak {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// The peak resident size of a process, which is killed once it has grown past a bound.
pub struct Watchdog {
    /// The resident size when it started, in KiB.
    pub baseline: u64,
    peak: Peak,
}

impl Watchdog {
    /// Watches `pid`, killing it (SIGKILL) once it has grown by `bound_kb` or more.
    pub fn on(pid: u32, bound_kb: u64) -> Self {
        let baseline = rss_kb(pid).expect("the process's /proc status");
        let peak = Peak::on(baseline, move || {
            let kb = rss_kb(pid)?;
            if kb.saturating_sub(baseline) >= bound_kb {
                let _ = std::process::Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                return None;
            }
            Some(kb)
        });
        Watchdog { baseline, peak }
    }

    /// The most it has seen, in KiB.
    pub fn peak_kb(&self) -> u64 {
        self.peak.get()
    }

    /// How far the peak is above the baseline, in KiB.
    pub fn growth_kb(&self) -> u64 {
        self.peak_kb().saturating_sub(self.baseline)
    }
}
