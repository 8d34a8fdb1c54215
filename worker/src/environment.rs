//! The process environment as the binary read it at start, handed to the worker so that no
//! library reads `std::env` (tests give it what they mean to test).

use std::{collections::BTreeMap, fmt};

/// Variable names and values. Its `Debug` shows the names only: values may be credentials.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Environment(BTreeMap<String, String>);

impl Environment {
    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for Environment {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        Environment(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }
}

impl fmt::Debug for Environment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.keys()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_but_never_shown() {
        let env: Environment = [("GPUSTACK_TOKEN", "s3cret"), ("HOME", "/root")]
            .into_iter()
            .collect();
        assert_eq!(env.get("HOME").as_deref(), Some("/root"));
        assert_eq!(env.get("MISSING"), None);
        let shown = format!("{env:?}");
        assert!(
            shown.contains("GPUSTACK_TOKEN") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
}
