//! Lowercase hex, the form every digest takes on disk, in manifests and in status.

/// Lowercase hex of `bytes`.
pub fn encode(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    out
}

/// `text` lowercased when it is exactly `len` hex digits.
pub fn check(text: &str, len: usize) -> Option<String> {
    (text.len() == len && text.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| text.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_and_checks() {
        assert_eq!(super::encode(&[0x00, 0xab, 0x7f]), "00ab7f");
        assert_eq!(super::check("AbC0", 4).as_deref(), Some("abc0"));
        assert_eq!(super::check("abc", 4), None);
        assert_eq!(super::check("abcg", 4), None);
    }
}
