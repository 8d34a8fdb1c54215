//! Where kube-apiserver sends what only a node's kubelet can answer, decided from the stored
//! Pod and Node: the kubelet's address (the Node's first `InternalIP`, else `ExternalIP`, else
//! `Hostname`, at `status.daemonEndpoints.kubeletEndpoint.Port`), and the kubelet path of a
//! Pod's log with its options checked as `PodLogOptions` are (`pods/log`). Pure; the
//! forwarding is in the handlers.

use std::collections::HashMap;

use serde_json::Value;

use super::status::ApiError;

/// The kubelet's port when the Node names none (kube-apiserver's `--kubelet-port`).
pub const DEFAULT_KUBELET_PORT: u16 = 10250;
/// The address types tried, in order (kube-apiserver's `--kubelet-preferred-address-types`,
/// with the Hostname last: nothing here resolves node names).
const PREFERRED: [&str; 3] = ["InternalIP", "ExternalIP", "Hostname"];
/// The log options passed to the kubelet, as the kubelet names them.
const LOG_OPTIONS: [&str; 7] = [
    "follow",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "timestamps",
    "tailLines",
    "limitBytes",
];

/// Where a node's kubelet listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletAddress {
    /// The Node's address that the kubelet listens on.
    pub host: String,
    /// The kubelet's port (its `daemonEndpoints`).
    pub port: u16,
}

/// The kubelet address of `node`; 400 when the Node reports no address.
pub fn kubelet_address(node: &Value) -> Result<KubeletAddress, ApiError> {
    let name = node["metadata"]["name"].as_str().unwrap_or_default();
    let addresses = node["status"]["addresses"].as_array();
    let host = PREFERRED.iter().find_map(|t| {
        addresses?
            .iter()
            .find(|a| a["type"] == *t)
            .and_then(|a| a["address"].as_str())
            .filter(|a| !a.is_empty())
    });
    let Some(host) = host else {
        return Err(ApiError::bad_request(format!(
            "node {name:?} reports no address to reach its kubelet at"
        )));
    };
    let port = node["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .unwrap_or(DEFAULT_KUBELET_PORT);
    Ok(KubeletAddress {
        host: host.to_owned(),
        port,
    })
}

/// The field errors of a log request's options, each as `ValidatePodLogOptions` words it.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join(", "))]
pub struct LogOptionErrors(Vec<String>);

fn number(q: &HashMap<String, String>, k: &str) -> Result<Option<i64>, LogOptionErrors> {
    q.get(k)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                LogOptionErrors(vec![format!(
                    "{k}: Invalid value: {v:?}: must be an integer"
                )])
            })
        })
        .transpose()
}

/// The field errors of a log request's options.
fn log_option_errors(q: &HashMap<String, String>) -> Result<(), LogOptionErrors> {
    let tail = number(q, "tailLines")?;
    let limit = number(q, "limitBytes")?;
    let since = number(q, "sinceSeconds")?;
    let mut errors = Vec::new();
    if let Some(t) = tail.filter(|t| *t < 0) {
        errors.push(format!(
            "tailLines: Invalid value: {t}: must be greater than or equal to 0"
        ));
    }
    if let Some(l) = limit.filter(|l| *l < 1) {
        errors.push(format!(
            "limitBytes: Invalid value: {l}: must be greater than 0"
        ));
    }
    if let Some(s) = since.filter(|s| *s < 1) {
        errors.push(format!(
            "sinceSeconds: Invalid value: {s}: must be greater than 0"
        ));
    }
    if since.is_some() && q.contains_key("sinceTime") {
        errors.push(
            "[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
        );
    }
    if let Some(t) = q.get("sinceTime")
        && t.parse::<jiff::Timestamp>().is_err()
    {
        errors.push(format!(
            "sinceTime: Invalid value: {t:?}: not an RFC 3339 time"
        ));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(LogOptionErrors(errors))
    }
}

/// The container a log request means: the one named, or the Pod's only one.
fn chosen_container<'a>(pod: &'a Value, asked: Option<&'a str>) -> Result<&'a str, ApiError> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let names = |key: &str| -> Vec<&str> {
        pod["spec"][key]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["name"].as_str())
            .collect()
    };
    let containers = names("containers");
    let inits = names("initContainers");
    match asked.filter(|c| !c.is_empty()) {
        Some(c) if containers.contains(&c) || inits.contains(&c) => Ok(c),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if containers.len() == 1 => Ok(containers[0]),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}]",
            containers.join(" ")
        ))),
    }
}

