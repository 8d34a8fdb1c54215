//! Kubernetes quantities (`1`, `500m`, `2Gi`, `1e3`) read exactly, so that request rules compare
//! amounts rather than spellings: `1000m` is exactly 1, `1m` is not.

/// Nano-units per unit: the finest precision a Kubernetes quantity keeps.
const NANO: i128 = 1_000_000_000;

/// An amount, exact to the nano-unit (rounded up beyond that, as Kubernetes rounds).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity {
    nanos: i128,
}

/// A text that is not a Kubernetes quantity (it holds the text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a quantity")]
pub struct QuantityError(pub String);

impl Quantity {
    /// Reads a Kubernetes quantity (`1`, `500m`, `2Gi`, `1e3`).
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let bad = || QuantityError(text.to_owned());
        let s = text.trim();
        let (negative, s) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_len = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(bad());
        }
        // The digits as one integer, and the power of ten that scales it back.
        let digits = format!("{whole}{fraction}");
        let mantissa: i128 = digits.trim_start_matches('0').parse().unwrap_or(0);
        if digits.len() > 30 {
            return Err(bad());
        }
        let (num, den) = multiplier(suffix).ok_or_else(bad)?;
        let den = den
            .checked_mul(10i128.checked_pow(fraction.len() as u32).ok_or_else(bad)?)
            .ok_or_else(bad)?;
        let scaled = mantissa
            .checked_mul(num)
            .and_then(|v| v.checked_mul(NANO))
            .ok_or_else(bad)?;
        let nanos = scaled / den + i128::from(scaled % den != 0);
        Ok(Quantity {
            nanos: if negative { -nanos } else { nanos },
        })
    }

    /// The amount as a whole number, when it is one.
    pub fn whole(self) -> Option<i64> {
        (self.nanos % NANO == 0)
            .then(|| i64::try_from(self.nanos / NANO).ok())
            .flatten()
    }

    /// The amount `n` times over.
    pub fn times(self, n: i64) -> Option<Self> {
        self.nanos
            .checked_mul(i128::from(n))
            .map(|nanos| Quantity { nanos })
    }

    /// Whether the amount is exactly `n`.
    pub fn is(self, n: i64) -> bool {
        self.nanos == i128::from(n) * NANO
    }
}

impl Quantity {
    /// The amount scaled by `percent` / 100 (rounded up to the nano-unit).
    pub fn percent(self, percent: i64) -> Self {
        let scaled = self.nanos * i128::from(percent);
        Quantity {
            nanos: scaled / 100 + i128::from(scaled % 100 != 0),
        }
    }

    /// The amount rounded up to a multiple of `step` (memory to whole MiB, say).
    pub fn ceil_to(self, step: Self) -> Self {
        if step.nanos <= 0 {
            return self;
        }
        let n =
            self.nanos.div_euclid(step.nanos) + i128::from(self.nanos.rem_euclid(step.nanos) != 0);
        Quantity {
            nanos: n * step.nanos,
        }
    }

    /// How many `unit`s the amount makes, rounded up (bytes to MiB, cores to millicores).
    pub fn ceil_units(self, unit: Self) -> Option<i64> {
        if unit.nanos <= 0 {
            return None;
        }
        i64::try_from(self.ceil_to(unit).nanos / unit.nanos).ok()
    }

    /// An eighth of the amount (rounded up to the nano-unit).
    pub fn eighth(self) -> Self {
        Quantity {
            nanos: self.nanos / 8 + i128::from(self.nanos % 8 != 0),
        }
    }
}

/// The canonical spelling: the largest binary suffix that divides a whole amount (`128Gi`),
/// else the whole number, else milli- or nano-units (`1600m`).
impl std::fmt::Display for Quantity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.nanos % NANO == 0 {
            let whole = self.nanos / NANO;
            for (suffix, p) in [
                ("Ei", 6),
                ("Pi", 5),
                ("Ti", 4),
                ("Gi", 3),
                ("Mi", 2),
                ("Ki", 1),
            ] {
                let unit = 1i128 << (10 * p);
                if whole != 0 && whole % unit == 0 {
                    return write!(f, "{}{suffix}", whole / unit);
                }
            }
            return write!(f, "{whole}");
        }
        if self.nanos % 1_000_000 == 0 {
            return write!(f, "{}m", self.nanos / 1_000_000);
        }
        write!(f, "{}n", self.nanos)
    }
}

/// The suffix's value as a fraction (numerator, denominator).
fn multiplier(suffix: &str) -> Option<(i128, i128)> {
    let binary = |p: u32| Some((1i128 << (10 * p), 1));
    let decimal = |e: i32| {
        if e >= 0 {
            Some((10i128.checked_pow(e as u32)?, 1))
        } else {
            Some((1, 10i128.checked_pow(e.unsigned_abs())?))
        }
    };
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().ok()?;
            (-9..=18).contains(&e).then(|| decimal(e)).flatten()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn amounts_not_spellings() {
        for (text, whole) in [
            ("1", Some(1)),
            ("1000m", Some(1)),
            ("1e0", Some(1)),
            ("0.5", None),
            ("1m", None),
            ("2k", Some(2000)),
            ("1Ki", Some(1024)),
            ("1.5Gi", Some(1_610_612_736)),
            ("25", Some(25)),
            ("+3", Some(3)),
            ("-2", Some(-2)),
            ("1E", Some(1_000_000_000_000_000_000)),
            ("1e3", Some(1000)),
        ] {
            assert_eq!(q(text).whole(), whole, "{text}");
        }
        assert!(q("1000m").is(1));
        assert!(!q("1m").is(1));
        assert!(!q("1001m").is(1));
        assert!(!q("0.001").is(0) && q("0.001") == q("1m"));
    }

    #[test]
    fn canonical_spellings() {
        for (text, shown) in [
            ("16", "16"),
            ("1600m", "1600m"),
            ("1.6", "1600m"),
            ("131072Mi", "128Gi"),
            ("0", "0"),
            ("1n", "1n"),
        ] {
            assert_eq!(q(text).to_string(), shown, "{text}");
        }
        assert_eq!(q("8").percent(20).to_string(), "1600m");
        assert_eq!(q("64Gi").percent(25).to_string(), "16Gi");
        assert_eq!(q("16Gi").eighth().to_string(), "2Gi");
        assert_eq!(
            q("64Gi").percent(12).ceil_to(q("1Mi")).to_string(),
            "7865Mi"
        );
    }

    #[test]
    fn not_quantities() {
        for text in ["", "abc", "1x", "1..2", ".", "1Gb", "1e99", "--1", "1 Gi"] {
            assert!(Quantity::parse(text).is_err(), "{text}");
        }
    }
}
