//! Nodes: `nodes/NAME/proxy/PATH` passes the request to the node's kubelet ([`kubelet`]).

pub(super) mod kubelet;
mod kubelet_proxy;

use super::strategy::KindStrategy;
use super::subresource::Subresource;
use crate::api::objects::KindRules;

pub(super) struct Node;

impl KindRules for Node {}

impl KindStrategy for Node {
    fn subresource(&self, sub: &str) -> Option<Subresource> {
        (sub == "proxy").then_some(kubelet_proxy::serve as Subresource)
    }
}
