//! What the benchmarks share: their knobs, the ~2 KB Devices object they write, figures read
//! from `/proc`, percentiles, and the closing summary's lines.

use serde_json::{Value, json};

/// An embedded cluster (`worker-gateway --embedded-cluster=one` with `gateway_args`) and a
/// `worker` against it, under `dir`; called from a multi-threaded runtime (the starts block).
pub fn cluster_and_worker(
    dir: &std::path::Path,
    gateway_args: &[&str],
) -> (
    crate::embedded::GatewayProcess,
    crate::worker::WorkerProcess,
) {
    tokio::task::block_in_place(|| {
        let mut args = vec!["--embedded-cluster=one"];
        args.extend_from_slice(gateway_args);
        let gw = crate::embedded::GatewayProcess::start_with(
            &dir.join("gw"),
            "one",
            crate::embedded::free_port(),
            &args,
        );
        let worker = crate::worker::WorkerProcess::start(&gw, &dir.join("worker"), &[], &[]);
        (gw, worker)
    })
}

/// A benchmark knob from the environment, or its default.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A Devices object of about 2 KB. The payload is an annotation: the CRD's schema would prune
/// unknown spec fields.
pub fn device(name: &str) -> Value {
    let accelerators: Vec<Value> = (0..16)
        .map(|i| json!({"id": format!("GPU-{name}-{i:02}-0123456789abcdef"), "index": i, "memoryMib": 81559, "coresPercentage": 100}))
        .collect();
    json!({
        "apiVersion": "worker.gpustack.ai/v1alpha1",
        "kind": "Devices",
        "metadata": {
            "name": name,
            "labels": {"bench": "yes", "node": name},
            "annotations": {"bench.gpustack.ai/accelerators": Value::Array(accelerators).to_string()},
        },
        "spec": {},
    })
}

/// [`device`] as a kube object.
pub fn device_object(name: &str) -> kube::api::DynamicObject {
    serde_json::from_value(device(name)).expect("a Devices object")
}

/// The `Devices` custom resource, for dynamic clients.
pub fn devices_resource() -> kube::api::ApiResource {
    kube::api::ApiResource::erase::<gpustack_api::devices::Devices>(&())
}

