//! How the controllers learn a manufacturer's facts as this deployment configures them
//! (`GPUSTACK_<MFR>_*`): a function handed in, so that no controller reads the environment.

use gpustack_api::{Manufacturer, manufacturer::ResolvedManufacturer};

/// A manufacturer's facts as this deployment configures them.
pub type Resolve = dyn Fn(Manufacturer) -> ResolvedManufacturer + Send + Sync;