/// A log request as the kubelet is asked it: the node to ask and the kubelet path with the
/// log options; 422 for options out of bounds, 400 for a Pod with no node or a container
/// that has not started.
pub fn log_location(
    pod: &Value,
    query: &HashMap<String, String>,
) -> Result<(String, String), ApiError> {
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    log_option_errors(query).map_err(|m| ApiError::invalid("PodLogOptions", name, m))?;
    let container = chosen_container(pod, query.get("container").map(String::as_str))?;
    let waiting = ["containerStatuses", "initContainerStatuses"]
        .iter()
        .flat_map(|k| pod["status"][*k].as_array().into_iter().flatten())
        .find(|s| s["name"] == container)
        .and_then(|s| s["state"]["waiting"].as_object());
    if let Some(w) = waiting {
        let reason = w.get("reason").and_then(Value::as_str).unwrap_or_default();
        return Err(ApiError::bad_request(format!(
            "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
        )));
    }
    let node = pod["spec"]["nodeName"]
        .as_str()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request(format!("pod {name} does not have a host assigned"))
        })?;
    let mut params: Vec<String> = LOG_OPTIONS
        .iter()
        .filter_map(|k| query.get(*k).map(|v| format!("{k}={}", encode(v))))
        .collect();
    params.sort();
    let mut path = format!(
        "/containerLogs/{}/{}/{}",
        encode(namespace),
        encode(name),
        encode(container)
    );
    if !params.is_empty() {
        path = format!("{path}?{}", params.join("&"));
    }
    Ok((node.to_owned(), path))
}

/// A path segment or query value, percent-encoded.
fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(containers: &[&str], node: Option<&str>, waiting: Option<&str>) -> Value {
        let mut p = json!({
            "metadata": {"name": "box", "namespace": "team"},
            "spec": {"containers": containers.iter().map(|c| json!({"name": c})).collect::<Vec<_>>()},
            "status": {},
        });
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        if let Some(r) = waiting {
            p["status"]["containerStatuses"] =
                json!([{"name": containers[0], "state": {"waiting": {"reason": r}}}]);
        }
        p
    }

    fn q(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_kubelet_is_reached_at_the_preferred_address_and_its_port() {
        let node = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "Hostname", "address": "n"},
                {"type": "ExternalIP", "address": "192.0.2.9"},
                {"type": "InternalIP", "address": "192.0.2.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10255}}}});
        assert_eq!(
            kubelet_address(&node).unwrap(),
            KubeletAddress {
                host: "192.0.2.1".into(),
                port: 10255
            }
        );
        let bare = json!({"metadata": {"name": "n"}, "status": {
            "addresses": [{"type": "Hostname", "address": "n"}]}});
        assert_eq!(kubelet_address(&bare).unwrap().port, DEFAULT_KUBELET_PORT);
        let none = json!({"metadata": {"name": "n"}, "status": {}});
        assert_eq!(kubelet_address(&none).unwrap_err().code, 400);
    }

    #[test]
    fn a_log_request_becomes_the_kubelets_path() {
        let (node, path) = log_location(
            &pod(&["main"], Some("gpu-a"), None),
            &q(&[("follow", "true"), ("tailLines", "5"), ("pretty", "x")]),
        )
        .unwrap();
        assert_eq!(node, "gpu-a");
        assert_eq!(path, "/containerLogs/team/box/main?follow=true&tailLines=5");
        let (_, path) = log_location(
            &pod(&["main", "sshd"], Some("gpu-a"), None),
            &q(&[("container", "sshd")]),
        )
        .unwrap();
        assert_eq!(path, "/containerLogs/team/box/sshd");
    }

    #[test]
    fn bad_log_requests_are_refused_as_kube_apiserver_refuses_them() {
        let running = pod(&["main"], Some("gpu-a"), None);
        let e = log_location(&running, &q(&[("tailLines", "-1")])).unwrap_err();
        assert_eq!(e.code, 422);
        assert!(
            e.message.contains("greater than or equal to 0"),
            "{}",
            e.message
        );
        let e = log_location(
            &running,
            &q(&[("sinceSeconds", "3"), ("sinceTime", "2026-01-01T00:00:00Z")]),
        )
        .unwrap_err();
        assert!(e.message.contains("at most one"), "{}", e.message);
        let e = log_location(&pod(&["main", "sshd"], Some("n"), None), &q(&[])).unwrap_err();
        assert!(
            e.message.contains("choose one of: [main sshd]"),
            "{}",
            e.message
        );
        let e = log_location(&running, &q(&[("container", "other")])).unwrap_err();
        assert_eq!(e.code, 400);
        let e = log_location(&pod(&["main"], None, None), &q(&[])).unwrap_err();
        assert!(e.message.contains("does not have a host assigned"));
        let e =
            log_location(&pod(&["main"], Some("n"), Some("ErrImagePull")), &q(&[])).unwrap_err();
        assert!(
            e.message.contains("is waiting to start: ErrImagePull"),
            "{}",
            e.message
        );
    }
}
