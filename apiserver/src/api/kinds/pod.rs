//! Pods: a new pod is `Pending` until a kubelet reports on it; its resources and what an
//! update may change are checked ([`crate::api::pod_resources`], [`crate::api::pod_update`]).
//! A pod's subresources: [`binding`] (the scheduler's), [`eviction`], [`ephemeral`] containers
//! and its container [`log`].

mod binding;
mod ephemeral;
mod eviction;
mod log;

use serde_json::{Value, json};

use super::strategy::{Hook, KindStrategy, Write, done};
use super::subresource::Subresource;
use crate::api::{field_errors::FieldError, objects::KindRules, pod_resources, pod_update};

pub(super) struct Pod;

impl KindRules for Pod {}

impl KindStrategy for Pod {
    /// As kube-apiserver does, without a phase the pod is `Pending`. A phase given on create is
    /// kept (kube-apiserver drops it; clients here may seed one).
    fn prepare_for_create<'a>(&'a self, _w: &'a Write<'a>, obj: &'a mut Value) -> Hook<'a> {
        if obj.pointer("/status/phase").is_none() {
            obj["status"]["phase"] = json!("Pending");
        }
        done()
    }

    fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        let mut problems = pod_resources::problems(obj);
        if let Some(old) = old {
            problems.extend(pod_update::problems(old, obj));
        }
        problems
    }

    fn subresource(&self, sub: &str) -> Option<Subresource> {
        match sub {
            "binding" => Some(binding::serve),
            "eviction" => Some(eviction::serve),
            "ephemeralcontainers" => Some(ephemeral::serve),
            "log" => Some(log::serve),
            _ => None,
        }
    }
}
