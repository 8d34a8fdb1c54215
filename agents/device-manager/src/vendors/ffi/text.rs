//! Reading the fixed C character arrays vendor libraries fill.

/// One element of a C character array: `char` (signed or not, by target) or `unsigned char`.
pub trait CChar: Copy {
    /// The byte it holds.
    fn byte(self) -> u8;
}

impl CChar for u8 {
    fn byte(self) -> u8 {
        self
    }
}

// `c_char` is `i8` on x86_64 and `u8` on aarch64: both are covered.
impl CChar for i8 {
    fn byte(self) -> u8 {
        self as u8
    }
}

/// The text of a C character buffer up to its first NUL, or the whole buffer when the library
/// left none; never reads past the buffer. Invalid UTF-8 is replaced, not trusted, and the
/// surrounding white space is trimmed.
pub fn c_text<C: CChar>(buf: &[C]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .map(|c| c.byte())
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use std::ffi::c_char;

    use super::*;

    #[test]
    fn stops_at_the_nul_and_at_the_end() {
        let mut buf = [0 as c_char; 8];
        for (slot, b) in buf.iter_mut().zip(b"1.3.2\0xx") {
            *slot = *b as c_char;
        }
        assert_eq!(c_text(&buf), "1.3.2");
        assert_eq!(c_text(&[b'a' as c_char; 4]), "aaaa");
        assert_eq!(c_text(&[0 as c_char; 4]), "");
        assert_eq!(c_text(b"910B3\0garbage"), "910B3");
        assert_eq!(c_text(b"full"), "full");
        assert_eq!(c_text(b" MTT S4000 \0"), "MTT S4000");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(c_text(&[0xff, b'a', 0]), "\u{fffd}a");
    }
}
