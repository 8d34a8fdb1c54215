//! A synthetic hub on PostgreSQL (issue 36's scale bench, `benches/hub_postgres_scale.rs`): the
//! rows a `worker-gateway` leaves in `migrations/postgres/`'s tables after mirroring many
//! upstreams, written straight with SQL (server-side `generate_series`, no client round trip
//! per object) so that millions of objects take minutes, not the hours a real sync would.
//!
//! Every upstream `up-NNN` holds nodes `node-NNNNNNN`, each with its `Devices` (1 to 8
//! accelerators, 0.8 to 2.5 KB of JSON) and its `Node` (about 1 KB): the rows a mirror
//! writes for them (`mirror_objects` at the gateway's version, the `ADDED` event in
//! `mirror_events` under lease epoch 1), plus what the mirror keeps beside them: the Devices
//! CRD under each upstream and under the fleet view, the fleet's members, each kind's watch
//! progress and each upstream's last sync time. A replica started on it serves the stored
//! mirror as it would after a restart, with its upstreams out of reach.
//!
//! The statements are built here, pure; the bench runs them.

use serde_json::{Value, json};

/// The fleet view's cluster name.
pub const FLEET: &str = "_fleet";

/// The Devices' group and resource.
pub const DEVICES: (&str, &str) = ("worker.gpustack.ai", "devices");

/// Placeholders of the JSON templates, replaced per row by the database.
const NAME: &str = "@N@";
const VERSION: &str = "@R@";
const UID: &str = "@U@";

/// The quote the templates are embedded in (dollar quoting: nothing in them is escaped).
const QUOTE: &str = "$tpl$";

/// The widest node index `node_name` writes (7 digits): names sort as their indexes.
pub const MAX_NODES_PER_UPSTREAM: usize = 10_000_000;

/// The cluster name of upstream `k`.
pub fn upstream_name(k: usize) -> String {
    format!("up-{k:03}")
}

/// The name of node `i` of any upstream, as the database writes it.
pub fn node_name(i: usize) -> String {
    format!("node-{i:07}")
}

/// How many accelerators node `i`'s Devices has: 1, 2, 4 or 8 in turn.
pub fn accelerators_of(i: usize) -> usize {
    1 << (i % 4)
}

/// The mirrored `Devices` of a node with `n` accelerators, its name, version and uid as
/// placeholders.
pub fn devices_template(n: usize) -> String {
    let accelerators: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "id": format!("GPU-{UID}-{i}"),
                "index": i,
                "physicalIndexes": [i],
                "topology": {
                    "pciBusId": format!("0000:{:02x}:00.0", 0x18 + 0x10 * i),
                    "pciRootId": format!("0000:{:02x}:00.0", 0x17 + 0x10 * i),
                    "pciClass": "030200",
                    "numaAffinity": (i / 4).to_string(),
                    "cpuAffinity": if i < 4 { "0-55" } else { "56-111" },
                },
                "status": {"unhealthy": false},
            })
        })
        .collect();
    let body = json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "Devices",
        "metadata": metadata(json!({"kubernetes.io/hostname": NAME})),
        "spec": {"groups": [{
            "id": "h100-80gb-hbm3",
            "manufacturer": "nvidia",
            "name": "NVIDIA H100 80GB HBM3",
            "memory": 81559,
            "cores": 132,
            "driverVersion": "550.54.15",
            "runtimeVersion": "12.4",
            "computeCapability": "9.0",
            "family": "Hopper",
            "accelerators": accelerators,
        }]},
    });
    body.to_string()
}

/// A mirrored `Node`, its name, version and uid as placeholders.
pub fn node_template() -> String {
    let resources =
        json!({"cpu": "112", "memory": "2063937468Ki", "nvidia.com/gpu": "8", "pods": "110"});
    let at = "2026-12-01T00:00:00Z";
    let body = json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata(json!({
            "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": NAME,
            "kubernetes.io/os": "linux", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        })),
        "spec": {},
        "status": {
            "addresses": [{"address": NAME, "type": "Hostname"}],
            "allocatable": resources,
            "capacity": resources,
            "conditions": [{
                "lastHeartbeatTime": at, "lastTransitionTime": at,
                "reason": "KubeletReady", "status": "True", "type": "Ready",
            }],
            "nodeInfo": {
                "architecture": "amd64", "containerRuntimeVersion": "containerd://1.7.13",
                "kernelVersion": "5.15.0-105-generic", "kubeletVersion": "v1.29.3",
                "operatingSystem": "linux", "osImage": "Ubuntu 22.04.4 LTS", "systemUUID": UID,
            },
        },
    });
    body.to_string()
}

