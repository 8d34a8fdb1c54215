//! A memory watchdog for attack tests: samples the resident size of the process under attack
//! from /proc and kills it past a growth bound, so that a regression fails the test rather than
//! exhausting the machine.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::Duration,
};

/// Resident memory of `pid` in KiB (`VmRSS` of `/proc/PID/status`).
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

/// Samples the process's resident size every 20 ms until dropped, keeping the peak; past
/// `bound_kb` of growth it kills the process at once.
pub struct Watchdog {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    baseline: u64,
}

impl Watchdog {
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
            peak,
            stop,
            baseline,
        }
    }

    /// The most the process grew past its size when the watchdog started, in KiB.
    pub fn growth_kb(&self) -> u64 {
        self.peak
            .load(Ordering::Relaxed)
            .saturating_sub(self.baseline)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
