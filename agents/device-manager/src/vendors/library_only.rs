//! Manufacturers recognised at the PCI level whose management library this build does not read
//! yet. Where the library is absent (the usual case in a container without the vendor's mounts)
//! the node reports no accelerators and a warning names the library and where it was looked for;
//! preflight's host cross-check is what tells that apart from a node without the hardware.

use gpustack_api::{Manufacturer, devices::DevicesGroup, monitor::AcceleratorMetrics};

use crate::{
    detector::{DetectContext, DetectError, Detector},
    library::{self, Located},
};

pub struct LibraryGated(pub Manufacturer);

impl LibraryGated {
    fn explain(&self, ctx: &mut DetectContext<'_>) {
        let Some(pci) = ctx.pci else {
            return;
        };
        let spec = self.0.spec();
        let functions = pci
            .iter()
            .map(|d| d.bus_id.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        let message = match library::locate(ctx.root, spec, ctx.env) {
            None => format!(
                "found {} {} PCI function(s) ({functions}) but none of {} under {}; reporting no accelerators (mount the vendor's libraries)",
                pci.len(),
                self.0,
                spec.libraries.join(", "),
                library::search_dirs(spec, ctx.env).join(":"),
            ),
            Some(Located::Path(p)) => format!(
                "found {} {} PCI function(s) ({functions}) and {}, but reading {} accelerators is not supported in this build yet; reporting none",
                pci.len(),
                self.0,
                ctx.root.host_path(&p).display(),
                self.0,
            ),
            Some(Located::LoaderSearch(name)) => format!(
                "found {} {} PCI function(s) ({functions}); {name} is not in any known directory and reading {} accelerators is not supported in this build yet; reporting none",
                pci.len(),
                self.0,
                self.0,
            ),
        };
        ctx.warn(message);
    }
}

impl Detector for LibraryGated {
    fn detect(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<DevicesGroup>, DetectError> {
        self.explain(ctx);
        Ok(Vec::new())
    }

    fn monitor(&self, ctx: &mut DetectContext<'_>) -> Result<Vec<AcceleratorMetrics>, DetectError> {
        self.explain(ctx);
        Ok(Vec::new())
    }
}
