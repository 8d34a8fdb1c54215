//! `--audit-log-path`: one `audit.k8s.io/v1` Event line per finished request, at the Metadata
//! level (who, what, the answer's code; never bodies, never credentials).

use std::{
    io::Write,
    sync::Mutex,
    time::{SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::auth::identity::{Attributes, User};

/// The audit log: one JSON line per finished request.
pub struct Audit {
    out: Mutex<Box<dyn Write + Send>>,
}

/// The audit log could not be opened.
#[derive(Debug, thiserror::Error)]
#[error("opening the audit log {path}: {source}")]
pub struct AuditError {
    /// The path given.
    pub path: String,
    /// The cause.
    #[source]
    pub source: std::io::Error,
}

/// One finished request.
pub struct Entry<'a> {
    /// Who asked.
    pub user: &'a User,
    /// What was asked.
    pub attrs: &'a Attributes,
    /// The request's path and query.
    pub request_uri: &'a str,
    /// The client's address, when known.
    pub source_ip: Option<String>,
    /// The client's `User-Agent`.
    pub user_agent: &'a str,
    /// The status code answered.
    pub code: u16,
    /// When the request arrived.
    pub received: jiff::Timestamp,
}

impl Audit {
    /// `-` writes to standard output; a path is appended to (created 0600).
    pub fn open(path: &str) -> Result<Audit, AuditError> {
        let out: Box<dyn Write + Send> = if path == "-" {
            Box::new(std::io::stdout())
        } else {
            use std::os::unix::fs::OpenOptionsExt;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(path)
                .map_err(|source| AuditError {
                    path: path.to_owned(),
                    source,
                })?;
            Box::new(f)
        };
        Ok(Audit {
            out: Mutex::new(out),
        })
    }

    /// Appends one line for `e` (a failed write is logged, never fatal).
    pub fn record(&self, e: &Entry<'_>) {
        let mut line = event(e).to_string();
        line.push('\n');
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(err) = out.write_all(line.as_bytes()).and_then(|_| out.flush()) {
            tracing::warn!(error = %err, "writing the audit log");
        }
    }
}

fn audit_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:032x}")
}

/// The Event of one request.
pub fn event(e: &Entry<'_>) -> Value {
    let (verb, object_ref) = match e.attrs {
        Attributes::Resource {
            verb,
            group,
            version,
            resource,
            subresource,
            namespace,
            name,
        } => {
            let mut r = json!({"resource": resource, "apiGroup": group, "apiVersion": version});
            for (k, v) in [
                ("namespace", namespace),
                ("name", name),
                ("subresource", subresource),
            ] {
                if !v.is_empty() {
                    r[k] = json!(v);
                }
            }
            (verb.clone(), Some(r))
        }
        Attributes::NonResource { verb, .. } => (verb.clone(), None),
    };
    let mut ev = json!({
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": audit_id(),
        "stage": "ResponseComplete",
        "requestURI": e.request_uri,
        "verb": verb,
        "user": {"username": e.user.name, "groups": e.user.groups},
        "sourceIPs": e.source_ip.iter().collect::<Vec<_>>(),
        "userAgent": e.user_agent,
        "responseStatus": {"metadata": {}, "code": e.code},
        "requestReceivedTimestamp": e.received.to_string(),
        "stageTimestamp": jiff::Timestamp::now().to_string(),
    });
    if let Some(r) = object_ref {
        ev["objectRef"] = r;
    }
    ev
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::identity::attributes;

    #[test]
    fn events_name_the_user_and_the_object() {
        let user = User {
            name: "alice".into(),
            groups: vec!["dev".into()],
            ..Default::default()
        };
        let attrs = attributes(
            &axum::http::Method::GET,
            "/apis/worker.gpustack.ai/v1/devices/n1",
            false,
        );
        let ev = event(&Entry {
            user: &user,
            attrs: &attrs,
            request_uri: "/apis/worker.gpustack.ai/v1/devices/n1",
            source_ip: Some("127.0.0.1".into()),
            user_agent: "kubectl",
            code: 200,
            received: jiff::Timestamp::now(),
        });
        assert_eq!(ev["verb"], "get");
        assert_eq!(ev["user"]["username"], "alice");
        assert_eq!(ev["objectRef"]["name"], "n1");
        assert_eq!(ev["responseStatus"]["code"], 200);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let audit = Audit::open(path.to_str().unwrap()).unwrap();
        audit.record(&Entry {
            user: &user,
            attrs: &attrs,
            request_uri: "/x",
            source_ip: None,
            user_agent: "",
            code: 403,
            received: jiff::Timestamp::now(),
        });
        let text = std::fs::read_to_string(&path).unwrap();
        let line: Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(line["kind"], "Event");
        assert_eq!(line["responseStatus"]["code"], 403);
    }
}
