//! Stripping credentials from error text before it reaches status, logs or metrics: upstream
//! errors can echo request headers or URLs that carry a bearer token.

/// Keys whose following value is a credential.
const MARKERS: &[&str] = &[
    "bearer ",
    "basic ",
    "token=",
    "token:",
    "token\":\"",
    "password=",
    "password:",
];

const REDACTED: &str = "REDACTED";

/// `text` with every value after a credential marker (case-insensitive) and every literal in
/// `secrets` replaced by `REDACTED`.
pub fn strip_credentials(text: &str, secrets: &[&str]) -> String {
    let mut out = text.to_owned();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s, REDACTED);
    }
    for marker in MARKERS {
        let mut from = 0;
        loop {
            let lower = out.to_ascii_lowercase();
            let Some(i) = lower[from..].find(marker).map(|i| from + i) else {
                break;
            };
            let start = i + marker.len();
            let len = out[start..]
                .find(|c: char| c.is_whitespace() || matches!(c, '&' | '"' | '\'' | ',' | ';'))
                .unwrap_or(out.len() - start);
            if len == 0 || &out[start..start + len] == REDACTED {
                from = start;
                continue;
            }
            out.replace_range(start..start + len, REDACTED);
            from = start + REDACTED.len();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_marked_values_and_known_secrets() {
        assert_eq!(
            strip_credentials("GET https://h/x?token=abc&y=1: 401", &[]),
            "GET https://h/x?token=REDACTED&y=1: 401"
        );
        assert_eq!(
            strip_credentials("Authorization: Bearer s3cr3t failed", &[]),
            "Authorization: Bearer REDACTED failed"
        );
        assert_eq!(
            strip_credentials("error with hunter2 inside", &["hunter2"]),
            "error with REDACTED inside"
        );
        assert_eq!(
            strip_credentials("{\"token\":\"xyz\"}", &[]),
            "{\"token\":\"REDACTED\"}"
        );
        assert_eq!(
            strip_credentials("connection refused", &[""]),
            "connection refused"
        );
        assert_eq!(strip_credentials("bearer ", &[]), "bearer ");
    }
}
