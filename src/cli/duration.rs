//! Go-style durations (`15s`, `5m`, `1h30m`, `500ms`), as the reference's flags take them.

use std::{fmt, str::FromStr, time::Duration};

/// A duration written and shown the way Go's `time.Duration` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    pub const fn secs(s: u64) -> Self {
        Self(Duration::from_secs(s))
    }
}

const UNITS: [(&str, f64); 7] = [
    ("ns", 1e-9),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ms", 1e-3),
    ("s", 1.0),
    ("m", 60.0),
    ("h", 3600.0),
];

impl FromStr for GoDuration {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad =
            || format!("{s:?} is not a duration (use a number with a unit: 500ms, 15s, 5m, 1h30m)");
        if s == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if s.starts_with('-') {
            return Err(format!("{s:?} is negative; a duration must be 0 or more"));
        }
        let mut rest = s.strip_prefix('+').unwrap_or(s);
        if rest.is_empty() {
            return Err(bad());
        }
        let mut total = 0f64;
        while !rest.is_empty() {
            let num_len = rest
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .ok_or_else(bad)?;
            let number: f64 = rest[..num_len].parse().map_err(|_| bad())?;
            rest = &rest[num_len..];
            let unit_len = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            let scale = UNITS
                .iter()
                .find(|(u, _)| *u == &rest[..unit_len])
                .map(|(_, scale)| *scale)
                .ok_or_else(bad)?;
            total += number * scale;
            rest = &rest[unit_len..];
        }
        Ok(Self(Duration::from_secs_f64(total)))
    }
}

impl fmt::Display for GoDuration {
    /// Go's form: `15s`, `5m0s`, `1h0m0s`, `1.5s`, `500ms`, `0s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.0;
        if d.is_zero() {
            return f.write_str("0s");
        }
        if d < Duration::from_secs(1) {
            let nanos = d.subsec_nanos();
            return match nanos {
                n if n % 1_000_000 == 0 => write!(f, "{}ms", n / 1_000_000),
                n if n % 1_000 == 0 => write!(f, "{}µs", n / 1_000),
                n => write!(f, "{n}ns"),
            };
        }
        let secs = d.as_secs();
        let (h, m, s) = (secs / 3600, (secs % 3600) / 60, secs % 60);
        let frac = d.subsec_nanos();
        let seconds = if frac == 0 {
            format!("{s}s")
        } else {
            let digits = format!("{frac:09}");
            format!("{s}.{}s", digits.trim_end_matches('0'))
        };
        match (h, m) {
            (0, 0) => f.write_str(&seconds),
            (0, m) => write!(f, "{m}m{seconds}"),
            (h, m) => write!(f, "{h}h{m}m{seconds}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_forms() {
        let p = |s: &str| s.parse::<GoDuration>().unwrap().0;
        assert_eq!(p("15s"), Duration::from_secs(15));
        assert_eq!(p("5m"), Duration::from_secs(300));
        assert_eq!(p("1h30m"), Duration::from_secs(5400));
        assert_eq!(p("1.5h"), Duration::from_secs(5400));
        assert_eq!(p("500ms"), Duration::from_millis(500));
        assert_eq!(p("0"), Duration::ZERO);
    }

    #[test]
    fn rejects_what_go_rejects() {
        for s in ["", "15", "s", "5x", "-5s", "1h-5m", "abc"] {
            assert!(s.parse::<GoDuration>().is_err(), "{s:?} must be rejected");
        }
    }

    #[test]
    fn shows_go_forms() {
        let show = |s: u64| GoDuration::secs(s).to_string();
        assert_eq!(show(15), "15s");
        assert_eq!(show(300), "5m0s");
        assert_eq!(show(3600), "1h0m0s");
        assert_eq!(GoDuration(Duration::from_millis(1500)).to_string(), "1.5s");
        assert_eq!(GoDuration(Duration::from_millis(250)).to_string(), "250ms");
    }
}
