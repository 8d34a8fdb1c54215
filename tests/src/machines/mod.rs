//! Host trees of real machines, built with [`crate::sysfs::HostTree`].

pub mod amd;
pub mod ascend;
pub mod cambricon;
pub mod hygon;
pub mod iluvatar;
pub mod metax;
pub mod mthreads;
pub mod nvidia;
pub mod thead;
