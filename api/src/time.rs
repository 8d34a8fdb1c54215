//! Timestamps in Go's RFC 3339 "nano" form (`2026-08-29T08:01:43.565038175+08:00`): fractional
//! seconds without trailing zeros, the offset the sample was taken in, `Z` for UTC.

use std::{fmt, str::FromStr};

use jiff::tz::Offset;
use serde::{Deserialize, Serialize};

/// An instant together with the UTC offset it is shown in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timestamp {
    /// The instant.
    pub instant: jiff::Timestamp,
    /// The UTC offset it is shown with.
    pub offset: Offset,
}

impl Timestamp {
    /// Now, in the machine's local time zone (UTC where none is configured).
    pub fn now_local() -> Self {
        let now = jiff::Zoned::now();
        Self {
            instant: now.timestamp(),
            offset: now.offset(),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let dt = self.offset.to_datetime(self.instant);
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            dt.year(),
            dt.month(),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second()
        )?;
        let nanos = dt.subsec_nanosecond();
        if nanos != 0 {
            let digits = format!("{nanos:09}");
            write!(f, ".{}", digits.trim_end_matches('0'))?;
        }
        let secs = self.offset.seconds();
        if secs == 0 {
            return f.write_str("Z");
        }
        let sign = if secs < 0 { '-' } else { '+' };
        let abs = secs.unsigned_abs();
        write!(f, "{sign}{:02}:{:02}", abs / 3600, (abs % 3600) / 60)
    }
}

/// The error for text that is not an RFC 3339 timestamp.
#[derive(Debug, thiserror::Error)]
#[error("invalid RFC 3339 timestamp {text:?}: {reason}")]
pub struct InvalidTimestamp {
    text: String,
    reason: String,
}

impl FromStr for Timestamp {
    type Err = InvalidTimestamp;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = |reason: &str| InvalidTimestamp {
            text: s.to_owned(),
            reason: reason.to_owned(),
        };
        let instant: jiff::Timestamp = s
            .parse()
            .map_err(|e: jiff::Error| invalid(&e.to_string()))?;
        let offset = if s.ends_with('Z') || s.ends_with('z') {
            Offset::UTC
        } else {
            let tail = s.get(s.len().saturating_sub(6)..).unwrap_or_default();
            let (sign, hhmm) = tail.split_at(1);
            let (hh, mm) = hhmm
                .split_once(':')
                .ok_or_else(|| invalid("no UTC offset"))?;
            let hours: i32 = hh.parse().map_err(|_| invalid("bad UTC offset"))?;
            let minutes: i32 = mm.parse().map_err(|_| invalid("bad UTC offset"))?;
            let secs = (hours * 3600 + minutes * 60) * if sign == "-" { -1 } else { 1 };
            Offset::from_seconds(secs).map_err(|e| invalid(&e.to_string()))?
        };
        Ok(Self { instant, offset })
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_go_nano_form() {
        for text in [
            "2026-08-29T08:01:43.565038175+08:00",
            "2026-08-29T08:01:43.5-03:30",
            "2026-08-29T00:00:00Z",
        ] {
            let t: Timestamp = text.parse().unwrap();
            assert_eq!(t.to_string(), text);
        }
    }

    #[test]
    fn trims_trailing_zeros() {
        let t: Timestamp = "2026-08-29T08:01:43.120000000+08:00".parse().unwrap();
        assert_eq!(t.to_string(), "2026-08-29T08:01:43.12+08:00");
    }

    #[test]
    fn rejects_garbage() {
        let err = "yesterday".parse::<Timestamp>().unwrap_err();
        assert!(err.to_string().contains("yesterday"));
    }
}
