//! What every stand-in vendor library (`tests/fake-*`) shares, written once: loading the JSON
//! fixture its environment variable names, its state behind a lock that a panic elsewhere does
//! not poison, writing an answer through a C caller's out-pointer or into its character buffer
//! with the vendor's own status codes ([`Answers`]), and fixed C character arrays.

use std::{
    ffi::{c_char, c_uint},
    sync::{Mutex, MutexGuard},
};

use serde::de::DeserializeOwned;

/// Why a fixture could not be served.
#[derive(Debug)]
pub enum LoadError {
    /// The variable is unset, or the file it names cannot be read: the "driver" is not there.
    Missing,
    /// The file is not a fixture.
    Invalid,
}

/// The JSON fixture named by the environment variable `env`.
pub fn load<T: DeserializeOwned>(env: &str) -> Result<T, LoadError> {
    let path = std::env::var_os(env).ok_or(LoadError::Missing)?;
    let text = std::fs::read_to_string(path).map_err(|_| LoadError::Missing)?;
    serde_json::from_str(&text).map_err(|_| LoadError::Invalid)
}

/// The stand-in's state. A panic cannot cross the C ABI (it aborts), so a poisoned lock only
/// means an earlier caller's thread died elsewhere; the data is still consistent.
pub fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

/// One element of a C character array: `char` (signed on x86_64) or `unsigned char`.
pub trait CChar: Copy {
    /// The element holding byte `b`.
    fn from_byte(b: u8) -> Self;
    /// The terminating NUL.
    const NUL: Self;
}

impl CChar for u8 {
    fn from_byte(b: u8) -> Self {
        b
    }
    const NUL: Self = 0;
}

impl CChar for i8 {
    fn from_byte(b: u8) -> Self {
        b as i8
    }
    const NUL: Self = 0;
}

/// `s` as a fixed C character array, truncated to leave the terminating NUL.
pub fn c_array<C: CChar, const N: usize>(s: &str) -> [C; N] {
    let mut out = [C::NUL; N];
    for (slot, b) in out.iter_mut().zip(s.bytes().take(N.saturating_sub(1))) {
        *slot = C::from_byte(b);
    }
    out
}

/// A vendor's status codes for the writers' three outcomes.
#[derive(Clone, Copy, Debug)]
pub struct Answers<R> {
    /// Written.
    pub ok: R,
    /// A null pointer.
    pub invalid_argument: R,
    /// A buffer too small for the text and its NUL.
    pub insufficient_size: R,
}

// The writers take the pointers a C caller handed the stand-in's exports, which the vendor's
// header makes valid for the documented sizes; they check for null and write nothing more.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
impl<R: Copy> Answers<R> {
    /// Writes `value` through a caller's out-pointer.
    pub fn put<T>(self, out: *mut T, value: T) -> R {
        if out.is_null() {
            return self.invalid_argument;
        }
        // SAFETY: non-null, and the header makes the caller pass a pointer to a writable `T`.
        unsafe { out.write(value) };
        self.ok
    }

    /// Copies `s` NUL-terminated into a caller's buffer of `len` bytes.
    pub fn put_str(self, buf: *mut c_char, len: c_uint, s: &str) -> R {
        if buf.is_null() {
            return self.invalid_argument;
        }
        if s.len() + 1 > len as usize {
            return self.insufficient_size;
        }
        // SAFETY: non-null; the caller promises `len` writable bytes and we write
        // `s.len() + 1 <= len`.
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr().cast::<c_char>(), buf, s.len());
            buf.add(s.len()).write(0);
        }
        self.ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANSWERS: Answers<u32> = Answers {
        ok: 0,
        invalid_argument: 2,
        insufficient_size: 7,
    };

    #[test]
    fn strings_are_bounded() {
        let mut buf = [1 as c_char; 4];
        assert_eq!(ANSWERS.put_str(buf.as_mut_ptr(), 4, "abcd"), 7);
        assert_eq!(ANSWERS.put_str(buf.as_mut_ptr(), 4, "abc"), 0);
        assert_eq!(buf, [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]);
        assert_eq!(ANSWERS.put_str(std::ptr::null_mut(), 4, "a"), 2);
        assert_eq!(
            c_array::<c_char, 4>("abcdef"),
            [b'a' as c_char, b'b' as c_char, b'c' as c_char, 0]
        );
        assert_eq!(c_array::<u8, 4>("ab"), *b"ab\0\0");
    }

    #[test]
    fn values_go_through_non_null_pointers_only() {
        let mut v = 0u64;
        assert_eq!(ANSWERS.put(&mut v, 42), 0);
        assert_eq!(v, 42);
        assert_eq!(ANSWERS.put(std::ptr::null_mut::<u64>(), 1), 2);
    }
}
