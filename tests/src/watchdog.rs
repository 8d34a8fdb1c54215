//! A memory watchdog for attack tests: samples a process's resident size (`VmRSS` of
//! `/proc/PID/status`) every 20 ms and kills the process once it has grown past a bound, so that
//! a regression fails the test instead of exhausting the machine.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

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

/// Samples until dropped; the peak seen.
pub struct Watchdog {
    /// The resident size when it started, in KiB.
    pub baseline: u64,
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Watchdog {
    /// Watches `pid`, killing it (SIGKILL) once it has grown by `bound_kb` or more.
    pub fn on(pid: u32, bound_kb: u64) -> Self {
        let baseline = rss_kb(pid).expect("the process's /proc status");
        let peak = Arc::new(AtomicU64::new(baseline));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some(kb) = rss_kb(pid) {
                    p.fetch_max(kb, Ordering::Relaxed);
                    if kb.saturating_sub(baseline) >= bound_kb {
                        let _ = std::process::Command::new("kill")
                            .args(["-KILL", &pid.to_string()])
                            .status();
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        Watchdog {
            baseline,
            peak,
            stop,
        }
    }

    /// The most it has seen, in KiB.
    pub fn peak_kb(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    /// How far the peak is above the baseline, in KiB.
    pub fn growth_kb(&self) -> u64 {
        self.peak_kb().saturating_sub(self.baseline)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
