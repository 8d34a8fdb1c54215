//! What is special about a kind, one file per special kind: a [`KindStrategy`], as
//! kube-apiserver gives each kind its create, update and delete strategies and storage hooks.
//! The fixed write pipelines (create, update, patch, apply, delete and the garbage collector, in
//! [`super::handlers`]) call each hook at one fixed point and name no kind; a kind that is not
//! special takes every default, which does nothing. [`of`] is the one table from a resource to
//! its strategy, read once per request target.

mod config_map;
mod crd;
mod csr;
mod event;
pub(crate) mod namespace;
mod node;
mod pod;
mod rbac;
mod scale;
mod secret;
mod service;
mod service_account;
pub(crate) mod strategy;
pub(crate) mod subresource;
mod webhook_configuration;

pub(crate) use strategy::{Committed, KindStrategy, Write};
pub(crate) use subresource::{Mutation, ObjectRequest, ObjectVerbs};

use crate::registry::ResourceDef;
use config_map::ConfigMap;
use crd::Crd;
use csr::Csr;
use event::EventsV1;
use namespace::Namespace;
use node::Node;
use pod::Pod;
use rbac::Rbac;
use secret::Secret;
use service::Service;
use service_account::ServiceAccount;
use strategy::Plain;
use webhook_configuration::WebhookConfiguration;

/// The strategy of resource `def`: the one table of special kinds, by group and resource.
pub(crate) fn of(def: &ResourceDef) -> &'static dyn KindStrategy {
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => &Namespace,
        ("", "pods") => &Pod,
        ("", "nodes") => &Node,
        ("", "services") => &Service,
        ("", "secrets") => &Secret,
        ("", "serviceaccounts") => &ServiceAccount,
        ("", "configmaps") => &ConfigMap,
        ("events.k8s.io", "events") => &EventsV1,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &Crd,
        ("certificates.k8s.io", "certificatesigningrequests") => &Csr,
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations")
        | ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            &WebhookConfiguration
        }
        ("rbac.authorization.k8s.io", _) => &Rbac,
        _ => &Plain,
    }
}
