//! Cambricon MLUs through CNDev, the MLU driver package's management library (`libcndev.so`),
//! loaded at run time by path so that a node without the driver still runs.
//!
//! The library is located under the system root (`crate::library::locate`: `$NEUWARE_HOME/lib64`,
//! else `/usr/local/neuware/lib64`, then the system directories); only when the root is the real
//! `/` and no known directory has it does loading fall back to the dynamic loader's search. A
//! fixture root therefore never reaches a host's real driver.
//!
//! Enumeration is CNDev's own order: `cndevGetDeviceCount`, then card `i` (0, 1, …) through its
//! `cndevGetDeviceHandleByIndex` handle (the index itself where that call is not exported). Read
//! per card:
//! - `cndevGetUUID`: `id` = `MLU-<uuid>` ([`facts::accelerator_id`]);
//! - `index` = `i`, `physicalIndexes` = `[i]` (the card's `/dev/cambricon_dev<i>`);
//! - `cndevGetCardNameStringByDevId`: name (`MLU370-X8`, [`facts::product_name`]);
//! - `cndevGetMemoryUsage`: memory (`physicalMemoryTotal`, MB);
//! - `cndevGetCoreCount`: `cores` (MLU cores);
//! - `cndevGetCardHealthState` (`health` 0) or `cndevGetECCInfo` (`uncorrectedError` > 0):
//!   `unhealthy`;
//! - `cndevGetPCIeInfo`: the bus id that finds the PCI function (topology).
//!
//! Per node: `cndevGetVersionInfo` of the first card that answers (`driverVersion`,
//! `major.minor.build`) and the toolkit's `version.txt` (`runtimeVersion`, see
//! [`toolkit_version`]); logical slicing is the manufacturer table's (16, no overcommit). The
//! monitor adds `cndevGetDeviceUtilizationInfo` (`averageCoreUtilization`),
//! `cndevGetTemperatureInfo` (chip, else board) and `cndevGetPowerInfo` (W). A figure CNDev
//! refuses is absent, never 0.

mod cndev;
mod facts;
mod smlu;

pub use smlu::SmluMode;

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, AcceleratorStatus, DeviceTopology, DevicesGroup, LogicalSliced},
    monitor::{AcceleratorMetrics, memory_utilization},
};

use self::cndev::{CndevLibrary, Handle};
use super::ffi::CallError;
use crate::{
    detector::{DetectContext, DetectError, Detector},
    grouping::{self, Detected},
    pci,
    system_root::SystemRoot,
};

/// The Cambricon detector.
pub struct Cndev;

/// A loaded and initialised CNDev, and the name to use for it in messages.
struct Session {
    cndev: CndevLibrary,
    library: String,
}

/// One card as CNDev enumerates it.
struct Card {
    index: u32,
    handle: Handle,
    id: String,
}

impl Session {
    fn call_error(&self, e: CallError) -> DetectError {
        e.detect_error(&self.library)
    }

