//! Kubernetes `Status` error bodies: every failed request answers one, with the code and reason
//! clients (kubectl, kube-rs) key on.

use axum::{
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

/// A failed request, rendered as a `kind: Status` body.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// The Kubernetes reason (`NotFound`, `AlreadyExists`, `Invalid`...).
    pub reason: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// The `details` object (name, group, kind, causes), where there is one.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error with `code`, `reason` and `message`, without details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, group: &str, resource: &str, name: &str) -> Self {
        let mut d = json!({ "name": name, "kind": resource });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 404: the object `name` of `resource` is not there.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 409: an object `name` of `resource` is there already.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(group, resource)),
        )
        .with_details(group, resource, name)
    }

    /// 409: the object changed since the version the request was based on.
    pub fn conflict(group: &str, resource: &str, name: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; please apply your changes to the latest version and try again",
                qualified(group, resource)
            ),
        )
        .with_details(group, resource, name)
    }

    /// A 400 saying `why` (a message, or a typed error that words its own).
    pub fn bad_request(why: impl std::fmt::Display) -> Self {
        Self::new(400, "BadRequest", why.to_string())
    }

    /// 422: the object `name` of `kind` is not valid.
    pub fn invalid(kind: &str, name: &str, message: impl std::fmt::Display) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {message}"),
        )
    }

    /// 404 for a path that names nothing served.
    pub fn not_found_path() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    /// 405: `verb` is not served here.
    pub fn method_not_allowed(verb: &str) -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({verb})"),
        )
    }

    /// 401: no credentials, or credentials that are not valid.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 406: no form the `Accept` header allows.
    pub fn not_acceptable(accept: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json, application/yaml (asked for {accept})"
            ),
        )
    }

    /// A client that takes only protobuf, asking about a kind without a protobuf form (a
    /// custom resource): refused before anything is done, as kube-apiserver refuses it.
    pub fn no_protobuf_form(api_version: &str, kind: &str) -> Self {
        Self::new(
            406,
            "NotAcceptable",
            format!("{api_version} {kind} has no protobuf form: ask for application/json"),
        )
    }

    /// 415: a body of a media type the endpoint does not read.
    pub fn unsupported_media_type(content_type: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format: {content_type}"),
        )
    }

    /// 410: a resource version too old to watch or continue from.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 500: a failure of the server's own.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `resource.group`, or `resource` for the core group, as Kubernetes names them in messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

/// A resource request, as a denial names it.
pub struct ResourceRequest<'a> {
    /// The RBAC verb.
    pub verb: &'a str,
    /// The API group; empty for the core group.
    pub group: &'a str,
    /// The resource's plural name.
    pub resource: &'a str,
    /// The subresource; empty for none.
    pub subresource: &'a str,
    /// Empty at the cluster scope.
    pub namespace: &'a str,
    /// Empty for collections.
    pub name: &'a str,
}

impl ResourceRequest<'_> {
    /// kube-apiserver's 403 message when `user` may not make this request.
    pub fn forbidden_message(&self, user: &str) -> String {
        let (verb, group, resource) = (self.verb, self.group, self.resource);
        let what = qualified(group, resource);
        let object = if self.name.is_empty() {
            what
        } else {
            format!("{what} \"{}\"", self.name)
        };
        let res = if self.subresource.is_empty() {
            resource.to_owned()
        } else {
            format!("{resource}/{}", self.subresource)
        };
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_owned()
        } else {
            format!("in the namespace \"{}\"", self.namespace)
        };
        format!(
            "{object} is forbidden: User \"{user}\" cannot {verb} resource \"{res}\" in API group \"{group}\" {scope}"
        )
    }
}

/// kube-apiserver's 403 message for a path that names no resource.
pub fn forbidden_path_message(user: &str, verb: &str, path: &str) -> String {
    format!("forbidden: User \"{user}\" cannot {verb} path \"{path}\"")
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = StatusCode::from_u16(self.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            self.to_status().to_string(),
        )
            .into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_resource_and_group() {
        let e = ApiError::not_found("worker.gpustack.ai", "devices", "n1");
        let s = e.to_status();
        assert_eq!(s["kind"], "Status");
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["message"], "devices.worker.gpustack.ai \"n1\" not found");
        assert_eq!(s["details"]["group"], "worker.gpustack.ai");
        let core = ApiError::not_found("", "configmaps", "x").to_status();
        assert_eq!(core["message"], "configmaps \"x\" not found");
        assert!(core["details"].get("group").is_none());
    }

    #[test]
    fn conflict_is_409() {
        let s = ApiError::conflict("", "configmaps", "x").to_status();
        assert_eq!(s["code"], 409);
        assert_eq!(s["reason"], "Conflict");
    }
}
