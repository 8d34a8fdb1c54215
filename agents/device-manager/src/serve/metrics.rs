//! Prometheus gauges for every card and, for cards held by Pods, the same figures labelled with
//! the holder's namespace, Pod and container, so that one query answers "which pod uses which
//! card". Values are set from the latest sample in the background; a scrape only encodes. A
//! figure the sample lacks is absent, never 0.

use gpustack_api::{
    devices::DevicesGroup,
    monitor::{AcceleratorMetrics, MetricsGroup},
};
use prometheus::{GaugeVec, IntCounter, Opts, Registry};

use crate::ledger::Ledger;

const CARD_LABELS: [&str; 4] = ["node", "manufacturer", "id", "index"];
const CONTAINER_LABELS: [&str; 8] = [
    "node",
    "manufacturer",
    "id",
    "index",
    "namespace",
    "pod",
    "container",
    "mode",
];

/// One figure: its name suffix, help, and how to read it from a sample.
struct Figure {
    name: &'static str,
    help: &'static str,
    read: fn(&AcceleratorMetrics) -> Option<f64>,
}

const FIGURES: [Figure; 7] = [
    Figure {
        name: "memory_total_mib",
        help: "Accelerator memory, MiB",
        read: |m| m.memory.map(|v| v as f64),
    },
    Figure {
        name: "memory_used_mib",
        help: "Accelerator memory in use, MiB",
        read: |m| m.memory_usage.map(|v| v as f64),
    },
    Figure {
        name: "memory_utilization_percent",
        help: "Accelerator memory in use, percent",
        read: |m| m.memory_utilization.map(f64::from),
    },
    Figure {
        name: "cores_utilization_percent",
        help: "Accelerator compute busy, percent",
        read: |m| m.cores_utilization.map(f64::from),
    },
    Figure {
        name: "temperature_celsius",
        help: "Accelerator temperature, degrees Celsius",
        read: |m| m.temperature.map(f64::from),
    },
    Figure {
        name: "power_usage_watts",
        help: "Accelerator power draw, watts",
        read: |m| m.power_usage.map(f64::from),
    },
    Figure {
        name: "unhealthy",
        help: "1 when the accelerator reports itself unhealthy",
        read: |m| Some(if m.unhealthy { 1.0 } else { 0.0 }),
    },
];

/// The gauges, registered in the registry passed in.
pub struct Metrics {
    card: Vec<GaugeVec>,
    container: Vec<GaugeVec>,
    passes: IntCounter,
}

impl Metrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let mut card = Vec::new();
        let mut container = Vec::new();
        for f in &FIGURES {
            let c = GaugeVec::new(
                Opts::new(format!("gpustack_accelerator_{}", f.name), f.help),
                &CARD_LABELS,
            )?;
            registry.register(Box::new(c.clone()))?;
            card.push(c);
            let p = GaugeVec::new(
                Opts::new(
                    format!("gpustack_container_accelerator_{}", f.name),
                    format!("{}, of a card held by the labelled container", f.help),
                ),
                &CONTAINER_LABELS,
            )?;
            registry.register(Box::new(p.clone()))?;
            container.push(p);
        }
        let passes = IntCounter::new(
            "gpustack_device_manager_monitor_passes_total",
            "Detection and monitor passes completed (one per --monitor-period)",
        )?;
        registry.register(Box::new(passes.clone()))?;
        Ok(Self {
            card,
            container,
            passes,
        })
    }

    /// Counts one completed pass.
    pub fn pass_done(&self) {
        self.passes.inc();
    }

    /// Replaces every series with the figures of `sample`.
    pub fn update(
        &self,
        node: &str,
        sample: &[MetricsGroup],
        spec: &[DevicesGroup],
        ledger: &Ledger,
    ) {
        for g in self.card.iter().chain(&self.container) {
            g.reset();
        }
        for group in sample {
            let m = group.manufacturer.as_str();
            for acc in &group.accelerators {
                let index = spec
                    .iter()
                    .filter(|g| g.manufacturer == group.manufacturer)
                    .flat_map(|g| &g.accelerators)
                    .find(|a| a.id == acc.id)
                    .map(|a| a.index.to_string())
                    .unwrap_or_default();
                let holders = ledger
                    .holders
                    .get(&acc.id)
                    .map(Vec::as_slice)
                    .unwrap_or_default();
                for (i, f) in FIGURES.iter().enumerate() {
                    let Some(v) = (f.read)(acc) else { continue };
                    self.card[i]
                        .with_label_values(&[node, m, &acc.id, &index])
                        .set(v);
                    for h in holders {
                        let mode = mode_word(h.mode);
                        self.container[i]
                            .with_label_values(&[
                                node,
                                m,
                                &acc.id,
                                &index,
                                &h.namespace,
                                &h.pod,
                                &h.container,
                                mode,
                            ])
                            .set(v);
                    }
                }
            }
        }
    }
}

fn mode_word(mode: u32) -> &'static str {
    gpustack_api::devices::AllocationMode::ALL
        .into_iter()
        .find(|m| *m as u32 == mode)
        .map_or("none", |m| m.as_str())
}

#[cfg(test)]
mod tests {
    use gpustack_api::{Manufacturer, devices::Accelerator, time::Timestamp};
    use prometheus::{Encoder, TextEncoder};

    use super::*;
    use crate::ledger::Holder;

    #[test]
    fn cards_and_holders_are_labelled_and_unmeasured_is_absent() {
        let registry = Registry::new();
        let metrics = Metrics::register(&registry).unwrap();
        let spec = vec![DevicesGroup {
            accelerators: vec![Accelerator {
                id: "GPU-a".into(),
                index: 3,
                ..Accelerator::default()
            }],
            ..DevicesGroup::new(Manufacturer::Nvidia, "h100", "H100", 1)
        }];
        let sample = vec![MetricsGroup {
            manufacturer: Manufacturer::Nvidia,
            timestamp: Timestamp::now_local(),
            accelerators: vec![AcceleratorMetrics {
                id: "GPU-a".into(),
                memory: Some(81559),
                memory_usage: Some(1024),
                ..Default::default()
            }],
        }];
        let mut ledger = Ledger::default();
        ledger.holders.insert(
            "GPU-a".into(),
            vec![Holder {
                namespace: "team".into(),
                pod: "llm".into(),
                container: "main".into(),
                mode: 3,
            }],
        );
        metrics.update("n1", &sample, &spec, &ledger);
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut text)
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains(r#"gpustack_accelerator_memory_total_mib{id="GPU-a",index="3",manufacturer="nvidia",node="n1"} 81559"#), "{text}");
        assert!(text.contains(r#"gpustack_container_accelerator_memory_used_mib{container="main",id="GPU-a",index="3",manufacturer="nvidia",mode="sliced",namespace="team",node="n1",pod="llm"} 1024"#), "{text}");
        assert!(
            !text.contains("gpustack_accelerator_temperature_celsius{"),
            "unmeasured is absent: {text}"
        );
        metrics.update("n1", &[], &spec, &ledger);
        let mut again = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut again)
            .unwrap();
        assert!(!String::from_utf8(again).unwrap().contains("GPU-a"));
    }
}
