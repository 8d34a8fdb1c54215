//! Conditions the worker reports on objects it does not own the rest of (a ClusterQueue's
//! `TopologyReady`, a TopologySource's `Ready`): written only when what they say changes, with
//! the transition time kept while the status stays the same, so a steady cluster sees no writes.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// What a condition should say.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The condition type.
    pub type_: &'static str,
    /// Whether it is `True`.
    pub ok: bool,
    /// The reason (CamelCase).
    pub reason: String,
    /// The message, for people.
    pub message: String,
    /// The generation it was judged on.
    pub observed_generation: Option<i64>,
}

/// The condition to write, or `None` when `have` already says `want`.
pub fn update(have: &[Condition], want: &Wanted, now: &Time) -> Option<Condition> {
    let status = if want.ok { "True" } else { "False" };
    let current = have.iter().find(|c| c.type_ == want.type_);
    if current.is_some_and(|c| {
        c.status == status
            && c.reason == want.reason
            && c.message == want.message
            && c.observed_generation == want.observed_generation
    }) {
        return None;
    }
    let since = current
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Some(Condition {
        type_: want.type_.to_owned(),
        status: status.to_owned(),
        reason: want.reason.clone(),
        message: want.message.clone(),
        observed_generation: want.observed_generation,
        last_transition_time: since,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(jiff::Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn writes_only_changes_and_keeps_the_transition_time() {
        let want = Wanted {
            type_: "Ready",
            ok: true,
            reason: "Valid".into(),
            message: "ok".into(),
            observed_generation: Some(1),
        };
        let first = update(&[], &want, &at(10)).unwrap();
        assert_eq!(
            (first.status.as_str(), first.last_transition_time.clone()),
            ("True", at(10))
        );
        assert_eq!(update(std::slice::from_ref(&first), &want, &at(20)), None);
        let reworded = Wanted {
            message: "still ok".into(),
            ..want.clone()
        };
        let second = update(std::slice::from_ref(&first), &reworded, &at(30)).unwrap();
        assert_eq!(
            second.last_transition_time,
            at(10),
            "same status, same transition"
        );
        let failed = Wanted { ok: false, ..want };
        let third = update(&[second], &failed, &at(40)).unwrap();
        assert_eq!(
            (third.status.as_str(), third.last_transition_time),
            ("False", at(40))
        );
    }
}
