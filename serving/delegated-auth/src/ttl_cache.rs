//! A small cache whose entries expire, bounded so that a flood of distinct keys (tokens) cannot
//! grow memory without limit.

use std::{
    collections::HashMap,
    hash::Hash,
    sync::Mutex,
    time::{Duration, Instant},
};

/// Entries kept; past it, expired entries go, then everything.
const MAX_ENTRIES: usize = 10_000;

/// Values kept until their own deadline.
pub struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> Default for TtlCache<K, V> {
    fn default() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// The value of `key` if it has not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(key)
            .filter(|(_, until)| *until > now)
            .map(|(v, _)| v.clone())
    }

    /// Keeps `value` for `ttl` from `now`.
    pub fn put(&self, key: K, value: V, ttl: Duration, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_ENTRIES {
            entries.retain(|_, (_, until)| *until > now);
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
        }
        entries.insert(key, (value, now + ttl));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let c: TtlCache<u32, u32> = TtlCache::default();
        let t0 = Instant::now();
        c.put(1, 10, Duration::from_secs(5), t0);
        assert_eq!(c.get(&1, t0), Some(10));
        assert_eq!(c.get(&1, t0 + Duration::from_secs(6)), None);
        for k in 0..(MAX_ENTRIES as u32 + 10) {
            c.put(k, k, Duration::from_secs(60), t0);
        }
        assert!(c.entries.lock().unwrap().len() <= MAX_ENTRIES);
    }
}
