//! The RBAC kinds: their names are path segments (`system:auth-delegator`), not DNS names.
//! What a write of them may grant is checked by [`crate::api::auth::refuse_escalation`].

use super::strategy::KindStrategy;
use crate::api::objects::{KindRules, Names};

pub(super) struct Rbac;

impl KindRules for Rbac {
    fn names(&self) -> Names {
        Names::PathSegment
    }
}

impl KindStrategy for Rbac {}
