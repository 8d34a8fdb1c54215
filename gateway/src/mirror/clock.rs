//! The upstream's clock, as the `Date` header of its answers tells it. A cluster whose clock is
//! far off the hub's stamps its objects (creation, conditions, leases) in another time than the
//! hub reads them in, so ages and staleness shown at the hub are wrong, and the certificates it
//! issues are not yet (or no longer) valid elsewhere: the health probe shows such an upstream
//! `Degraded` with how far off it is, while the mirror goes on serving what it has.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::Client;

use super::failure::MirrorError;

/// How far the upstream's clock may be from the hub's.
pub const TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// How far `upstream`'s clock is from the hub's (`hub`), when that is past [`TOLERANCE`].
pub fn skew(upstream: Timestamp, hub: Timestamp) -> Option<SignedDuration> {
    let off = upstream.duration_since(hub);
    (off.unsigned_abs() > TOLERANCE).then_some(off)
}

/// An HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
pub fn parse_http_date(text: &str) -> Option<Timestamp> {
    jiff::fmt::rfc2822::parse(text).ok().map(|z| z.timestamp())
}

/// The failure to report for an upstream `off` from the hub's clock: said in whole minutes
/// past ten (a `Date` header is to the second, so the seconds say nothing then).
pub fn skewed(off: SignedDuration) -> MirrorError {
    let secs = off.as_secs().abs();
    let said = if secs >= 600 {
        (secs + 30) / 60 * 60
    } else {
        secs
    };
    let tolerance = SignedDuration::try_from(TOLERANCE).unwrap_or(SignedDuration::MAX);
    MirrorError::ClockSkew {
        off: format!("{:#}", SignedDuration::from_secs(said)),
        ahead: off.is_positive(),
        tolerance: format!("{tolerance:#}"),
    }
}

/// Asks the upstream's `/version` once more and compares the `Date` of its answer with the
/// hub's clock; an upstream that sends no date is not judged.
pub async fn check(client: &Client, timeout: Duration) -> Result<(), MirrorError> {
    let request = http::Request::get("/version")
        .body(kube::client::Body::empty())
        .map_err(|e| MirrorError::Config(e.to_string()))?;
    let answer = tokio::time::timeout(timeout, client.send(request)).await;
    let Ok(Ok(response)) = answer else {
        // Whether it answers at all is the probe's question, asked just before.
        return Ok(());
    };
    let date = response
        .headers()
        .get(http::header::DATE)
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date);
    match date.and_then(|d| skew(d, Timestamp::now())) {
        Some(off) => Err(skewed(off)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_dates_parse() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(t.to_string(), "1994-11-06T08:49:37Z");
        assert_eq!(parse_http_date("yesterday"), None);
    }

    #[test]
    fn an_hour_off_either_way_is_skew_and_a_few_seconds_are_not() {
        let hub: Timestamp = "2026-12-06T12:00:00Z".parse().unwrap();
        let hour = SignedDuration::from_hours(1);
        assert_eq!(skew(hub + hour, hub), Some(hour));
        assert_eq!(skew(hub - hour, hub), Some(-hour));
        assert_eq!(skew(hub + SignedDuration::from_secs(3), hub), None);
        let said = skewed(hour).to_string();
        assert!(said.contains("1h ahead of the hub's"), "{said}");
        let early = hour - SignedDuration::from_millis(1500);
        assert!(skewed(early).to_string().contains("1h ahead"));
        let behind = skewed(-SignedDuration::from_secs(400)).to_string();
        assert!(
            behind.contains("6m 40s behind the hub's (more than 5m apart)"),
            "{behind}"
        );
    }
}
