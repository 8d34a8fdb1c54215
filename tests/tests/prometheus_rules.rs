//! The chart's alerts and dashboards with Debian's `promtool`: the rule file
//! (`files/alerts.yaml`) passes `promtool check rules`; its unit tests
//! (`tests/fixtures/prometheus/alerts_test.yaml`) pass `promtool test rules`, every alert has a
//! case where it fires, and each alert made never to fire fails them (the tests can fail); every
//! dashboard query parses (checked as a recording rule); and every `gpustack_` family the alerts
//! and dashboards read is one a service's doc lists.

use std::{collections::BTreeSet, path::Path, process::Command};

use gpustack_tests::{
    monitoring::{
        SERVICE_DOCS, alerts, alerts_file, dashboard_queries, documented_metrics, families_read,
    },
    python_grpc::checkout,
};
use serde_json::{Value, json};

fn promtool(args: &[&str]) -> std::process::Output {
    Command::new("promtool")
        .args(args)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "promtool could not be run ({e}): install Debian's prometheus package \
                 (apt-get install --no-install-recommends prometheus); .ci/run does"
            )
        })
}

#[track_caller]
fn assert_ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn unit_tests() -> std::path::PathBuf {
    checkout().join("tests/fixtures/prometheus/alerts_test.yaml")
}

#[test]
fn the_rules_pass_promtool_check_and_their_unit_tests() {
    assert_ok(
        &promtool(&["check", "rules", alerts_file().to_str().unwrap()]),
        "promtool check rules",
    );
    assert_ok(
        &promtool(&["test", "rules", unit_tests().to_str().unwrap()]),
        "promtool test rules",
    );
}

#[test]
fn every_alert_has_a_firing_case_and_the_cases_catch_an_alert_that_never_fires() {
    let tests: Value =
        serde_yaml_ng::from_str(&std::fs::read_to_string(unit_tests()).unwrap()).unwrap();
    let firing: BTreeSet<String> = tests["tests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["exp_alerts"].as_array().is_some_and(|a| !a.is_empty()))
        .filter_map(|c| c["alertname"].as_str().map(str::to_owned))
        .collect();
    let all = alerts();
    assert!(all.len() >= 7, "{all:?}");
    for (name, _) in &all {
        assert!(firing.contains(name), "no unit test expects {name} to fire");
    }
    // Each alert made never to fire: the unit tests must fail, naming it.
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(alerts_file()).unwrap();
    let rules: Value = serde_yaml_ng::from_str(&text).unwrap();
    for (name, _) in &all {
        let mut broken = rules.clone();
        for g in broken["groups"].as_array_mut().unwrap() {
            for r in g["rules"].as_array_mut().unwrap() {
                if r["alert"] == json!(name) {
                    r["expr"] = json!("vector(1) > 2");
                }
            }
        }
        let rules_path = dir.path().join("alerts.yaml");
        std::fs::write(&rules_path, serde_yaml_ng::to_string(&broken).unwrap()).unwrap();
        let mut cases = tests.clone();
        cases["rule_files"] = json!([rules_path]);
        let cases_path = dir.path().join("alerts_test.yaml");
        std::fs::write(&cases_path, serde_yaml_ng::to_string(&cases).unwrap()).unwrap();
        let out = promtool(&["test", "rules", cases_path.to_str().unwrap()]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && said.contains(name.as_str()),
            "the unit tests pass with {name} never firing:\n{said}"
        );
    }
}

#[test]
fn every_dashboard_query_parses() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 20, "{} queries", queries.len());
    // promtool parses a recording rule's expression as Prometheus does a query.
    let rules = json!({"groups": [{"name": "dashboards", "rules": queries
        .iter()
        .enumerate()
        .map(|(i, q)| json!({"record": format!("dashboard:query_{i}"), "expr": q.expr}))
        .collect::<Vec<_>>()}]});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dashboards.yaml");
    std::fs::write(&path, serde_yaml_ng::to_string(&rules).unwrap()).unwrap();
    assert_ok(
        &promtool(&["check", "rules", path.to_str().unwrap()]),
        "promtool check rules on the dashboards' queries",
    );
}

#[test]
fn alerts_and_dashboards_read_only_documented_metrics() {
    let documented: BTreeSet<String> = SERVICE_DOCS
        .iter()
        .flat_map(|(_, doc)| documented_metrics(doc))
        .collect();
    let mut read: Vec<(String, String)> = alerts()
        .into_iter()
        .flat_map(|(name, expr)| {
            families_read(&expr)
                .into_iter()
                .map(move |f| (format!("alert {name}"), f))
        })
        .collect();
    read.extend(dashboard_queries().into_iter().flat_map(|q| {
        families_read(&q.expr)
            .into_iter()
            .map(move |f| (format!("{} / {}", q.dashboard, q.panel), f))
    }));
    for (by, family) in &read {
        assert!(
            documented.contains(family),
            "{by} reads {family}, which no service doc's Metrics table lists"
        );
    }
    assert!(Path::new(&alerts_file()).exists());
}
