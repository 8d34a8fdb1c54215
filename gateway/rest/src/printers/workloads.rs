//! Workloads: Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, CronJob, and
//! PodDisruptionBudget.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{
    between, bool_word, condition, containers, count, int_at, int_or_string, items, label_map,
    or_none, selector, selector_or_none, since, text, timestamp,
};
use super::{AGE, Col, col, wide};

/// The columns `kubectl get` shows for Deployments, as kube-apiserver prints them.
pub const DEPLOYMENT: &[Col] = &[
    col("Ready", "string", ready_of_desired),
    col("Up-to-date", "string", updated_replicas),
    col("Available", "string", available_replicas),
    AGE,
    wide("Containers", "string", container_names),
    wide("Images", "string", container_images),
    wide("Selector", "string", deployment_selector),
];
/// The columns `kubectl get` shows for ReplicaSets, as kube-apiserver prints them.
pub const REPLICA_SET: &[Col] = &[
    col("Desired", "integer", desired_replicas),
    col("Current", "integer", current_replicas),
    col("Ready", "integer", ready_replicas),
    AGE,
    wide("Containers", "string", container_names),
    wide("Images", "string", container_images),
    wide("Selector", "string", spec_selector),
];
/// The columns `kubectl get` shows for StatefulSets, as kube-apiserver prints them.
pub const STATEFUL_SET: &[Col] = &[
    col("Ready", "string", ready_of_desired),
    AGE,
    wide("Containers", "string", container_names),
    wide("Images", "string", container_images),
];
/// The columns `kubectl get` shows for DaemonSets, as kube-apiserver prints them.
pub const DAEMON_SET: &[Col] = &[
    col("Desired", "integer", daemons_desired),
    col("Current", "integer", daemons_current),
    col("Ready", "integer", daemons_ready),
    col("Up-to-date", "integer", daemons_updated),
    col("Available", "integer", daemons_available),
    col("Node Selector", "string", daemons_node_selector),
    AGE,
    wide("Containers", "string", container_names),
    wide("Images", "string", container_images),
    wide("Selector", "string", spec_selector),
];
/// The columns `kubectl get` shows for Jobs, as kube-apiserver prints them.
pub const JOB: &[Col] = &[
    col("Status", "string", job_status),
    col("Completions", "string", job_completions),
    col("Duration", "string", job_duration),
    AGE,
    wide("Containers", "string", container_names),
    wide("Images", "string", container_images),
    wide("Selector", "string", spec_selector),
];
/// The columns `kubectl get` shows for CronJobs, as kube-apiserver prints them.
pub const CRON_JOB: &[Col] = &[
    col("Schedule", "string", cron_schedule),
    col("Timezone", "string", cron_time_zone),
    col("Suspend", "boolean", cron_suspend),
    col("Active", "integer", cron_active),
    col("Last Schedule", "string", cron_last_schedule),
    AGE,
    wide("Containers", "string", cron_container_names),
    wide("Images", "string", cron_container_images),
    wide("Selector", "string", cron_selector),
];
/// The columns `kubectl get` shows for PodDisruptionBudgets, as kube-apiserver prints them.
pub const POD_DISRUPTION_BUDGET: &[Col] = &[
    col("Min Available", "string", pdb_min_available),
    col("Max Unavailable", "string", pdb_max_unavailable),
    col("Allowed Disruptions", "integer", pdb_allowed_disruptions),
    AGE,
];

/// `spec.replicas`, 1 (the API's default) when unset.
fn desired(obj: &Value) -> i64 {
    int_at(obj, "/spec/replicas").unwrap_or(1)
}

/// `ready/desired` replicas.
fn ready_of_desired(obj: &Value, _: Timestamp) -> Value {
    format!("{}/{}", count(obj, "/status/readyReplicas"), desired(obj)).into()
}

fn updated_replicas(obj: &Value, _: Timestamp) -> Value {
    count(obj, "/status/updatedReplicas").into()
}

fn available_replicas(obj: &Value, _: Timestamp) -> Value {
    count(obj, "/status/availableReplicas").into()
}

fn desired_replicas(obj: &Value, _: Timestamp) -> Value {
    desired(obj).into()
}

fn current_replicas(obj: &Value, _: Timestamp) -> Value {
    count(obj, "/status/replicas").into()
}

fn ready_replicas(obj: &Value, _: Timestamp) -> Value {
    count(obj, "/status/readyReplicas").into()
}

fn container_names(obj: &Value, _: Timestamp) -> Value {
    containers(obj.pointer("/spec/template/spec")).0.into()
}

fn container_images(obj: &Value, _: Timestamp) -> Value {
    containers(obj.pointer("/spec/template/spec")).1.into()
}

/// A Deployment's selector; empty (not `<none>`) when it has none, as kube-apiserver prints.
fn deployment_selector(obj: &Value, _: Timestamp) -> Value {
    selector(obj.pointer("/spec/selector")).into()
}

