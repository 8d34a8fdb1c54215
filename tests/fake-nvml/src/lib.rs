//! A test stand-in for the NVML-shaped management libraries, which cannot exist on a build
//! machine: NVIDIA's `libnvidia-ml.so.1` (NVML), Iluvatar CoreX's `libixml.so` (IXML, NVML's
//! names) and T-Head's `libhgml.so` (HGML, the same calls with an `hgml` prefix). It is none of
//! the vendors' code and talks to no hardware: it serves the devices of a JSON fixture
//! ([`fixture`]) through the real C ABI ([`abi`]), so that detectors are exercised through their
//! real loading path (`dlopen` by path) on machines without accelerators. The same `.so` is
//! installed into fixture trees under each library's file name.
//!
//! The calls every NVML-shaped library has are written once ([`library`]) and exported under
//! each symbol prefix ([`nvml_shaped_exports`]): [`nvml`] (NVML and IXML, fixture
//! `GPUSTACK_FAKE_NVML_FIXTURE`) and [`hgml`] (fixture `GPUSTACK_FAKE_HGML_FIXTURE`), each with
//! its own fixture and init count, and with what only it exports. A function no detector calls
//! is absent, so a detector that starts calling one fails loudly (a missing symbol) instead of
//! silently reading zeros.
//!
//! Device handles are opaque: the device's index plus one, never dereferenced.

// The contract of every exported function is the vendor header's: pointers are the caller's,
// valid for the documented sizes. Null pointers are checked and answered with
// `*_ERROR_INVALID_ARGUMENT`.
#![allow(clippy::missing_safety_doc)]

pub mod abi;
mod exports;
pub mod fixture;
pub mod hgml;
pub mod instances;
pub mod library;
pub mod nvml;
