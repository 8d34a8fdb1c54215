//! Whether a value is acceptable for a setting: one clear sentence when it is not.

use super::catalog::{Definition, Rule};

/// Longest value a setting takes (they are stored in one Secret, read by every reconcile).
pub const MAX_VALUE_LEN: usize = 4096;

/// Why a value was refused; the message names the setting and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("setting \"{setting}\" {reason}")]
pub struct Refused {
    /// The setting.
    pub setting: &'static str,
    /// What is allowed, as a sentence's end.
    pub reason: String,
}

/// Checks `value` for `def`; `current` reads another setting's value (the watermarks are
/// checked against each other).
pub fn value(
    def: &Definition,
    value: &str,
    current: impl Fn(&str) -> Option<String>,
) -> Result<(), Refused> {
    let refuse = |reason: String| {
        Err(Refused {
            setting: def.name,
            reason,
        })
    };
    if value.len() > MAX_VALUE_LEN {
        return refuse(format!("must be at most {MAX_VALUE_LEN} bytes"));
    }
    // A table is YAML: its lines are the one control character it may hold.
    let multi_line = def.rule == Rule::UnitPresets;
    if value
        .chars()
        .any(|c| c.is_control() && !(multi_line && c == '\n'))
    {
        return refuse("must not contain control characters".into());
    }
    match def.rule {
        Rule::Bool if !matches!(value, "true" | "false") => refuse("must be true or false".into()),
        Rule::Image if value.is_empty() || value.contains(char::is_whitespace) => {
            refuse("must be a container image reference without spaces".into())
        }
        Rule::Url if !is_url(value) => refuse("must be an http:// or https:// URL".into()),
        Rule::OptionalUrl if !value.is_empty() && !is_url(value) => {
            refuse("must be blank or an http:// or https:// URL".into())
        }
        Rule::OneOf(words) if !words.contains(&value) => {
            refuse(format!("must be one of {}", words.join(", ")))
        }
        Rule::Int(lo, hi) => {
            let n: i64 = match value.parse() {
                Ok(n) if (lo..=hi).contains(&n) => n,
                _ if hi == i64::MAX => return refuse(format!("must be a whole number >= {lo}")),
                _ => return refuse(format!("must be a whole number from {lo} to {hi}")),
            };
            watermarks(def, n, &current)
        }
        Rule::DurationAtLeast(min) => match go_duration_secs(value) {
            Some(s) if s >= min as f64 => Ok(()),
            Some(_) => refuse(format!("must be at least {}m", min / 60)),
            None => refuse("must be a duration such as 90m or 24h".into()),
        },
        Rule::NameList
            if !value.is_empty() && !value.split(',').all(|n| is_subdomain(n.trim())) =>
        {
            refuse("must be blank or comma-separated Secret names (DNS-1123 subdomains)".into())
        }
        Rule::OptionalName if !value.is_empty() && !is_subdomain(value) => {
            refuse("must be blank or a DNS-1123 subdomain".into())
        }
        Rule::UnitPresets => crate::controllers::unit_presets::UnitPresets::parse(value)
            .map(drop)
            .or_else(|e| refuse(format!("must be blank or a unit resources table: {e}"))),
        _ => Ok(()),
    }
}

/// The low watermark stays below the high one, whichever of the two changes.
fn watermarks(
    def: &Definition,
    n: i64,
    current: &impl Fn(&str) -> Option<String>,
) -> Result<(), Refused> {
    let other = |name: &str| current(name).and_then(|v| v.parse::<i64>().ok());
    let bad = match def.name {
        "model-store-low-watermark" => other("model-store-high-watermark")
            .filter(|high| n >= *high)
            .map(|high| format!("must be below model-store-high-watermark ({high})")),
        "model-store-high-watermark" => other("model-store-low-watermark")
            .filter(|low| n <= *low)
            .map(|low| format!("must be above model-store-low-watermark ({low})")),
        _ => None,
    };
    match bad {
        Some(reason) => Err(Refused {
            setting: def.name,
            reason,
        }),
        None => Ok(()),
    }
}

fn is_url(v: &str) -> bool {
    let rest = v
        .strip_prefix("https://")
        .or_else(|| v.strip_prefix("http://"));
    matches!(rest, Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace))
}

fn is_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Seconds of a Go duration (`1h30m`, `90s`, `1.5h`); `None` when it is not one.
fn go_duration_secs(v: &str) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut total = 0.0;
    let mut rest = v;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|i| *i > 0)?;
        let n: f64 = rest[..num_end].parse().ok()?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += n * scale;
        rest = &rest[unit_end..];
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::catalog::find;

    fn check(name: &str, v: &str) -> Result<(), String> {
        value(find(name).unwrap(), v, |n| {
            find(n).map(|d| d.default.to_owned())
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn each_rule_refuses_with_the_setting_named() {
        assert_eq!(
            check("workload-fit-affinity", "yes").unwrap_err(),
            "setting \"workload-fit-affinity\" must be true or false"
        );
        assert!(check("workload-fit-affinity", "false").is_ok());
        assert!(check("instance-ssh-server-image", "").is_err());
        assert!(check("instance-ssh-server-image", "a b").is_err());
        assert!(
            check("image-pull-policy", "Sometimes")
                .unwrap_err()
                .contains("Always, IfNotPresent, Never")
        );
        assert!(
            check("model-store-download-concurrency", "65")
                .unwrap_err()
                .contains("from 1 to 64")
        );
        assert!(check("model-store-download-concurrency", "64").is_ok());
        assert!(
            check("model-artifact-revalidate-interval", "30s")
                .unwrap_err()
                .contains("at least 1m")
        );
        assert!(check("model-artifact-revalidate-interval", "1h30m").is_ok());
        assert!(check("model-artifact-revalidate-interval", "soon").is_err());
        assert!(check("model-artifact-huggingface-endpoint", "ftp://x").is_err());
        assert!(check("model-artifact-https-proxy", "").is_ok());
        assert!(check("image-pull-secrets", "a,b.c").is_ok());
        assert!(check("image-pull-secrets", "A").is_err());
        assert!(check("container-registry", "line\nbreak").is_err());
        let presets = "instance-type-unit-resources-preset";
        assert!(check(presets, "").is_ok());
        assert!(check(presets, "nvidia:\n  H100: {cpu: \"20\", ram: 200Gi}\n").is_ok());
        assert!(
            check(presets, "nvidia:\n  H100: {cpu: many, ram: 200Gi}\n")
                .unwrap_err()
                .contains("cpu \"many\"")
        );
        assert!(check(presets, "nvidia:\r\n  H100: {cpu: \"2\", ram: 2Gi}").is_err());
        assert!(check("container-registry", &"x".repeat(MAX_VALUE_LEN + 1)).is_err());
    }

    #[test]
    fn watermarks_are_checked_against_each_other() {
        // Defaults: high 80, low 70.
        assert!(
            check("model-store-low-watermark", "80")
                .unwrap_err()
                .contains("below model-store-high-watermark (80)")
        );
        assert!(check("model-store-low-watermark", "79").is_ok());
        assert!(
            check("model-store-high-watermark", "70")
                .unwrap_err()
                .contains("above model-store-low-watermark (70)")
        );
        assert!(check("model-store-high-watermark", "96").is_err());
    }
}
