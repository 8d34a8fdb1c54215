//! The one vocabulary of admission outcomes. A reason names the rule behind an answer and is
//! used, spelled the same, as the refusal's event reason and as the `reason` label of
//! `gpustack_worker_admission_total`, so that `kubectl describe`, Kueue and Prometheus tell
//! the same story. A closed set keeps the metric's label values bounded.

macro_rules! reasons {
    ($($variant:ident),* $(,)?) => {
        /// The rule behind an admission answer.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[allow(
            missing_docs,
            reason = "a variant's name is its spelling on the wire; the list below groups them by rule"
        )]
        pub enum Reason { $($variant),* }

        impl Reason {
            /// Every reason, for the metric's label set.
            pub const ALL: &[Reason] = &[$(Reason::$variant),*];

            /// The reason as spelled in events, refusals and metrics.
            pub fn as_str(self) -> &'static str {
                match self { $(Reason::$variant => stringify!($variant)),* }
            }
        }
    };
}

reasons! {
    // Allowed.
    Admitted,
    Defaulted,
    UnitsComputed,
    FitPinned,
    NotApplicable,
    BeingDeleted,
    // Pod requests (§3.3, §3.4).
    MultipleFamilies,
    SplitContainerGroups,
    NotWholeNumber,
    SliceNotSingleCard,
    SliceMemoryRequired,
    SliceMemoryAmbiguous,
    SlicePartMissingHead,
    OutOfRange,
    ExceedsCardMemory,
    PartitionNotSingleCard,
    PartitionProfileRequired,
    MultipleProfiles,
    ProfileNotSingleInstance,
    ProfileNotOffered,
    MultipleSlicingContainers,
    SidecarRequest,
    // The pool behind a queue.
    NoInstanceType,
    InstanceTypeNotReady,
    // InstanceType (§3.6).
    FieldRequired,
    FieldInvalid,
    FieldImmutable,
    // Instance (start and stop).
    NotStopped,
    // NodeModelStore status.
    WriterNotAllowed,
    // The review itself, its sender, or what the webhook needed to read.
    MalformedReview,
    CallerNotAllowed,
    LookupFailed,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_distinct_event_reasons() {
        let mut seen = std::collections::HashSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.as_str()), "{r} twice");
            // Event reasons are UpperCamelCase without separators.
            assert!(r.as_str().chars().all(|c| c.is_ascii_alphanumeric()));
            assert!(r.as_str().starts_with(|c: char| c.is_ascii_uppercase()));
        }
    }
}