fn spec_selector(obj: &Value, _: Timestamp) -> Value {
    selector_or_none(obj.pointer("/spec/selector")).into()
}

fn daemons_desired(ds: &Value, _: Timestamp) -> Value {
    count(ds, "/status/desiredNumberScheduled").into()
}

fn daemons_current(ds: &Value, _: Timestamp) -> Value {
    count(ds, "/status/currentNumberScheduled").into()
}

fn daemons_ready(ds: &Value, _: Timestamp) -> Value {
    count(ds, "/status/numberReady").into()
}

fn daemons_updated(ds: &Value, _: Timestamp) -> Value {
    count(ds, "/status/updatedNumberScheduled").into()
}

fn daemons_available(ds: &Value, _: Timestamp) -> Value {
    count(ds, "/status/numberAvailable").into()
}

fn daemons_node_selector(ds: &Value, _: Timestamp) -> Value {
    label_map(ds.pointer("/spec/template/spec/nodeSelector")).into()
}

/// Whether the job's first condition of type `kind` is true.
fn job_condition(job: &Value, kind: &str) -> bool {
    condition(job, kind).is_some_and(|c| text(c, "/status") == "True")
}

fn job_status(job: &Value, _: Timestamp) -> Value {
    let deleting = job
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|t| !t.is_null());
    let status = if job_condition(job, "Complete") {
        "Complete"
    } else if job_condition(job, "Failed") {
        "Failed"
    } else if deleting {
        "Terminating"
    } else if job_condition(job, "Suspended") {
        "Suspended"
    } else if job_condition(job, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    status.into()
}

