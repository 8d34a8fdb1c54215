//! The kubelet's reading of a container log for `GET /containerLogs/...`: its query options
//! (the names and rules of `PodLogOptions`) and the selection they make from CRI log lines
//! (`<RFC 3339 time> <stream> <tag> <text>`). Pure: the HTTP side is [`crate::kubelet_http`].

use std::collections::HashMap;

/// What a log request asks for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogOptions {
    pub follow: bool,
    pub timestamps: bool,
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
    /// Lines older than this are left out.
    pub since: Option<jiff::Timestamp>,
}

/// A query the kubelet refuses (400), with its message.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{0}")]
pub struct BadOptions(pub String);

fn flag(q: &HashMap<String, String>, k: &str) -> bool {
    matches!(q.get(k).map(String::as_str), Some("true" | "1" | "True"))
}

fn number(q: &HashMap<String, String>, k: &str) -> Result<Option<i64>, BadOptions> {
    q.get(k)
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| BadOptions(format!("{k}: invalid value {v:?}")))
        })
        .transpose()
}

impl LogOptions {
    /// The options of a query, checked as the kubelet checks them; `now` places `sinceSeconds`.
    pub fn parse(q: &HashMap<String, String>, now: jiff::Timestamp) -> Result<Self, BadOptions> {
        let tail = number(q, "tailLines")?;
        let limit = number(q, "limitBytes")?;
        let since_seconds = number(q, "sinceSeconds")?;
        let since_time = q.get("sinceTime");
        if tail.is_some_and(|t| t < 0) {
            return Err(BadOptions(
                "tailLines: must be greater than or equal to 0".into(),
            ));
        }
        if limit.is_some_and(|l| l < 1) {
            return Err(BadOptions("limitBytes: must be greater than 0".into()));
        }
        if since_seconds.is_some_and(|s| s < 1) {
            return Err(BadOptions("sinceSeconds: must be greater than 0".into()));
        }
        if since_seconds.is_some() && since_time.is_some() {
            return Err(BadOptions(
                "at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
            ));
        }
        let since = match (since_seconds, since_time) {
            (Some(s), _) => Some(now - jiff::SignedDuration::from_secs(s)),
            (None, Some(t)) => Some(
                t.parse::<jiff::Timestamp>()
                    .map_err(|e| BadOptions(format!("sinceTime: {e}")))?,
            ),
            (None, None) => None,
        };
        Ok(LogOptions {
            follow: flag(q, "follow"),
            timestamps: flag(q, "timestamps"),
            tail_lines: tail.map(|t| t as usize),
            limit_bytes: limit.map(|l| l as usize),
            since,
        })
    }

    /// One CRI line as the kubelet writes it out: its text (with the time first when
    /// `timestamps`), or nothing when it is older than `since` or not a CRI line.
    pub fn render(&self, cri: &str) -> Option<String> {
        let mut parts = cri.splitn(4, ' ');
        let (time, _stream, _tag) = (parts.next()?, parts.next()?, parts.next()?);
        let text = parts.next().unwrap_or("");
        let at: jiff::Timestamp = time.parse().ok()?;
        if self.since.is_some_and(|s| at < s) {
            return None;
        }
        Some(if self.timestamps {
            format!("{} {text}\n", at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
        } else {
            format!("{text}\n")
        })
    }

    /// What is written for the log `cri` (whole lines) as it is now: the lines after `since`, the
    /// last `tail_lines` of them, cut at `limit_bytes`.
    pub fn select(&self, cri: &str) -> String {
        let lines: Vec<String> = cri.lines().filter_map(|l| self.render(l)).collect();
        let from = self.tail_lines.map_or(0, |t| lines.len().saturating_sub(t));
        let mut out = lines[from..].concat();
        if let Some(limit) = self.limit_bytes {
            out.truncate(floor_char(&out, limit));
        }
        out
    }
}

/// The largest char boundary at or below `at`.
pub fn floor_char(s: &str, at: usize) -> usize {
    let mut i = at.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "2026-01-02T03:04:05.000000001Z stdout F one\n\
                       2026-01-02T03:04:06Z stderr F two\n\
                       2026-01-02T03:04:07.5Z stdout F three\n";

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn now() -> jiff::Timestamp {
        "2026-01-02T03:04:08Z".parse().unwrap()
    }

    #[test]
    fn lines_are_selected_as_the_kubelet_selects_them() {
        let all = LogOptions::parse(&q(&[]), now()).unwrap();
        assert_eq!(all.select(LOG), "one\ntwo\nthree\n");
        let tail = LogOptions::parse(&q(&[("tailLines", "2")]), now()).unwrap();
        assert_eq!(tail.select(LOG), "two\nthree\n");
        let since = LogOptions::parse(&q(&[("sinceSeconds", "2")]), now()).unwrap();
        assert_eq!(since.select(LOG), "two\nthree\n");
        let at = LogOptions::parse(&q(&[("sinceTime", "2026-01-02T03:04:07Z")]), now()).unwrap();
        assert_eq!(at.select(LOG), "three\n");
        let limit = LogOptions::parse(&q(&[("limitBytes", "6")]), now()).unwrap();
        assert_eq!(limit.select(LOG), "one\ntw");
        let stamped =
            LogOptions::parse(&q(&[("timestamps", "true"), ("tailLines", "1")]), now()).unwrap();
        assert_eq!(stamped.select(LOG), "2026-01-02T03:04:07.5Z three\n");
    }

    #[test]
    fn bad_options_are_refused_with_the_kubelets_words() {
        let bad = |pairs: &[(&str, &str)]| LogOptions::parse(&q(pairs), now()).unwrap_err().0;
        assert!(bad(&[("tailLines", "-1")]).contains("greater than or equal to 0"));
        assert!(bad(&[("limitBytes", "0")]).contains("greater than 0"));
        assert!(bad(&[("sinceSeconds", "0")]).contains("greater than 0"));
        assert!(
            bad(&[("sinceSeconds", "1"), ("sinceTime", "2026-01-02T03:04:07Z")])
                .contains("at most one")
        );
        assert!(bad(&[("tailLines", "x")]).contains("tailLines"));
    }
}