/// A mirrored object's metadata with `labels`: the gateway's version, the upstream's kept as
/// an annotation (as the mirror writes it).
fn metadata(labels: Value) -> Value {
    json!({
        "annotations": {"gpustack.ai/upstream-resource-version": VERSION},
        "creationTimestamp": "2026-12-01T00:00:00Z",
        "generation": 1,
        "labels": labels,
        "name": NAME,
        "resourceVersion": VERSION,
        "uid": UID,
    })
}

/// `template` with its placeholders filled in as the database fills them (for the tests).
pub fn fill(template: &str, name: &str, rv: u64, uid: &str) -> String {
    template
        .replace(NAME, name)
        .replace(VERSION, &rv.to_string())
        .replace(UID, uid)
}

/// `text` as a dollar-quoted SQL literal.
fn literal(text: &str) -> String {
    assert!(!text.contains(QUOTE), "a template holds its own quote");
    format!("{QUOTE}{text}{QUOTE}")
}

/// The statement that adds nodes `from..to` of upstream `cluster` (a Devices and a Node each),
/// their versions running from `first_rv + 1`, two per node in node order; it answers how many
/// objects it stored and the sum of their JSON sizes. Within each kind, a later call's names
/// must sort after an earlier one's (growing `from`), so that the keys are appended.
pub fn nodes_sql(cluster: &str, from: usize, to: usize, first_rv: u64) -> String {
    assert!(from <= to && to <= MAX_NODES_PER_UPSTREAM, "{from}..{to}");
    assert!(
        cluster
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-')
    );
    let devices: Vec<String> = (0..4)
        .map(|k| literal(&devices_template(accelerators_of(k))))
        .collect();
    let node = literal(&node_template());
    let (group, resource) = DEVICES;
    let last = to.saturating_sub(1);
    format!(
        "WITH gen AS ( \
           SELECT i, kind, format('node-%s', lpad(i::text, 7, '0')) AS name, \
             {first_rv} + (i - {from}) * 2 + kind + 1 AS rv \
           FROM generate_series({from}::bigint, {last}::bigint) AS i \
           CROSS JOIN (VALUES (0), (1)) AS k(kind) WHERE {from} < {to}), \
         rows AS MATERIALIZED ( \
           SELECT CASE kind WHEN 0 THEN '{group}' ELSE '' END AS grp, \
             CASE kind WHEN 0 THEN '{resource}' ELSE 'nodes' END AS resource, name, rv, \
             replace(replace(replace( \
               CASE WHEN kind = 1 THEN {node} \
                    WHEN i % 4 = 0 THEN {} WHEN i % 4 = 1 THEN {} \
                    WHEN i % 4 = 2 THEN {} ELSE {} END, \
               '{NAME}', name), '{VERSION}', rv::text), \
               '{UID}', md5('{cluster}/' || kind || '/' || name)::uuid::text) AS body \
           FROM gen), \
         events AS ( \
           INSERT INTO mirror_events \
             (rv, cluster, grp, resource, namespace, name, type, prev_rv, body, epoch) \
           SELECT rv, '{cluster}', grp, resource, '', name, 'ADDED', NULL, body, 1 FROM rows), \
         stored AS ( \
           INSERT INTO mirror_objects (cluster, grp, resource, namespace, name, rv, hash, body) \
           SELECT '{cluster}', grp, resource, '', name, rv, hashtextextended(body, 0), body \
           FROM rows RETURNING octet_length(body) AS bytes) \
         SELECT count(*) || ' ' || coalesce(sum(bytes), 0) FROM stored",
        devices[0], devices[1], devices[2], devices[3],
    )
}

