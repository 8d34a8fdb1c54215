//! What the NVML-shaped libraries have in common above the C ABI: NVIDIA's NVML (through
//! nvml-wrapper), Iluvatar's IXML and T-Head's HGML enumerate cards by index, name them by UUID
//! and sample them with the same calls. [`NvmlShaped`] and [`Card`] are that shape; opening the
//! library, listing its cards, identifying one and taking the monitor sample are written once
//! here, and each detector keeps what its library does differently (the fields of a detection,
//! slicing, its symbol table in [`binding::Symbols`] and its pure `facts.rs`). NVML implements
//! the shape over nvml-wrapper; IXML and HGML, bound through the shared [`binding`], only say
//! their names and what their cards say differently ([`Bound`], [`BoundCard`]).

pub mod binding;

use std::{ffi::OsStr, fmt::Display, ops::Deref};

use gpustack_api::monitor::{AcceleratorMetrics, memory_utilization};

use super::ffi::OpenError;
use crate::detector::{DetectContext, DetectError};

const MIB: u64 = 1024 * 1024;

/// An initialised NVML-shaped library.
pub trait NvmlShaped {
    /// What a failed call answers.
    type Error: Display;
    /// One card's handle, valid while the library is.
    type Card<'a>: Card<Error = Self::Error>
    where
        Self: 'a;

    /// How messages name its cards and calls.
    const NAMES: Names;

    /// How many cards the library enumerates.
    fn count(&self) -> Result<u32, Self::Error>;
    /// The card at enumeration index `index`.
    fn card(&self, index: u32) -> Result<Self::Card<'_>, Self::Error>;
}

/// One card of an NVML-shaped library: what identity and the monitor sample read.
pub trait Card {
    /// What a failed call answers.
    type Error: Display;

    /// The accelerator id (the UUID call's answer, in the ledger's form).
    fn accelerator_id(&self) -> Result<String, Self::Error>;
    /// Whether the library holds something against the card (a refused query holds nothing).
    fn is_unhealthy(&self) -> bool;
    /// Memory as the library reports it usable; `None` when refused.
    fn usable_memory(&self) -> Option<Memory>;
    /// The GPU utilisation rate, percent.
    fn gpu_utilization(&self) -> Option<u32>;
    /// The GPU sensor's temperature, °C.
    fn gpu_temperature(&self) -> Option<u32>;
    /// Power draw, milliwatts.
    fn power_mw(&self) -> Option<u32>;
}

/// How messages name a library's cards and the calls that enumerate and identify them.
pub struct Names {
    /// One card (`NVIDIA GPU`, `T-Head PPU`).
    pub card: &'static str,
    /// The count call.
    pub count_call: &'static str,
    /// The handle-by-index call.
    pub handle_call: &'static str,
    /// The UUID call.
    pub uuid_call: &'static str,
    /// The product-name call.
    pub name_call: &'static str,
    /// The memory call a detection reads the card's size from.
    pub memory_call: &'static str,
}

impl Names {
    /// The answer of a call a card cannot be listed without; `None`, with a warning naming
    /// the card and the call, when the call failed.
    pub fn required<T, E: Display>(
        &self,
        ctx: &mut DetectContext<'_>,
        index: u32,
        call: &str,
        answer: Result<T, E>,
    ) -> Option<T> {
        match answer {
            Ok(value) => Some(value),
            Err(e) => {
                ctx.warn(format!(
                    "{} {index}: {call} failed ({e}); left out",
                    self.card
                ));
                None
            }
        }
    }
}

/// A library bound through [`binding`] (IXML, HGML): the shared calls are the binding's, so its
/// [`NvmlShaped`] and its cards' [`Card`] follow from this: its names, and what its cards say
/// differently ([`BoundCard`]).
pub trait Bound {
    /// Its card handle, the shared calls through `Deref`.
    type BoundCard<'a>: BoundCard<'a>
    where
        Self: 'a;

    /// How messages name its cards and calls.
    const NAMES: Names;

    /// The shared calls.
    fn shared(&self) -> &binding::NvmlShapedLibrary;
    /// The card at enumeration index `index`.
    fn bound_card(&self, index: u32) -> Result<Self::BoundCard<'_>, binding::Status>;
}

/// A card of a [`Bound`] library: what it says that the shared calls do not.
pub trait BoundCard<'a>: Deref<Target = binding::Device<'a>> {
    /// Whether the library holds something against the card (a refused query holds nothing).
    fn unhealthy(&self) -> bool;
    /// Its memory by the library's best call: the shared v1 record unless it has a better one.
    fn memory_figures(&self) -> Result<Memory, binding::Status> {
        self.deref().memory()
    }
}

impl<L: Bound> NvmlShaped for L {
    type Error = binding::Status;
    type Card<'a>
        = L::BoundCard<'a>
    where
        Self: 'a;

    const NAMES: Names = <L as Bound>::NAMES;

    fn count(&self) -> Result<u32, binding::Status> {
        self.shared().device_count()
    }

    fn card(&self, index: u32) -> Result<Self::Card<'_>, binding::Status> {
        self.bound_card(index)
    }
}

impl<'a, C: BoundCard<'a>> Card for C {
    type Error = binding::Status;

    fn accelerator_id(&self) -> Result<String, binding::Status> {
        self.uuid()
    }

