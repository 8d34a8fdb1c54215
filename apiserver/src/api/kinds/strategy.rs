//! The hooks a kind may have, each with a default that does nothing.

use axum::response::Response;
use futures::future::BoxFuture;
use serde_json::Value;

use super::subresource::Subresource;
use crate::api::{Core, Ctx, field_errors::FieldError, objects, status::ApiError};
use crate::{registry::ResourceDef, store::ObjectKey};

/// A hook that may wait (on the store, the registry): done, or the error that refuses the
/// write.
pub(crate) type Hook<'a> = BoxFuture<'a, Result<(), ApiError>>;

/// The hook that does nothing.
pub(super) fn done<'a>() -> Hook<'a> {
    Box::pin(std::future::ready(Ok(())))
}

/// A write to one object, as a hook sees it: the server's state, the request (who, in which
/// cluster), the resource, and the write's time.
pub(crate) struct Write<'a> {
    pub core: &'a Core,
    pub ctx: &'a Ctx,
    pub def: &'a ResourceDef,
    pub now: jiff::Timestamp,
}

/// What a commit did to an object: created it (as stored), updated it (as stored), or removed
/// it for good.
#[derive(Clone, Copy)]
pub(crate) enum Committed<'a> {
    Created(&'a Value),
    Updated(&'a Value),
    Deleted,
}

/// A create answered by a subresource of an object of this kind (TokenRequest): the object's
/// namespace and name, and the request's body.
pub(crate) type SubresourceCreate = for<'a> fn(
    &'a Core,
    &'a Ctx,
    &'a str,
    &'a str,
    Value,
) -> BoxFuture<'a, Result<Response, ApiError>>;

/// What is special about a kind. Every hook has a default that does nothing; the pipelines call
/// them in this order: [`objects::KindRules`] (names, canonical form) while the server fills in
/// its fields, [`Self::prepare_for_create`] after the mutating webhooks, [`Self::validate`] with
/// the metadata's rules, [`Self::prepare_for_update`] on the stored form just before an update
/// commits, then [`Self::after_commit`] once the store committed. [`Self::storage_form`] and
/// [`Self::served_form`] turn the served form into the stored one and back.
pub(crate) trait KindStrategy: objects::KindRules + Send + Sync {
    /// What the server sets on a new object once the mutating webhooks ran: its status, what it
    /// allocates, whom it records as the requester. May refuse it.
    fn prepare_for_create<'a>(&'a self, _w: &'a Write<'a>, _obj: &'a mut Value) -> Hook<'a> {
        done()
    }

    /// The kind's own problems with `obj` (replacing `old` on an update), reported together
    /// with its metadata's.
    fn validate(&self, _obj: &Value, _old: Option<&Value>) -> Vec<FieldError> {
        Vec::new()
    }

    /// The stored form `new` of an update of `current` (stored form too) as it will commit;
    /// `status` when written through `/status`. May refuse it.
    fn prepare_for_update(
        &self,
        _current: &Value,
        _new: &mut Value,
        _status: bool,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// After the store committed `change` to the object at `key`.
    fn after_commit<'a>(
        &'a self,
        _w: &'a Write<'a>,
        _key: &'a ObjectKey,
        _change: Committed<'a>,
    ) -> Hook<'a> {
        done()
    }

    /// Whether objects of this kind hold others (a namespace): a delete marks the object as
    /// terminating ([`Self::terminating`]) and it goes once nothing is left in it.
    fn holds_objects(&self) -> bool {
        false
    }

    /// What a delete sets on an object that [`Self::holds_objects`] as it starts terminating.
    fn terminating(&self, _obj: &mut Value) {}

    /// The stored form of an object given in this resource's form (fields another form names
    /// otherwise), after the generic conversion set its storage `apiVersion`.
    fn storage_form(&self, _obj: &mut serde_json::Map<String, Value>) {}

    /// This resource's form of a stored object.
    fn served_form(&self, _obj: &mut serde_json::Map<String, Value>) {}

    /// The create a POST to subresource `sub` of an object of this kind answers, if any.
    fn subresource_create(&self, _sub: &str) -> Option<SubresourceCreate> {
        None
    }

    /// What serves subresource `sub` (one the resource declares) of an object of this kind;
    /// `None` when the kind serves no such subresource. By default a kind serves those every
    /// kind may declare (`scale`).
    fn subresource(&self, sub: &str) -> Option<Subresource> {
        super::scale::of_any_kind(sub)
    }
}

/// A kind with nothing special: every default.
pub(super) struct Plain;

impl objects::KindRules for Plain {}
impl KindStrategy for Plain {}
