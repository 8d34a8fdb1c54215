//! The allocator's settings, made before any thread starts.
//!
//! glibc gives a thread that finds the heap busy an arena of its own, up to eight per core, and
//! memory freed into one arena is not handed out by another. The services run many threads that
//! allocate (the async runtime's workers, one thread per SQLite connection, the blocking pool),
//! so freed memory piles up in arenas that no longer need it: the hub held about 7 MB more with
//! 50,000 mirrored objects than with two arenas (issue 17's mirror bench), at the same rates.
//! Two arenas still let two threads allocate at once.

/// How many malloc arenas the process uses unless `MALLOC_ARENA_MAX` says otherwise.
const ARENAS: i32 = 2;

/// Caps glibc's malloc arenas at [`ARENAS`]; a `MALLOC_ARENA_MAX` or `GLIBC_TUNABLES` the
/// operator set is left in charge. Does nothing with another C library.
pub fn cap_arenas(env: &dyn Fn(&str) -> Option<String>) {
    if operator_chose(env) {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: mallopt only sets a malloc parameter; it is called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, ARENAS);
    }
}

/// Whether the environment already sets the arena count (glibc reads it at start).
fn operator_chose(env: &dyn Fn(&str) -> Option<String>) -> bool {
    env("MALLOC_ARENA_MAX").is_some()
        || env("GLIBC_TUNABLES").is_some_and(|t| t.contains("glibc.malloc.arena_max"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arena_count_the_operator_set_is_left_alone() {
        let env = crate::env_of;
        assert!(!operator_chose(&env(&[])));
        assert!(!operator_chose(&env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.tcache_count=0"
        )])));
        assert!(operator_chose(&env(&[("MALLOC_ARENA_MAX", "8")])));
        assert!(operator_chose(&env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=4:glibc.malloc.tcache_count=0"
        )])));
    }
}