/// Creates `names` as [`device`]s through `client`, `concurrency` at a time.
pub async fn create_devices(client: &kube::Client, names: Vec<String>, concurrency: usize) {
    use futures::{StreamExt, TryStreamExt};
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::all_with(client.clone(), &devices_resource());
    futures::stream::iter(names)
        .map(|name| {
            let api = api.clone();
            async move {
                api.create(&kube::api::PostParams::default(), &device_object(&name))
                    .await
                    .map(|_| ())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await
        .expect("creating Devices");
}

/// Copies the regular files and directories under `from` to `to` (a stopped gateway's data
/// directory, to start another serving the same objects).
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else if t.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// `n` upstreams `u0`..`u<n-1>`, each a gateway serving a copy of a stopped gateway's data
/// directory `template_data` (its cluster named `template`), and the hub's upstreams file
/// listing them at `root/upstreams.yaml`; returns them with the hub's `--upstreams=` flag.
/// Called from a multi-threaded runtime (the starts block).
pub fn upstreams_from_template(
    root: &std::path::Path,
    template_data: &std::path::Path,
    n: usize,
) -> (Vec<crate::embedded::GatewayProcess>, String) {
    let mut upstreams = Vec::new();
    let mut file = String::new();
    for k in 0..n {
        let data = root.join(format!("u{k}"));
        copy_dir(template_data, &data);
        let gw = tokio::task::block_in_place(|| {
            crate::embedded::GatewayProcess::start_with(
                &data,
                "template",
                crate::embedded::free_port(),
                &["--embedded-cluster=template"],
            )
        });
        file.push_str(&format!(
            "- name: u{k}\n  kubeconfig: {}\n",
            gw.kubeconfig().display()
        ));
        upstreams.push(gw);
    }
    let path = root.join("upstreams.yaml");
    std::fs::write(&path, file).unwrap();
    (upstreams, format!("--upstreams={}", path.display()))
}

/// A `/proc/<pid>/status` field in kB (`VmRSS`, `VmHWM`), as MB (10^6 bytes, as the targets).
pub fn proc_status_mb(pid: u32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb * 1024.0 / 1e6)
}

/// Where a process's resident memory is: anonymous (heap), file-backed (e.g. mapped files),
/// shared memory, as `RssAnon/RssFile/RssShmem` in MB.
pub fn rss_breakdown(pid: u32) -> String {
    format!(
        "anon {:.0} MB, file {:.0} MB, shmem {:.0} MB",
        proc_status_mb(pid, "RssAnon"),
        proc_status_mb(pid, "RssFile"),
        proc_status_mb(pid, "RssShmem")
    )
}

/// The bytes this process's malloc has handed out and not had back (from its arenas and as
/// mappings of their own), in MB: what it holds live, where its resident size also counts what
/// the allocator keeps after it was freed. NaN where the C library is not glibc.
pub fn heap_in_use_mb() -> f64 {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        #[allow(unsafe_code)]
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let info = unsafe { libc::mallinfo2() };
        (info.uordblks + info.hblkhd) as f64 / 1e6
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    f64::NAN
}

/// Hands the memory this process's malloc keeps free back to the system (glibc's
/// `malloc_trim`), so that a resident size read next shows what is held, not what was once
/// used. Does nothing where the C library is not glibc.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only releases free memory; nothing allocated is touched.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The `p` quantile (0..=1) of `sorted`, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 0.5)
}

/// Milliseconds from each acknowledged write (name, when its response came) to the moment a
/// watcher saw that name, sorted; writes never seen are left out.
pub fn latencies_ms(
    acked: &[(String, std::time::Instant)],
    seen: &std::collections::HashMap<String, std::time::Instant>,
) -> Vec<f64> {
    let mut lat: Vec<f64> = acked
        .iter()
        .filter_map(|(name, t)| {
            seen.get(name)
                .map(|s| s.saturating_duration_since(*t).as_secs_f64() * 1000.0)
        })
        .collect();
    lat.sort_by(f64::total_cmp);
    lat
}

/// One figure against its target (`None`: for information), for the closing summary; `met`
/// is `None` when it could not be measured.
pub struct Figure {
    pub name: String,
    pub value: String,
    pub target: Option<&'static str>,
    pub met: Option<bool>,
}

impl Figure {
    /// The figure, printed as it is taken.
    pub fn new(
        name: impl Into<String>,
        value: String,
        target: Option<&'static str>,
        met: Option<bool>,
    ) -> Self {
        let f = Figure {
            name: name.into(),
            value,
            target,
            met,
        };
        println!("{}", f.line());
        f
    }

    pub fn line(&self) -> String {
        let (name, value) = (&self.name, &self.value);
        match (self.target, self.met) {
            (_, None) => format!("{name}: {value} (not measured)"),
            (Some(target), Some(true)) => format!("{name}: {value} (target {target}) met"),
            (Some(target), Some(false)) => format!("{name}: {value} (target {target}) MISSED"),
            (None, Some(true)) => format!("{name}: {value}"),
            (None, Some(false)) => format!("{name}: {value} FAILED"),
        }
    }
}

/// A kube client from a kubeconfig file.
pub async fn client(kubeconfig: &std::path::Path) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig parses");
    let options = kube::config::KubeConfigOptions::default();
    let config = kube::Config::from_custom_kubeconfig(kc, &options)
        .await
        .expect("kube config");
    kube::Client::try_from(config).expect("kube client")
}

/// Prints the closing summary: each figure, under the command that reproduces them.
pub fn print_summary(bench: &str, figures: &[Figure]) {
    println!(
        "\nsummary (reproduce: cargo build --release --bin gpustack-operator && cargo bench -p gpustack-tests --bench {bench}):"
    );
    for f in figures {
        println!("  {}", f.line());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_figures() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile(&v, 0.5), 3.0);
        assert_eq!(percentile(&v, 0.99), 5.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        let f = Figure::new("x", "1".into(), Some("<= 2"), Some(true));
        assert_eq!(f.line(), "x: 1 (target <= 2) met");
        assert!(serde_json::to_string(&device("n")).unwrap().len() > 1500);
    }
}
