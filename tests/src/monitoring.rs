//! What the project says about its monitoring, read where it is written so that the tests and
//! the text stay in step: the metrics each service's doc lists (its `## Metrics` table), the
//! chart's alerts (`files/alerts.yaml`) and its Grafana dashboards' queries
//! (`files/dashboards/*.json`).

use std::{collections::BTreeSet, path::PathBuf};

use serde_json::Value;

use crate::{helm::chart_dir, python_grpc::checkout};

/// The docs with a `## Metrics` table, by the service they document.
pub const SERVICE_DOCS: [(&str, &str); 4] = [
    ("worker", "docs/worker.md"),
    ("worker-gateway", "docs/worker-gateway.md"),
    ("device-manager", "docs/device-manager-serve.md"),
    ("model-manager", "docs/model-manager.md"),
];

/// The metric names in the `## Metrics` table of `doc` (a path in the checkout): the first
/// cell of each row, when it is a `gpustack_` name in backquotes.
pub fn documented_metrics(doc: &str) -> Vec<String> {
    let text =
        std::fs::read_to_string(checkout().join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let section = text
        .split("\n## ")
        .find(|s| s.starts_with("Metrics\n"))
        .unwrap_or_else(|| panic!("{doc} has no ## Metrics section"));
    let names: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `gpustack_"))
        .filter_map(|l| l.split_once('`'))
        .map(|(rest, _)| format!("gpustack_{rest}"))
        .collect();
    assert!(!names.is_empty(), "{doc}'s Metrics table lists no metric");
    names
}

/// The chart's alerting rule file.
pub fn alerts_file() -> PathBuf {
    chart_dir().join("files/alerts.yaml")
}

/// The chart's alerts: (name, expression).
pub fn alerts() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(alerts_file()).expect("files/alerts.yaml");
    let doc: Value = serde_yaml_ng::from_str(&text).expect("alerts.yaml is YAML");
    doc["groups"]
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| {
            Some((
                r["alert"].as_str()?.to_owned(),
                r["expr"].as_str()?.to_owned(),
            ))
        })
        .collect()
}

/// One dashboard panel's query.
#[derive(Debug, Clone)]
pub struct PanelQuery {
    pub dashboard: String,
    pub panel: String,
    pub expr: String,
}

/// Every query of every panel of the chart's dashboards.
pub fn dashboard_queries() -> Vec<PanelQuery> {
    let dir = chart_dir().join("files/dashboards");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("files/dashboards")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let d: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let dashboard = d["title"].as_str().unwrap_or_default().to_owned();
        for p in d["panels"].as_array().into_iter().flatten() {
            for t in p["targets"].as_array().into_iter().flatten() {
                out.push(PanelQuery {
                    dashboard: dashboard.clone(),
                    panel: p["title"].as_str().unwrap_or_default().to_owned(),
                    expr: t["expr"].as_str().expect("a target's expr").to_owned(),
                });
            }
        }
    }
    out
}

/// The `gpustack_` metric families a PromQL expression reads (a histogram's `_bucket`,
/// `_count` and `_sum` series as their family).
pub fn families_read(expr: &str) -> BTreeSet<String> {
    let re = regex::Regex::new(r"gpustack_[a-z0-9_]+").expect("regex");
    re.find_iter(expr)
        .map(|m| {
            let name = m.as_str();
            ["_bucket", "_count", "_sum"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .unwrap_or(name)
                .to_owned()
        })
        .collect()
}
