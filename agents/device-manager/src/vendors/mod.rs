//! One detector per manufacturer, behind the same [`Detector`] interface, so that deepening one
//! vendor never touches another.

mod amdgpu;
mod ascend;
mod cambricon;
mod iluvatar;
mod metax;
mod mthreads;
mod nvidia;
mod thead;

use gpustack_api::Manufacturer;

use crate::detector::Detector;

pub fn detector_for(m: Manufacturer) -> Box<dyn Detector> {
    match m {
        Manufacturer::Amd => Box::new(amdgpu::AMD),
        Manufacturer::Hygon => Box::new(amdgpu::HYGON),
        Manufacturer::Nvidia => Box::new(nvidia::Nvml),
        Manufacturer::Ascend => Box::new(ascend::Dcmi),
        Manufacturer::Cambricon => Box::new(cambricon::Cndev),
        Manufacturer::Iluvatar => Box::new(iluvatar::Ixml),
        Manufacturer::Metax => Box::new(metax::Mxsml),
        Manufacturer::Mthreads => Box::new(mthreads::Mtml),
        Manufacturer::Thead => Box::new(thead::Hgml),
    }
}
