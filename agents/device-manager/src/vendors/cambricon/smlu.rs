//! Cambricon's sMLU mode through CNDev: per card (addressed by its CNDev index, the card's
//! `index`), needed on for the card to be carved into sMLU instances (sliced allocations).

use std::ffi::OsStr;

use gpustack_api::devices::Accelerator;

use super::cndev::CndevLibrary;
use crate::vendors::{SharingSwitch, SwitchError};

/// A loaded, initialised CNDev, used for the sMLU mode only.
pub struct SmluMode {
    cndev: CndevLibrary,
}

impl SmluMode {
    pub fn open(path: &OsStr) -> Result<Self, SwitchError> {
        let library = |reason: String| SwitchError::Library {
            library: path.to_string_lossy().into_owned(),
            reason,
        };
        let mut cndev = CndevLibrary::open(path).map_err(|e| library(e.to_string()))?;
        cndev
            .init()
            .map_err(|e| library(format!("did not initialise: {e}")))?;
        Ok(Self { cndev })
    }
}

impl SharingSwitch for SmluMode {
    fn capability(&self) -> &'static str {
        "smlu-mode"
    }

    fn by_hand(&self, a: &Accelerator, on: bool) -> String {
        format!(
            "cnmon set -c {} -smlu {}",
            a.index,
            if on { "on" } else { "off" }
        )
    }

    fn is_on(&self, a: &Accelerator) -> Result<bool, SwitchError> {
        let call = |e: crate::vendors::ffi::CallError| SwitchError::Call(e.to_string());
        let handle = self.cndev.handle(a.index).map_err(call)?;
        self.cndev.smlu_mode(handle).map_err(call)
    }

    fn set(&self, a: &Accelerator, on: bool) -> Result<(), SwitchError> {
        let call = |e: crate::vendors::ffi::CallError| SwitchError::Call(e.to_string());
        let handle = self.cndev.handle(a.index).map_err(call)?;
        self.cndev.set_smlu_mode(handle, on).map_err(call)
    }
}
