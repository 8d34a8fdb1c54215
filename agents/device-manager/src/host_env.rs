//! The environment lookup `main` passes down (toolkit homes, `GPUSTACK_*` switches): no module
//! of this crate reads `std::env` itself. A leaf, so that the serve loop, the device plugins and
//! the vendor libraries can all name it without importing one another.

use std::sync::Arc;

/// A shared environment lookup: the value of a variable, `None` when unset.
pub type Env = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;