    /// Every card CNDev can identify, in CNDev order. A card without a handle or a UUID is
    /// reported and left out (it cannot enter the ledger without an id); the count itself
    /// failing means "could not measure".
    fn cards(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<Card>, DetectError> {
        let count = self.cndev.device_count().map_err(|e| self.call_error(e))?;
        let mut cards = Vec::new();
        for index in 0..count {
            let handle = match self.cndev.handle(index) {
                Ok(h) => h,
                Err(e) => {
                    ctx.warn(format!("Cambricon MLU {index}: {e}; left out"));
                    continue;
                }
            };
            let id = match self.cndev.uuid(handle) {
                Ok(uuid) => facts::accelerator_id(&uuid),
                Err(e) => {
                    ctx.warn(format!("Cambricon MLU {index}: {e}; left out"));
                    continue;
                }
            };
            let Some(id) = id else {
                ctx.warn(format!(
                    "Cambricon MLU {index}: cndevGetUUID gave an empty UUID; left out"
                ));
                continue;
            };
            cards.push(Card { index, handle, id });
        }
        Ok(cards)
    }

    /// Physical memory (total, used) in MiB; `None` when CNDev does not report a total.
    fn memory(&self, card: &Card) -> Option<(u64, Option<u64>)> {
        let m = self
            .cndev
            .memory(card.handle)
            .inspect_err(|e| tracing::debug!("Cambricon MLU {}: {e}", card.index))
            .ok()?;
        let total = facts::memory_mib(m.total_mb)?;
        let used = u64::try_from(m.used_mb).ok();
        Some((total, used))
    }

    /// Health state and uncorrected ECC errors; refused queries hold nothing against the card.
    fn unhealthy(&self, card: &Card) -> bool {
        let health = self.answer(card, self.cndev.health(card.handle));
        let ecc = self.answer(card, self.cndev.ecc_uncorrected(card.handle));
        facts::unhealthy(health, ecc)
    }

    /// The topology of the PCI function at CNDev's bus id; only the bus id when sysfs lacks it.
    fn topology(&self, card: &Card, ctx: &DetectContext<'_>) -> DeviceTopology {
        let address = self.answer(card, self.cndev.pcie_address(card.handle));
        ctx.topology(
            address.map(|a| {
                pci::normalize_bus_id(&facts::bus_id(a.domain, a.bus, a.device, a.function))
            }),
        )
    }

    /// The driver version of the first card that reports one.
    fn driver_version(&self, cards: &[Card]) -> Option<String> {
        cards.iter().find_map(|card| {
            let v = self.answer(card, self.cndev.driver_version(card.handle))?;
            facts::driver_version(v.major, v.minor, v.build)
        })
    }

    /// An optional figure: the value, or `None` with the reason at debug level (a product
    /// lacking a query is normal, not worth a warning on every pass).
    fn answer<T>(&self, card: &Card, result: Result<T, CallError>) -> Option<T> {
        result
            .inspect_err(|e| {
                if cndev::is_not_supported(e) {
                    tracing::debug!("Cambricon MLU {}: {e}", card.index);
                } else {
                    tracing::info!("Cambricon MLU {}: {e}", card.index);
                }
            })
            .ok()
    }
}

/// Finds, loads and initialises CNDev. `None` (with a warning where it matters) when the
/// library is absent, unloadable or the driver does not answer: a measurement ("no Cambricon
/// MLUs here").
fn open(ctx: &mut DetectContext<'_>) -> Option<Session> {
    let found = ctx.locate_library("mount the MLU driver's /usr/local/neuware")?;
    let mut cndev = match CndevLibrary::open(&found.path) {
        Ok(l) => l,
        Err(e) => {
            ctx.library_unusable(&found, e, "mount the MLU driver's /usr/local/neuware");
            return None;
        }
    };
    if let Err(e) = cndev.init() {
        ctx.library_unusable(
            &found,
            format!("did not initialise: {e}"),
            "is the MLU driver loaded?",
        );
        return None;
    }
    Some(Session {
        cndev,
        library: found.shown,
    })
}

/// Where the Neuware toolkit's `version.txt` may be, in order: `$NEUWARE_HOME/version.txt`,
/// then `/usr/local/neuware/version.txt` (the reference reads only the latter).
fn toolkit_files(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let spec = Manufacturer::Cambricon.spec();
    let mut homes: Vec<String> = spec.home_env.iter().filter_map(|v| env(v)).collect();
    homes.extend(spec.default_home.map(str::to_owned));
    let mut files: Vec<String> = homes
        .iter()
        .filter(|h| !h.is_empty())
        .map(|h| format!("{}/version.txt", h.trim_end_matches('/')))
        .collect();
    files.dedup();
    files
}

/// The toolkit release (`3.8.4`) from the first `version.txt` that names one, read under the
/// system root; `None` when no toolkit is mounted (the device manager usually sees only the
/// driver's libraries).
fn toolkit_version(root: &SystemRoot, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    toolkit_files(env).iter().find_map(|file| {
        root.read_attr(file)
            .and_then(|t| facts::toolkit_version(&t))
    })
}

/// Logical slicing from the manufacturer table (16 slices, cores not overcommitted).
fn logical_slicing() -> Option<LogicalSliced> {
    Manufacturer::Cambricon
        .spec()
        .logical_slicing
        .map(|s| LogicalSliced {
            cores_percentage_overcommit: s.cores_percentage_overcommit,
            count: s.count,
        })
}

impl Detector for Cndev {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let cards = session.cards(ctx)?;
        let driver_version = session.driver_version(&cards).unwrap_or_default();
        let runtime_version = toolkit_version(ctx.root, ctx.env).unwrap_or_default();
        let with_memory = ctx.group_id_with_memory();

