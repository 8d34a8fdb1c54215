//! A test stand-in for a slicing shim such as AMD's `libvrocm.so`, which intercepts the vendor
//! runtime inside a container to enforce a slice's caps. The real one needs ROCm and a GPU; this
//! one enforces nothing. It only has to be what preflight looks for: a shared object the dynamic
//! loader maps into every process of the container through the injected `/etc/ld.so.preload`,
//! and that greets on stderr when it is loaded (a greeting names its path, which is why preflight
//! never takes the greeting as proof: the loader's refusal names the same path).

use std::io::Write;

/// Runs when the loader maps the library, before the program's `main`.
extern "C" fn greet() {
    let _ = writeln!(
        std::io::stderr(),
        "libvrocm: slicing runtime loaded (gpustack test stand-in)"
    );
}

// SAFETY: a function pointer placed in `.init_array` is called once by the dynamic loader after
// relocation, with no arguments, which is the signature `greet` has; it touches only stderr.
#[used]
#[unsafe(link_section = ".init_array")]
static GREET_ON_LOAD: extern "C" fn() = greet;

/// Something for a program to call, so that the library has a symbol like the real shim.
#[unsafe(no_mangle)]
pub extern "C" fn gpustack_fake_slicing_shim_version() -> u32 {
    1
}
