//! Ascend's container-share flag through DCMI: per chip (card id, device id in card, the second
//! and third of an NPU's `physicalIndexes`), off after every reboot, needed on for a chip to be
//! opened by more than one container (sliced, shared and visibility allocations).

use std::ffi::OsStr;

use gpustack_api::devices::Accelerator;

use super::dcmi::DcmiLibrary;
use crate::vendors::{SharingSwitch, SwitchError};

/// A loaded, initialised DCMI, used for the container-share flag only.
pub struct ContainerShare {
    dcmi: DcmiLibrary,
}

impl ContainerShare {
    pub fn open(path: &OsStr) -> Result<Self, SwitchError> {
        let library = |reason: String| SwitchError::Library {
            library: path.to_string_lossy().into_owned(),
            reason,
        };
        let dcmi = DcmiLibrary::open(path).map_err(|e| library(e.to_string()))?;
        dcmi.init()
            .map_err(|e| library(format!("did not initialise: {e}")))?;
        Ok(Self { dcmi })
    }
}

/// The NPU's (card id, device id in card).
fn address(a: &Accelerator) -> Result<(i32, i32), SwitchError> {
    let at = |i: usize, what| {
        a.physical_indexes
            .get(i)
            .and_then(|&v| i32::try_from(v).ok())
            .ok_or(SwitchError::Address { what })
    };
    Ok((at(1, "card id")?, at(2, "device id in card")?))
}

impl SharingSwitch for ContainerShare {
    fn capability(&self) -> &'static str {
        "container-share"
    }

    fn by_hand(&self, a: &Accelerator, on: bool) -> String {
        match address(a) {
            Ok((card, device)) => format!(
                "npu-smi set -t device-share -i {card} -c {device} -d {}",
                u8::from(on)
            ),
            Err(_) => format!("npu-smi set -t device-share -d {}", u8::from(on)),
        }
    }

    fn is_on(&self, a: &Accelerator) -> Result<bool, SwitchError> {
        let (card, device) = address(a)?;
        self.dcmi
            .share_enabled(card, device)
            .map_err(|e| SwitchError::Call(e.to_string()))
    }

    fn set(&self, a: &Accelerator, on: bool) -> Result<(), SwitchError> {
        let (card, device) = address(a)?;
        self.dcmi
            .set_share_enabled(card, device, on)
            .map_err(|e| SwitchError::Call(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addressed_by_card_and_device() {
        let a = Accelerator {
            physical_indexes: vec![5, 3, 1],
            ..Default::default()
        };
        assert_eq!(address(&a).unwrap(), (3, 1));
        assert!(matches!(
            address(&Accelerator {
                physical_indexes: vec![5],
                ..Default::default()
            }),
            Err(SwitchError::Address { what: "card id" })
        ));
    }
}
