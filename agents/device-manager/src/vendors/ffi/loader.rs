//! Loading a vendor's management library by path and resolving its functions: the `unsafe`
//! every binding shares. The binding that calls [`symbol`] or [`required`] owns the
//! [`Library`] next to the pointers it resolved (declared after them, so dropped last) and
//! never hands a pointer out, so no pointer outlives its library.

#![allow(unsafe_code)]

use std::ffi::OsStr;

use libloading::Library;

use super::OpenError;

/// Loads the library at `path`: a file path under the system root, or a bare name for the
/// dynamic loader's own search.
pub fn load(path: &OsStr) -> Result<Library, OpenError> {
    // SAFETY: loading runs the library's initialisers. Every caller passes a vendor's own
    // management library located under the system root (or its test stand-in), whose
    // initialisers are expected to be sound: the same trust the vendor's own tools place in
    // `dlopen`. The handle is kept for as long as any pointer into the library.
    unsafe { Library::new(path) }.map_err(OpenError::Load)
}

/// The first of `names` that `library` exports, as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the C prototype the vendor's header gives every name in `names`, and the pointer
/// must not be called after `library` is dropped.
pub unsafe fn symbol<T: Copy>(library: &Library, names: &[&str]) -> Option<T> {
    names.iter().find_map(|name| {
        // SAFETY: the caller guarantees `T` is the symbol's prototype and that the copied
        // pointer does not outlive `library`.
        unsafe { library.get::<T>(name.as_bytes()) }
            .ok()
            .map(|s| *s)
    })
}

/// As [`symbol`], for a function the binding cannot work without.
///
/// # Safety
/// As [`symbol`].
pub unsafe fn required<T: Copy>(library: &Library, names: &[&str]) -> Result<T, OpenError> {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { symbol(library, names) }.ok_or_else(|| OpenError::MissingSymbol(names.join(" or ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_a_library_is_a_load_error_with_its_source() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libvendor.so");
        std::fs::write(&path, b"not an ELF file").unwrap();
        let e = load(path.as_os_str()).unwrap_err();
        assert!(matches!(e, OpenError::Load(_)), "{e}");
        assert!(e.to_string().starts_with("could not be loaded: "), "{e}");
        assert!(std::error::Error::source(&e).is_some());
    }
}
