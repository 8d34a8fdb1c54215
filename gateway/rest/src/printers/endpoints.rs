//! Endpoints and EndpointSlice, as kube-apiserver prints them: at most three addresses, then
//! how many more.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{items, text};
use super::{AGE, Col, col};

/// The columns `kubectl get` shows for Endpoints, as kube-apiserver prints them.
pub const ENDPOINTS: &[Col] = &[col("Endpoints", "string", endpoints_addresses), AGE];
/// The columns `kubectl get` shows for EndpointSlices, as kube-apiserver prints them.
pub const ENDPOINT_SLICE: &[Col] = &[
    col("AddressType", "string", slice_address_type),
    col("Ports", "string", slice_ports),
    col("Endpoints", "string", slice_addresses),
    AGE,
];

/// How many entries a cell shows before `+ N more...`.
const SHOWN: usize = 3;

/// The first [`SHOWN`] of `entries` joined by commas, with how many more; `empty` when none.
fn at_most_three(entries: &[String], empty: &str) -> String {
    if entries.is_empty() {
        return empty.to_owned();
    }
    let shown = entries[..entries.len().min(SHOWN)].join(",");
    match entries.len().saturating_sub(SHOWN) {
        0 => shown,
        more => format!("{shown} + {more} more..."),
    }
}

/// `ip:port` for each address of each subset and each of its ports (`ip` alone without ports).
fn endpoints_addresses(ep: &Value, _: Timestamp) -> Value {
    let mut entries = Vec::new();
    for subset in items(ep, "/subsets") {
        let ports = items(subset, "/ports");
        for address in items(subset, "/addresses") {
            let ip = text(address, "/ip");
            if ports.is_empty() {
                entries.push(ip.to_owned());
            }
            for port in ports {
                entries.push(format!("{ip}:{}", port["port"]));
            }
        }
    }
    at_most_three(&entries, "<none>").into()
}

fn slice_address_type(slice: &Value, _: Timestamp) -> Value {
    text(slice, "/addressType").into()
}

fn slice_ports(slice: &Value, _: Timestamp) -> Value {
    let ports: Vec<String> = items(slice, "/ports")
        .iter()
        .map(|p| match p.get("port") {
            Some(n) if !n.is_null() => n.to_string(),
            _ => "<unset>".to_owned(),
        })
        .collect();
    at_most_three(&ports, "<unset>").into()
}

fn slice_addresses(slice: &Value, _: Timestamp) -> Value {
    let addresses: Vec<String> = items(slice, "/endpoints")
        .iter()
        .flat_map(|e| items(e, "/addresses"))
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    at_most_three(&addresses, "<unset>").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_and_ports_as_kubectl_shows_them() {
        let now = Timestamp::UNIX_EPOCH;
        let ep = json!({"subsets": [{"addresses": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.2"}],
            "ports": [{"port": 443}, {"port": 80}]}]});
        assert_eq!(
            endpoints_addresses(&ep, now),
            "192.0.2.1:443,192.0.2.1:80,192.0.2.2:443 + 1 more..."
        );
        assert_eq!(endpoints_addresses(&json!({}), now), "<none>");
        let bare = json!({"subsets": [{"addresses": [{"ip": "192.0.2.9"}]}]});
        assert_eq!(endpoints_addresses(&bare, now), "192.0.2.9");
        let slice = json!({"addressType": "IPv4", "ports": [{"port": 6443}, {"name": "x"}],
            "endpoints": [{"addresses": ["192.0.2.1"]}, {"addresses": ["192.0.2.2"]}]});
        assert_eq!(slice_address_type(&slice, now), "IPv4");
        assert_eq!(slice_ports(&slice, now), "6443,<unset>");
        assert_eq!(slice_addresses(&slice, now), "192.0.2.1,192.0.2.2");
        assert_eq!(slice_addresses(&json!({}), now), "<unset>");
    }
}
