//! NodePorts of `NodePort` and `LoadBalancer` Services, allocated at create as kube-apiserver
//! allocates them: from 30000–32767, unique in the cluster; a port the client names is kept, and
//! refused when another Service holds it. (Two creates racing may pick one port: the store has
//! no allocation table, and an embedded cluster has no kube-proxy to make the clash matter.)

use std::collections::BTreeSet;

use serde_json::Value;

use crate::api::status::ApiError;
use crate::store::Store;

/// kube-apiserver's default `--service-node-port-range`.
pub const FIRST: i32 = 30000;
/// The last port of the default NodePort range.
pub const LAST: i32 = 32767;

/// Whether the Service gets node ports.
pub fn wants(service: &Value) -> bool {
    matches!(
        service.pointer("/spec/type").and_then(Value::as_str),
        Some("NodePort" | "LoadBalancer")
    )
}

/// Why a Service's node port cannot be had (kube-apiserver's field errors).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NodePortError {
    /// The asked-for port is outside the NodePort range.
    #[error(
        "spec.ports[{index}].nodePort: Invalid value: {port}: provided port is not in the valid range. The range of valid ports is {FIRST}-{LAST}"
    )]
    OutOfRange {
        /// The index of the Service port.
        index: usize,
        /// The node port asked for.
        port: i32,
    },
    /// The asked-for port is another Service's.
    #[error(
        "spec.ports[{index}].nodePort: Invalid value: {port}: provided port is already allocated"
    )]
    Taken {
        /// The index of the Service port.
        index: usize,
        /// The node port asked for.
        port: i32,
    },
    /// Every port of the range is taken.
    #[error("spec.ports[{index}].nodePort: Internal error: range is full")]
    RangeFull {
        /// The index of the Service port that needed one.
        index: usize,
    },
}

/// Fills every port's `nodePort` not given, avoiding `taken`, starting the search at `seed`;
/// an error naming the field when a given one is taken or out of range.
pub fn assign(service: &mut Value, taken: &BTreeSet<i32>, seed: u64) -> Result<(), NodePortError> {
    let mut taken = taken.clone();
    let span = (LAST - FIRST + 1) as u64;
    let Some(ports) = service
        .pointer_mut("/spec/ports")
        .and_then(Value::as_array_mut)
    else {
        return Ok(());
    };
    for (i, p) in ports.iter_mut().enumerate() {
        if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
            let n = n as i32;
            if !(FIRST..=LAST).contains(&n) {
                return Err(NodePortError::OutOfRange { index: i, port: n });
            }
            if !taken.insert(n) {
                return Err(NodePortError::Taken { index: i, port: n });
            }
        }
    }
    for (i, p) in ports.iter_mut().enumerate() {
        if p.get("nodePort").and_then(Value::as_i64).is_some() {
            continue;
        }
        let free = (0..span)
            .map(|k| FIRST + ((seed + i as u64 + k) % span) as i32)
            .find(|n| !taken.contains(n))
            .ok_or(NodePortError::RangeFull { index: i })?;
        taken.insert(free);
        p["nodePort"] = Value::from(free);
    }
    Ok(())
}

/// The node ports the cluster's Services hold.
async fn taken(store: &Store, cluster: &str) -> Result<BTreeSet<i32>, ApiError> {
    let mut out = BTreeSet::new();
    let mut after: Option<(String, String)> = None;
    loop {
        let page = store
            .list(
                cluster,
                "",
                "services",
                None,
                after.as_ref().map(|(a, b)| (a.as_str(), b.as_str())),
                500,
            )
            .await
            .map_err(|e| ApiError::internal(format!("listing services: {e}")))?;
        for s in &page.items {
            for p in s
                .pointer("/spec/ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if let Some(n) = p.get("nodePort").and_then(Value::as_i64) {
                    out.insert(n as i32);
                }
            }
        }
        let last = page.items.last().map(|s| {
            let m = |k: &str| {
                s.pointer(&format!("/metadata/{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned()
            };
            (m("namespace"), m("name"))
        });
        match (page.more, last) {
            (true, Some(l)) => after = Some(l),
            _ => return Ok(out),
        }
    }
}

/// Allocates the node ports of a Service being created in `cluster`.
pub async fn allocate(store: &Store, cluster: &str, service: &mut Value) -> Result<(), ApiError> {
    if !wants(service) {
        return Ok(());
    }
    let taken = taken(store, cluster).await?;
    let seed = jiff::Timestamp::now().subsec_nanosecond() as u64;
    let name = service
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    assign(service, &taken, seed).map_err(|m| ApiError::invalid("Service", &name, m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn free_ports_are_given_and_held_ones_refused() {
        let mut svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 22}, {"port": 80, "nodePort": 30001}]}});
        assert!(wants(&svc));
        assign(&mut svc, &BTreeSet::from([30000]), 0).unwrap();
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], 30002);
        assert_eq!(svc["spec"]["ports"][1]["nodePort"], 30001);
        // Wraps around the end of the range.
        let mut svc = json!({"spec": {"type": "NodePort", "ports": [{"port": 22}]}});
        assign(&mut svc, &BTreeSet::from([LAST]), (LAST - FIRST) as u64).unwrap();
        assert_eq!(svc["spec"]["ports"][0]["nodePort"], FIRST);
        let mut held =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 22, "nodePort": 30000}]}});
        assert_eq!(
            assign(&mut held, &BTreeSet::from([30000]), 0)
                .unwrap_err()
                .to_string(),
            "spec.ports[0].nodePort: Invalid value: 30000: provided port is already allocated"
        );
        let mut out =
            json!({"spec": {"type": "NodePort", "ports": [{"port": 22, "nodePort": 80}]}});
        assert_eq!(
            assign(&mut out, &BTreeSet::new(), 0),
            Err(NodePortError::OutOfRange { index: 0, port: 80 })
        );
        assert!(!wants(&json!({"spec": {"type": "ClusterIP"}})));
    }
}