        let mut detected = Vec::new();
        for card in &cards {
            let Some((memory_mib, _)) = session.memory(card) else {
                ctx.warn(format!(
                    "Cambricon MLU {}: cndevGetMemoryUsage reported no memory; left out",
                    card.index
                ));
                continue;
            };
            let name = session.answer(card, session.cndev.card_name(card.handle));
            let mut group = DevicesGroup::new(Manufacturer::Cambricon, "", "", 0);
            group.cores = session
                .answer(card, session.cndev.core_count(card.handle))
                .and_then(facts::cores);
            group.driver_version = driver_version.clone();
            group.runtime_version = runtime_version.clone();
            detected.push(Detected {
                name: facts::product_name(name.flatten().as_deref()),
                memory_mib,
                group,
                accelerator: Accelerator {
                    id: card.id.clone(),
                    index: card.index,
                    physical_indexes: vec![card.index],
                    topology: session.topology(card, ctx),
                    status: AcceleratorStatus {
                        unhealthy: session.unhealthy(card),
                        logical_sliced: logical_slicing(),
                        physical_sliced: None,
                    },
                },
            });
        }
        Ok(grouping::group(
            Manufacturer::Cambricon,
            detected,
            with_memory,
        ))
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let Some(session) = open(ctx) else {
            return Ok(Vec::new());
        };
        let mut samples = Vec::new();
        for card in session.cards(ctx)? {
            let memory = session.memory(&card);
            let total = memory.map(|(t, _)| t);
            let used = memory.and_then(|(_, u)| u);
            let temperatures = session.answer(&card, session.cndev.temperatures(card.handle));
            samples.push(AcceleratorMetrics {
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                cores_utilization: session
                    .answer(&card, session.cndev.core_utilization(card.handle))
                    .and_then(facts::percent),
                temperature: temperatures.and_then(|t| facts::temperature(t.chip, t.board)),
                power_usage: session
                    .answer(&card, session.cndev.power_watts(card.handle))
                    .and_then(facts::watts),
                unhealthy: session.unhealthy(&card),
                id: card.id,
            });
        }
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neuware_home_wins_for_the_library_and_the_toolkit_version() {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        let none = |_: &str| None;
        assert_eq!(toolkit_version(&root, &none), None);

        let default = root.path("/usr/local/neuware/version.txt");
        std::fs::create_dir_all(default.parent().unwrap()).unwrap();
        std::fs::write(&default, "Neuware Version 3.8.4\n").unwrap();
        assert_eq!(toolkit_version(&root, &none).as_deref(), Some("3.8.4"));

        let home = root.path("/opt/neuware/version.txt");
        std::fs::create_dir_all(home.parent().unwrap()).unwrap();
        std::fs::write(&home, "Neuware Version 3.10.2\n").unwrap();
        let env = |k: &str| (k == "NEUWARE_HOME").then(|| "/opt/neuware/".to_owned());
        assert_eq!(toolkit_version(&root, &env).as_deref(), Some("3.10.2"));
        assert!(
            crate::library::search_dirs(Manufacturer::Cambricon.spec(), &env)
                .contains(&"/opt/neuware/lib64".to_owned())
        );
    }

    #[test]
    fn slicing_is_the_manufacturer_tables() {
        assert_eq!(
            logical_slicing(),
            Some(LogicalSliced {
                cores_percentage_overcommit: false,
                count: 16
            })
        );
    }
}
