//! `meta/v1.Time` and `MicroTime` between their wire form (seconds and nanoseconds since the
//! Unix epoch) and their JSON form (RFC 3339 in UTC, with seconds or with microseconds).

use super::error::ProtobufError;

/// Go's zero `time.Time` (January 1 of year 1), which its JSON writes as `null`.
pub(super) const GO_ZERO_SECONDS: i64 = -62_135_596_800;

pub(super) fn format(seconds: i64, nanos: i32, micro: bool) -> Result<String, ProtobufError> {
    let ts = jiff::Timestamp::new(seconds, nanos)
        .map_err(|e| ProtobufError::Field("time", e.to_string()))?;
    let whole = ts.strftime("%Y-%m-%dT%H:%M:%S");
    Ok(if micro {
        format!("{whole}.{:06}Z", ts.subsec_nanosecond() / 1000)
    } else {
        format!("{whole}Z")
    })
}

/// An RFC 3339 time as seconds and non-negative nanoseconds.
pub(super) fn parse(s: &str) -> Result<(i64, i32), ProtobufError> {
    let ts: jiff::Timestamp = s
        .parse()
        .map_err(|e: jiff::Error| ProtobufError::Field("time", e.to_string()))?;
    let (mut seconds, mut nanos) = (ts.as_second(), ts.subsec_nanosecond());
    if nanos < 0 {
        seconds -= 1;
        nanos += 1_000_000_000;
    }
    Ok((seconds, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_at_their_precision() {
        assert_eq!(
            format(1_700_000_000, 0, false).unwrap(),
            "2023-11-14T22:13:20Z"
        );
        assert_eq!(
            format(1_700_000_000, 123_456_789, true).unwrap(),
            "2023-11-14T22:13:20.123456Z"
        );
        assert_eq!(parse("2023-11-14T22:13:20Z").unwrap(), (1_700_000_000, 0));
        assert_eq!(
            parse("2023-11-14T23:13:20.5+01:00").unwrap(),
            (1_700_000_000, 500_000_000)
        );
        assert_eq!(parse("1969-12-31T23:59:59.5Z").unwrap(), (-1, 500_000_000));
        assert!(format(i64::MAX, 0, false).is_err());
        assert!(parse("yesterday").is_err());
    }
}