    fn is_unhealthy(&self) -> bool {
        self.unhealthy()
    }

    fn usable_memory(&self) -> Option<Memory> {
        self.memory_figures().ok()
    }

    fn gpu_utilization(&self) -> Option<u32> {
        self.utilization().ok().map(|(gpu, _)| gpu)
    }

    fn gpu_temperature(&self) -> Option<u32> {
        self.temperature().ok()
    }

    fn power_mw(&self) -> Option<u32> {
        self.power_usage_mw().ok()
    }
}

/// Memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    pub total: u64,
    pub used: u64,
}

/// What to tell an operator when the library is missing, unloadable or does not initialise.
pub struct Hints {
    /// No file found: what to install or mount.
    pub locate: &'static str,
    /// Found but not loadable, or not this library.
    pub install: &'static str,
    /// Loaded but its init failed: usually the kernel driver.
    pub driver: &'static str,
}

/// An initialised library and the name to use for it in messages.
pub struct Session<L> {
    pub lib: L,
    pub library: String,
}

/// Finds the library and opens it with `open`. `None` (with a warning where it matters) when
/// the library is absent, unloadable or will not initialise: that is a measurement ("no
/// accelerators of this manufacturer here").
pub fn open<L>(
    ctx: &mut DetectContext<'_>,
    hints: &Hints,
    open: impl FnOnce(&OsStr) -> Result<L, OpenError>,
) -> Option<Session<L>> {
    let found = ctx.locate_library(hints.locate)?;
    match open(&found.path) {
        Ok(lib) => Some(Session {
            lib,
            library: found.shown,
        }),
        Err(e @ OpenError::Init { .. }) => {
            ctx.library_unusable(&found, format!("did not initialise: {e}"), hints.driver);
            None
        }
        Err(e) => {
            ctx.library_unusable(&found, e, hints.install);
            None
        }
    }
}

impl<L: NvmlShaped> Session<L> {
    /// The cards in the library's order; one the library refuses is reported and left out.
    /// The count itself failing means "could not measure".
    pub fn cards(
        &self,
        ctx: &mut DetectContext<'_>,
    ) -> Result<Vec<(u32, L::Card<'_>)>, DetectError> {
        let count = self.lib.count().map_err(|e| DetectError::LibraryCall {
            library: self.library.clone(),
            call: L::NAMES.count_call,
            message: e.to_string(),
        })?;
        let mut cards = Vec::with_capacity(count as usize);
        for index in 0..count {
            let names = &L::NAMES;
            if let Some(card) = names.required(ctx, index, names.handle_call, self.lib.card(index))
            {
                cards.push((index, card));
            }
        }
        Ok(cards)
    }

    /// One sample of every card the library can identify.
    pub fn monitor(
        &self,
        ctx: &mut DetectContext<'_>,
    ) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        let mut samples = Vec::new();
        for (index, card) in self.cards(ctx)? {
            let Some(who) = identity::<L>(index, &card, ctx) else {
                continue;
            };
            let memory = card.usable_memory();
            let total = memory.map(|m| m.total / MIB);
            let used = memory.map(|m| m.used / MIB);
            samples.push(AcceleratorMetrics {
                id: who.id,
                memory: total,
                memory_usage: used,
                memory_utilization: used.zip(total).and_then(|(u, t)| memory_utilization(u, t)),
                // Not reported for an NVIDIA card in MIG mode: absent then, never 0.
                cores_utilization: card.gpu_utilization().map(|gpu| gpu.min(100)),
                temperature: card.gpu_temperature().and_then(|t| i32::try_from(t).ok()),
                power_usage: card.power_mw().map(watts),
                unhealthy: who.unhealthy,
            });
        }
        Ok(samples)
    }
}

/// What one card told us that both detect and monitor need.
pub struct Identity {
    pub id: String,
    pub unhealthy: bool,
}

/// The card's id and health; `None` (with a warning) when it has no id, since without one it
/// cannot enter the ledger.
pub fn identity<L: NvmlShaped>(
    index: u32,
    card: &L::Card<'_>,
    ctx: &mut DetectContext<'_>,
) -> Option<Identity> {
    let names = &L::NAMES;
    let id = names.required(ctx, index, names.uuid_call, card.accelerator_id())?;
    if id.is_empty() {
        ctx.warn(format!(
            "{} {index}: {} answered an empty id; left out",
            names.card, names.uuid_call
        ));
        return None;
    }
    Some(Identity {
        id,
        unhealthy: card.is_unhealthy(),
    })
}

/// A [`Bound`] library's card's product name and memory in MiB, which a detection cannot do
/// without; `None` (with a warning naming the call) when either call failed.
pub fn name_and_memory<'a>(
    names: &Names,
    ctx: &mut DetectContext<'_>,
    index: u32,
    card: &impl BoundCard<'a>,
) -> Option<(String, u64)> {
    let name = names.required(ctx, index, names.name_call, card.name())?;
    let memory = names.required(ctx, index, names.memory_call, card.memory_figures())?;
    Some((name, memory.total / MIB))
}

/// Whole watts from milliwatts, rounded down as the reference does.
pub fn watts(milliwatts: u32) -> u32 {
    milliwatts / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watts_round_down() {
        assert_eq!(watts(93_500), 93);
        assert_eq!(watts(71_999), 71);
        assert_eq!(watts(999), 0);
    }
}
