//! Kubernetes quantities (`500m`, `16Gi`, `1e3`) read as plain numbers, for comparing two
//! spellings of one amount and for showing an amount in another unit. Not for arithmetic that
//! must be exact: a float holds them only to 15 or so digits.

/// The amount `text` stands for; `None` when it is no quantity.
pub fn value(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let factor = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    number.parse::<f64>().ok().map(|n| n * factor)
}

#[cfg(test)]
mod tests {
    use super::value;

    #[test]
    fn suffixes_and_exponents() {
        assert_eq!(value("1500m"), Some(1.5));
        assert_eq!(value("2Ki"), Some(2048.0));
        assert_eq!(value("16Gi"), Some(16.0 * 1024f64.powi(3)));
        assert_eq!(value("1e3"), Some(1000.0));
        assert_eq!(value(" 4 "), Some(4.0));
        assert_eq!(value("x"), None);
        assert_eq!(value("1Qi"), None);
    }
}
