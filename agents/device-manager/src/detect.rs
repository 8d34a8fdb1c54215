//! One detection or monitor pass over a set of manufacturers: the PCI gate, the vendor detector,
//! panics turned into "could not measure", and the canonical order of the result.

use std::panic::{AssertUnwindSafe, catch_unwind};

use gpustack_api::{
    Manufacturer,
    devices::DevicesGroup,
    monitor::{AcceleratorMetrics, MetricsGroup},
    time::Timestamp,
};

use crate::{
    detector::{DetectContext, DetectError, Detector},
    pci,
    system_root::SystemRoot,
    vendors,
};

/// What to detect and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The manufacturers to detect or sample, as resolved from the command line.
    pub manufacturers: Vec<Manufacturer>,
    /// Skip the PCI scan (also skipped by itself on WSL kernels).
    pub no_pci_check: bool,
}

/// The outcome of one pass: what was measured, what could not be, and what to tell the operator.
#[derive(Debug)]
pub struct Report<T> {
    /// What was measured: one entry per accelerator group (`detect`) or per manufacturer
    /// (`monitor`).
    pub items: Vec<T>,
    /// Manufacturers that could not be measured, and why.
    pub failures: Vec<(Manufacturer, DetectError)>,
    /// Things the operator should know (missing library, unreadable field), printed on stderr.
    pub warnings: Vec<String>,
}

/// Detects every requested manufacturer's accelerators. Groups come out ordered by manufacturer,
/// then by their first accelerator's index.
pub fn detect(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    opts: &Options,
) -> Report<DevicesGroup> {
    let mut report = pass(root, env, opts, |d, ctx| d.detect(ctx));
    report.items.sort_by(|a, b| {
        (a.manufacturer, a.accelerators.first().map(|x| x.index))
            .cmp(&(b.manufacturer, b.accelerators.first().map(|x| x.index)))
    });
    report
}

/// Samples every requested manufacturer's accelerators; one group per manufacturer that has any.
pub fn monitor(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    opts: &Options,
) -> Report<MetricsGroup> {
    let sampled = pass(root, env, opts, |d, ctx| {
        let m = ctx.manufacturer.manufacturer;
        d.monitor(ctx).map(|samples| vec![(m, samples)])
    });
    let items = sampled
        .items
        .into_iter()
        .filter(|(_, samples)| !samples.is_empty())
        .map(
            |(manufacturer, accelerators): (Manufacturer, Vec<AcceleratorMetrics>)| MetricsGroup {
                manufacturer,
                timestamp: Timestamp::now_local(),
                accelerators,
            },
        )
        .collect();
    Report {
        items,
        failures: sampled.failures,
        warnings: sampled.warnings,
    }
}

fn pass<T>(
    root: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    opts: &Options,
    run: impl Fn(&dyn Detector, &mut DetectContext<'_>) -> Result<Vec<T>, DetectError>,
) -> Report<T> {
    let mut report = Report {
        items: Vec::new(),
        failures: Vec::new(),
        warnings: Vec::new(),
    };
    let pci_check = !opts.no_pci_check && !root.is_wsl();
    if !opts.no_pci_check && !pci_check {
        tracing::info!(
            "WSL kernel: PCI functions are not visible in sysfs, skipping the PCI check"
        );
    }
    let prefixes = pci::class_prefixes(env("GPUSTACK_PCI_CLASS_PREFIXES").as_deref());
    for &m in &opts.manufacturers {
        let resolved = m.resolve(env);
        let pci_devices = if pci_check {
            match pci::scan(root, &resolved.pci_vendor, &prefixes) {
                Ok(devices) if devices.is_empty() => {
                    tracing::debug!(manufacturer = %m, "no PCI function matches; library not loaded");
                    continue;
                }
                Ok(devices) => Some(devices),
                Err(source) => {
                    report.failures.push((
                        m,
                        DetectError::Io {
                            path: "/sys/bus/pci/devices".into(),
                            source,
                        },
                    ));
                    continue;
                }
            }
        } else {
            None
        };
        let detector = vendors::detector_for(m);
        let mut ctx = DetectContext {
            root,
            manufacturer: &resolved,
            pci: pci_devices.as_deref(),
            env,
            warnings: &mut report.warnings,
        };
        // A vendor library that panics must not take the other manufacturers down with it.
        let outcome = catch_unwind(AssertUnwindSafe(|| run(detector.as_ref(), &mut ctx)));
        match outcome {
            Ok(Ok(items)) => report.items.extend(items),
            Ok(Err(e)) => report.failures.push((m, e)),
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                report.failures.push((
                    m,
                    DetectError::Panicked {
                        manufacturer: m.to_string(),
                        message,
                    },
                ));
            }
        }
    }
    report
}
