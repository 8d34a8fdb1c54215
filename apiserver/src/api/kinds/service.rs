//! Services: a new Service of a type that takes node ports gets them allocated
//! ([`crate::api::node_ports`]).

use serde_json::Value;

use super::strategy::{Hook, KindStrategy, Write};
use crate::api::{node_ports, objects::KindRules};

pub(super) struct Service;

impl KindRules for Service {}

impl KindStrategy for Service {
    fn prepare_for_create<'a>(&'a self, w: &'a Write<'a>, obj: &'a mut Value) -> Hook<'a> {
        Box::pin(node_ports::allocate(&w.core.store, &w.ctx.cluster, obj))
    }
}