/// The statements that store what every upstream `clusters` has besides its objects, with the
/// Devices CRD (`crd`, as an upstream serves it) under each of them and the fleet view at
/// versions from `first_rv + 1`: one version per CRD row, so `clusters.len() + 1` of them.
/// Answers, like [`nodes_sql`], the objects stored and their JSON size.
pub fn upstreams_sql(clusters: &[String], crd: &Value, first_rv: u64) -> String {
    let name = crd["metadata"]["name"].as_str().expect("the CRD's name");
    let mut crd = crd.clone();
    crd["metadata"]["resourceVersion"] = json!(VERSION);
    crd["metadata"]["uid"] = json!(UID);
    crd["metadata"]["creationTimestamp"] = json!("2026-12-01T00:00:00Z");
    crd["metadata"]["annotations"] = json!({"gpustack.ai/upstream-resource-version": VERSION});
    let crd = literal(&crd.to_string());
    let owners: Vec<String> = clusters
        .iter()
        .chain(std::iter::once(&FLEET.to_owned()))
        .map(|c| format!("'{c}'"))
        .collect();
    let members: Vec<String> = clusters.iter().map(|c| format!("('{c}')")).collect();
    let (group, resource) = DEVICES;
    let progress: Vec<String> = clusters
        .iter()
        .flat_map(|c| {
            [
                format!("('{c}', '{group}', '{resource}', '1000')"),
                format!("('{c}', '', 'nodes', '1000')"),
            ]
        })
        .collect();
    let synced: Vec<String> = clusters
        .iter()
        .map(|c| format!("('{c}', '2026-12-01T00:00:00Z')"))
        .collect();
    format!(
        "INSERT INTO mirror_fleet_members (cluster) VALUES {members}; \
         INSERT INTO mirror_progress (cluster, grp, resource, rv) VALUES {progress}; \
         INSERT INTO upstream_sync (cluster, last_sync_time) VALUES {synced}; \
         WITH owners AS ( \
           SELECT cluster, {first_rv} + ordinality AS rv \
           FROM unnest(ARRAY[{owners}]) WITH ORDINALITY AS o(cluster)), \
         rows AS MATERIALIZED ( \
           SELECT cluster, rv, replace(replace({crd}, '{VERSION}', rv::text), '{UID}', \
             md5(cluster || '/crd')::uuid::text) AS body FROM owners), \
         events AS ( \
           INSERT INTO mirror_events \
             (rv, cluster, grp, resource, namespace, name, type, prev_rv, body, epoch) \
           SELECT rv, cluster, 'apiextensions.k8s.io', 'customresourcedefinitions', '', \
             '{name}', 'ADDED', NULL, body, 1 FROM rows), \
         stored AS ( \
           INSERT INTO mirror_objects (cluster, grp, resource, namespace, name, rv, hash, body) \
           SELECT cluster, 'apiextensions.k8s.io', 'customresourcedefinitions', '', '{name}', \
             rv, hashtextextended(body, 0), body FROM rows RETURNING octet_length(body) AS bytes) \
         SELECT count(*) || ' ' || sum(bytes) FROM stored",
        members = members.join(", "),
        progress = progress.join(", "),
        synced = synced.join(", "),
        owners = owners.join(", "),
    )
}

/// The statement that makes `rv` the newest version handed out (the sequence every replica's
/// writes and lists start from).
pub fn sequence_sql(rv: u64) -> String {
    format!("UPDATE mirror_sequence SET rv = {rv} WHERE id = 0")
}

/// Parses what [`nodes_sql`] and [`upstreams_sql`] answer: (objects, JSON bytes).
pub fn parse_stored(answer: &str) -> Option<(u64, u64)> {
    let (n, bytes) = answer.trim().rsplit('\n').next()?.split_once(' ')?;
    Some((n.parse().ok()?, bytes.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filled_templates_are_the_objects_a_mirror_stores() {
        let uid = "6f1c1d6e-8f8e-4b8e-9b6e-0c2b8f1b2a3c";
        for n in [1, 2, 4, 8] {
            let text = fill(&devices_template(n), "node-0000007", 42, uid);
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["metadata"]["name"], "node-0000007");
            assert_eq!(body["metadata"]["resourceVersion"], "42");
            let accs = body["spec"]["groups"][0]["accelerators"]
                .as_array()
                .unwrap();
            assert_eq!(accs.len(), n);
            assert_eq!(accs[0]["id"], format!("GPU-{uid}-0"));
            // Issue 36's Devices of 1-2 KB: the sizes run across that range.
            assert!(
                (700..2600).contains(&text.len()),
                "{n}: {} bytes",
                text.len()
            );
        }
        let node: Value =
            serde_json::from_str(&fill(&node_template(), "node-0000007", 43, uid)).unwrap();
        assert_eq!(node["kind"], "Node");
        assert_eq!(node["status"]["nodeInfo"]["systemUUID"], uid);
    }

    #[test]
    fn node_names_sort_as_their_indexes() {
        let names: Vec<String> = [0, 9, 10, 999_999, 1_000_000].map(node_name).to_vec();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(upstream_name(7), "up-007");
        assert_eq!(
            (0..4).map(accelerators_of).collect::<Vec<_>>(),
            [1, 2, 4, 8]
        );
    }

    #[test]
    fn statements_quote_their_templates_and_answer_counts() {
        let sql = nodes_sql("up-001", 10, 20, 100);
        assert!(sql.contains("generate_series(10::bigint, 19::bigint)"));
        assert_eq!(sql.matches(QUOTE).count(), 10, "five templates");
        let crd = json!({"metadata": {"name": "devices.worker.gpustack.ai"}, "spec": {}});
        let sql = upstreams_sql(&["up-000".into(), "up-001".into()], &crd, 5);
        assert!(sql.contains("ARRAY['up-000', 'up-001', '_fleet']"));
        assert_eq!(parse_stored("3 4500\n"), Some((3, 4500)));
        assert_eq!(parse_stored("garbage"), None);
    }
}