/// `succeeded/completions`; a job without completions needs one success (`0/1`, or
/// `0/1 of 3` when it runs several pods at once).
fn job_completions(job: &Value, _: Timestamp) -> Value {
    let succeeded = count(job, "/status/succeeded");
    let cell = match int_at(job, "/spec/completions") {
        Some(n) => format!("{succeeded}/{n}"),
        None => match count(job, "/spec/parallelism") {
            p if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    };
    cell.into()
}

/// From start to completion, or to now while running; empty before the job starts.
fn job_duration(job: &Value, now: Timestamp) -> Value {
    let Some(start) = timestamp(text(job, "/status/startTime")) else {
        return "".into();
    };
    let end = timestamp(text(job, "/status/completionTime")).unwrap_or(now);
    between(start, end).into()
}

fn cron_schedule(cj: &Value, _: Timestamp) -> Value {
    text(cj, "/spec/schedule").into()
}

fn cron_time_zone(cj: &Value, _: Timestamp) -> Value {
    or_none(text(cj, "/spec/timeZone")).into()
}

fn cron_suspend(cj: &Value, _: Timestamp) -> Value {
    // Unset means not suspended, the API's default.
    let suspended = cj.pointer("/spec/suspend").and_then(Value::as_bool);
    bool_word(Some(suspended.unwrap_or(false))).into()
}

fn cron_active(cj: &Value, _: Timestamp) -> Value {
    (items(cj, "/status/active").len() as i64).into()
}

fn cron_last_schedule(cj: &Value, now: Timestamp) -> Value {
    match text(cj, "/status/lastScheduleTime") {
        "" => "<none>".into(),
        t => since(t, now).into(),
    }
}

fn cron_container_names(cj: &Value, _: Timestamp) -> Value {
    containers(cj.pointer("/spec/jobTemplate/spec/template/spec"))
        .0
        .into()
}

fn cron_container_images(cj: &Value, _: Timestamp) -> Value {
    containers(cj.pointer("/spec/jobTemplate/spec/template/spec"))
        .1
        .into()
}

fn cron_selector(cj: &Value, _: Timestamp) -> Value {
    selector_or_none(cj.pointer("/spec/jobTemplate/spec/selector")).into()
}

fn pdb_min_available(pdb: &Value, _: Timestamp) -> Value {
    int_or_string(pdb.pointer("/spec/minAvailable"))
        .unwrap_or_else(|| "N/A".into())
        .into()
}

fn pdb_max_unavailable(pdb: &Value, _: Timestamp) -> Value {
    int_or_string(pdb.pointer("/spec/maxUnavailable"))
        .unwrap_or_else(|| "N/A".into())
        .into()
}

fn pdb_allowed_disruptions(pdb: &Value, _: Timestamp) -> Value {
    count(pdb, "/status/disruptionsAllowed").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    fn deployment() -> Value {
        json!({"spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}, {"name": "log", "image": "busybox"}]}}},
            "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}})
    }

    #[test]
    fn deployments() {
        let d = deployment();
        assert_eq!(ready_of_desired(&d, now()), "2/3");
        assert_eq!(updated_replicas(&d, now()), 3);
        assert_eq!(available_replicas(&d, now()), 2);
        assert_eq!(container_names(&d, now()), "web,log");
        assert_eq!(container_images(&d, now()), "nginx:1,busybox");
        assert_eq!(deployment_selector(&d, now()), "app=web");
        assert_eq!(deployment_selector(&json!({}), now()), "");
        assert_eq!(ready_of_desired(&json!({}), now()), "0/1");
    }

    #[test]
    fn replica_sets_and_stateful_sets() {
        let rs = deployment();
        assert_eq!(desired_replicas(&rs, now()), 3);
        assert_eq!(current_replicas(&rs, now()), 3);
        assert_eq!(ready_replicas(&rs, now()), 2);
        assert_eq!(spec_selector(&rs, now()), "app=web");
        assert_eq!(spec_selector(&json!({}), now()), "<none>");
        let sts = json!({"spec": {"replicas": 2}, "status": {"readyReplicas": 2}});
        assert_eq!(ready_of_desired(&sts, now()), "2/2");
    }

    #[test]
    fn daemon_sets() {
        let ds = json!({"spec": {"template": {"spec": {"nodeSelector": {"gpu": "true"}}}},
            "status": {"desiredNumberScheduled": 4, "currentNumberScheduled": 3, "numberReady": 2,
                "updatedNumberScheduled": 1}});
        assert_eq!(daemons_desired(&ds, now()), 4);
        assert_eq!(daemons_current(&ds, now()), 3);
        assert_eq!(daemons_ready(&ds, now()), 2);
        assert_eq!(daemons_updated(&ds, now()), 1);
        assert_eq!(daemons_available(&ds, now()), 0);
        assert_eq!(daemons_node_selector(&ds, now()), "gpu=true");
        assert_eq!(daemons_node_selector(&json!({}), now()), "<none>");
    }

    #[test]
    fn job_status_by_condition() {
        let job = |conditions: Value| json!({"status": {"conditions": conditions}});
        assert_eq!(job_status(&job(json!([])), now()), "Running");
        let complete = job(json!([{"type": "Complete", "status": "True"}]));
        assert_eq!(job_status(&complete, now()), "Complete");
        let failed = job(json!([{"type": "Failed", "status": "True"}]));
        assert_eq!(job_status(&failed, now()), "Failed");
        let suspended = job(json!([{"type": "Suspended", "status": "True"}]));
        assert_eq!(job_status(&suspended, now()), "Suspended");
        let not_yet = job(json!([{"type": "Complete", "status": "False"}]));
        assert_eq!(job_status(&not_yet, now()), "Running");
        let deleting = json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}});
        assert_eq!(job_status(&deleting, now()), "Terminating");
    }

    #[test]
    fn job_completions_and_duration() {
        let job = json!({"spec": {"completions": 3}, "status": {"succeeded": 1,
            "startTime": "2026-01-01T00:50:00Z"}});
        assert_eq!(job_completions(&job, now()), "1/3");
        assert_eq!(job_duration(&job, now()), "10m");
        let parallel = json!({"spec": {"parallelism": 3}});
        assert_eq!(job_completions(&parallel, now()), "0/1 of 3");
        assert_eq!(job_completions(&json!({}), now()), "0/1");
        let done = json!({"status": {"startTime": "2026-01-01T00:00:00Z",
            "completionTime": "2026-01-01T00:05:02Z"}});
        assert_eq!(job_duration(&done, now()), "5m2s");
        assert_eq!(job_duration(&json!({}), now()), "");
    }

    #[test]
    fn cron_jobs() {
        let cj = json!({"spec": {"schedule": "*/5 * * * *", "timeZone": "Etc/UTC", "suspend": true,
                "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "j1"}], "lastScheduleTime": "2026-01-01T00:57:00Z"}});
        assert_eq!(cron_schedule(&cj, now()), "*/5 * * * *");
        assert_eq!(cron_time_zone(&cj, now()), "Etc/UTC");
        assert_eq!(cron_suspend(&cj, now()), "True");
        assert_eq!(cron_active(&cj, now()), 1);
        assert_eq!(cron_last_schedule(&cj, now()), "3m");
        assert_eq!(cron_container_names(&cj, now()), "c");
        assert_eq!(cron_container_images(&cj, now()), "busybox");
        assert_eq!(cron_selector(&cj, now()), "<none>");
        let bare = json!({"spec": {"schedule": "@daily"}});
        assert_eq!(cron_time_zone(&bare, now()), "<none>");
        assert_eq!(cron_suspend(&bare, now()), "False");
        assert_eq!(cron_active(&bare, now()), 0);
        assert_eq!(cron_last_schedule(&bare, now()), "<none>");
    }

    #[test]
    fn disruption_budgets() {
        let pdb = json!({"spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 2}});
        assert_eq!(pdb_min_available(&pdb, now()), "50%");
        assert_eq!(pdb_max_unavailable(&pdb, now()), "N/A");
        assert_eq!(pdb_allowed_disruptions(&pdb, now()), 2);
        let other = json!({"spec": {"maxUnavailable": 1}});
        assert_eq!(pdb_max_unavailable(&other, now()), "1");
        assert_eq!(pdb_min_available(&other, now()), "N/A");
    }
}
