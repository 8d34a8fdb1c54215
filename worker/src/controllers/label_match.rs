//! Matching a node's labels against a plain selector (a TopologySource's, a flavor's), kept
//! apart so that the flavors, the topology and the queues share it without importing each
//! other.

use std::collections::BTreeMap;

/// Whether `labels` carry every one of `selector`'s.
pub fn matches(labels: &BTreeMap<String, String>, selector: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_selector_label_must_be_carried() {
        let labels = BTreeMap::from([
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
        ]);
        let sel = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(matches(&labels, &sel(&[])));
        assert!(matches(&labels, &sel(&[("a", "1")])));
        assert!(!matches(&labels, &sel(&[("a", "1"), ("c", "3")])));
        assert!(!matches(&labels, &sel(&[("b", "1")])));
    }
}
