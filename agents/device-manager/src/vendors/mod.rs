//! One detector per manufacturer, behind the same [`Detector`] interface, so that deepening one
//! vendor never touches another.

mod amd;
mod library_only;

use gpustack_api::Manufacturer;

use crate::detector::Detector;

pub fn detector_for(m: Manufacturer) -> Box<dyn Detector> {
    match m {
        Manufacturer::Amd => Box::new(amd::AmdSysfs),
        other => Box::new(library_only::LibraryGated(other)),
    }
}
