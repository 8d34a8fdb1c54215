//! The kubelet stand-in's Pod side (see [`crate::kubelet`] for its gRPC side): it stands in for
//! the kubelet of one node, which cannot run here. It follows the Pods bound to its node and
//! runs each container as a local process (the container's `command` and `args`, its `env`),
//! keeping their output as the kubelet keeps container logs (CRI lines: `<RFC 3339 time>
//! <stream> F <text>`), and reports the Pod's status as the kubelet does: `Running` with its
//! conditions, container states and an IP, and an Event as each container starts.
//!
//! What the node "has pulled" is the set of images the test gives: a container of any other
//! image waits in `ErrImagePull`, as on a node that cannot pull it. [`PodRunner::refuse_next`]
//! makes the kubelet refuse the next Pods at admission (`UnexpectedAdmissionError`), as it does
//! when a device plugin's `Allocate` fails.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use k8s_openapi::api::core::v1::{Container, Event, Pod};
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, Patch, PatchParams},
};
use serde_json::json;

/// How often the stand-in looks at its node's Pods.
const PERIOD: Duration = Duration::from_millis(100);

/// A Pod's running containers; their processes are killed when it goes.
struct Running {
    namespace: String,
    name: String,
    started: jiff::Timestamp,
    /// Each container's name, process and log.
    children: Vec<(String, Child, PathBuf)>,
}

impl Drop for Running {
    fn drop(&mut self) {
        for (_, c, _) in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[derive(Default)]
struct State {
    pods: BTreeMap<String, Running>,
    /// Pods already answered without running (refused, or waiting for an image).
    settled: BTreeSet<String>,
}

/// A running container, as the kubelet's HTTP side reports it.
#[derive(Clone, Debug)]
pub struct RunningContainer {
    pub name: String,
    pub pid: u32,
    pub log: PathBuf,
}

/// A Pod whose containers run now.
#[derive(Clone, Debug)]
pub struct RunningPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub started: jiff::Timestamp,
    pub containers: Vec<RunningContainer>,
}

/// A handle on the Pods the stand-in runs, for its HTTP side ([`crate::kubelet_http`]).
#[derive(Clone)]
pub struct Pods(Arc<Mutex<State>>);

impl Pods {
    /// The Pods running now.
    pub fn running(&self) -> Vec<RunningPod> {
        let st = self.0.lock().unwrap();
        st.pods
            .iter()
            .map(|(uid, r)| RunningPod {
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                uid: uid.clone(),
                started: r.started,
                containers: r
                    .children
                    .iter()
                    .map(|(name, c, log)| RunningContainer {
                        name: name.clone(),
                        pid: c.id(),
                        log: log.clone(),
                    })
                    .collect(),
            })
            .collect()
    }

    /// Whether Pod `uid` still runs.
    pub fn runs(&self, uid: &str) -> bool {
        self.0.lock().unwrap().pods.contains_key(uid)
    }
}

/// The stand-in's Pod side for node `node`; stops its processes when dropped.
pub struct PodRunner {
    pub node: String,
    pub dir: PathBuf,
    state: Arc<Mutex<State>>,
    refuse: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

/// The CRI log line of `text` written now to `stream`.
fn cri_line(stream: &str, text: &str) -> String {
    let ts = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.fZ");
    format!("{ts} {stream} F {text}\n")
}

/// Where container `container` of Pod `uid` logs.
pub fn log_path(dir: &Path, namespace: &str, pod: &str, uid: &str, container: &str) -> PathBuf {
    dir.join(format!("{namespace}_{pod}_{uid}"))
        .join(format!("{container}.log"))
}

fn copy_lines(
    from: impl std::io::Read + Send + 'static,
    stream: &'static str,
    log: Arc<Mutex<std::fs::File>>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            let mut f = log.lock().unwrap();
            let _ = f.write_all(cri_line(stream, &line).as_bytes());
        }
    });
}

fn start_container(c: &Container, log: &Path) -> std::io::Result<Child> {
    let mut argv: Vec<String> = c.command.clone().unwrap_or_default();
    argv.extend(c.args.clone().unwrap_or_default());
    if argv.is_empty() {
        argv = vec!["sleep".into(), "infinity".into()];
    }
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for e in c.env.iter().flatten() {
        cmd.env(&e.name, e.value.clone().unwrap_or_default());
    }
    std::fs::create_dir_all(log.parent().expect("a log has a directory"))?;
    let file = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?,
    ));
    let mut child = cmd.spawn()?;
    copy_lines(child.stdout.take().expect("piped"), "stdout", file.clone());
    copy_lines(child.stderr.take().expect("piped"), "stderr", file);
    Ok(child)
}

fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

fn cond(type_: &str, status: bool, reason: Option<&str>) -> serde_json::Value {
    let mut c = json!({"type": type_, "status": if status { "True" } else { "False" },
        "lastTransitionTime": now()});
    if let Some(r) = reason {
        c["reason"] = json!(r);
    }
    c
}

impl PodRunner {
    /// Runs the Pods bound to `node` (on the current tokio runtime), with `images` pulled,
    /// logging under `dir`.
    pub fn start(client: kube::Client, node: &str, dir: &Path, images: &[&str]) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        let refuse = Arc::new(AtomicUsize::new(0));
        let images: BTreeSet<String> = images.iter().map(|s| s.to_string()).collect();
        let (n, d, s, r) = (
            node.to_owned(),
            dir.to_owned(),
            state.clone(),
            refuse.clone(),
        );
        let task = tokio::spawn(async move {
            // Its own node's Pods only, as the kubelet asks, through a watch: listing them on
            // every pass, from every node's stand-in, was most of what a fleet of them cost.
            let mine = crate::watched::Watched::start(
                Api::<Pod>::all(client.clone()),
                kube::runtime::watcher::Config::default().fields(&format!("spec.nodeName={n}")),
            );
            let mut tick = tokio::time::interval(PERIOD);
            loop {
                tick.tick().await;
                let pods = mine.state();
                if let Err(e) = pass(&client, &pods, &n, &d, &images, &s, &r).await {
                    eprintln!("kubelet stand-in {n}: {e}");
                }
            }
        });
        PodRunner {
            node: node.to_owned(),
            dir: dir.to_owned(),
            state,
            refuse,
            task,
        }
    }

    /// The Pods it runs, for its HTTP side.
    pub fn pods(&self) -> Pods {
        Pods(self.state.clone())
    }

    /// Refuses the next `n` Pods at admission.
    pub fn refuse_next(&self, n: usize) {
        self.refuse.store(n, Ordering::SeqCst);
    }

    /// The container's log as the kubelet keeps it.
    pub fn log(&self, namespace: &str, pod: &str, uid: &str, container: &str) -> String {
        std::fs::read_to_string(log_path(&self.dir, namespace, pod, uid, container))
            .unwrap_or_default()
    }

    /// The UIDs of the Pods whose containers run now.
    pub fn running(&self) -> Vec<String> {
        self.state.lock().unwrap().pods.keys().cloned().collect()
    }

    /// The process ids of the running Pod `uid`'s containers, by container name.
    pub fn pids(&self, uid: &str) -> BTreeMap<String, u32> {
        let state = self.state.lock().unwrap();
        state
            .pods
            .get(uid)
            .map(|r| {
                r.children
                    .iter()
                    .map(|(n, c, _)| (n.clone(), c.id()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

impl Drop for PodRunner {
    fn drop(&mut self) {
        self.task.abort();
        self.state.lock().unwrap().pods.clear();
    }
}

/// Records an Event about `pod`, as the kubelet does.
async fn record(
    c: &kube::Client,
    pod: &Pod,
    node: &str,
    reason: &str,
    message: &str,
) -> Result<(), kube::Error> {
    let ns = pod.namespace().unwrap_or_default();
    let event: Event = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{}.", pod.name_any()), "namespace": ns},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": pod.name_any(),
            "namespace": ns, "uid": pod.uid()},
        "reason": reason, "message": message, "type": "Normal", "count": 1,
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": now(), "lastTimestamp": now(),
    }))
    .expect("an Event");
    Api::<Event>::namespaced(c.clone(), &ns)
        .create(&kube::api::PostParams::default(), &event)
        .await
        .map(drop)
}

async fn pass(
    c: &kube::Client,
    mine: &[Arc<Pod>],
    node: &str,
    dir: &Path,
    images: &BTreeSet<String>,
    state: &Mutex<State>,
    refuse: &AtomicUsize,
) -> Result<(), kube::Error> {
    let live: BTreeSet<String> = mine.iter().filter_map(|p| p.uid()).collect();
    {
        // Gone Pods: their containers stop (dropping `Running` kills them).
        let mut st = state.lock().unwrap();
        st.pods.retain(|uid, _| live.contains(uid));
        st.settled.retain(|uid| live.contains(uid));
    }
    for pod in mine {
        let pod = pod.as_ref();
        let uid = pod.uid().unwrap_or_default();
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(c.clone(), &ns);
        if pod.metadata.deletion_timestamp.is_some() {
            // The kubelet finishes a graceful deletion once the containers are stopped.
            state.lock().unwrap().pods.remove(&uid);
            let _ = api
                .delete(&name, &DeleteParams::default().grace_period(0))
                .await;
            continue;
        }
        {
            let st = state.lock().unwrap();
            if st.pods.contains_key(&uid) || st.settled.contains(&uid) {
                continue;
            }
        }
        let spec = pod.spec.clone().unwrap_or_default();
        let status = if refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            state.lock().unwrap().settled.insert(uid.clone());
            json!({"phase": "Failed", "reason": "UnexpectedAdmissionError",
                "message": "Pod was rejected: Allocate failed due to the device plugin's refusal, which is unexpected"})
        } else if let Some(missing) = spec
            .containers
            .iter()
            .find(|c| !images.contains(c.image.as_deref().unwrap_or_default()))
        {
            state.lock().unwrap().settled.insert(uid.clone());
            let image = missing.image.clone().unwrap_or_default();
            let statuses: Vec<serde_json::Value> = spec.containers.iter().map(|c| {
                let pulled = images.contains(c.image.as_deref().unwrap_or_default());
                let waiting = if pulled {
                    json!({"reason": "ContainerCreating"})
                } else {
                    json!({"reason": "ErrImagePull", "message": format!(
                        "failed to pull image {:?}: not found on the node or in any registry it reaches", c.image.as_deref().unwrap_or_default())})
                };
                json!({"name": c.name, "image": c.image, "imageID": "", "ready": false,
                       "restartCount": 0, "started": false, "state": {"waiting": waiting}})
            }).collect();
            let _ = image;
            json!({"phase": "Pending", "startTime": now(), "hostIP": "127.0.0.1",
                "conditions": [cond("PodScheduled", true, None), cond("Initialized", true, None),
                    cond("ContainersReady", false, Some("ContainersNotReady")),
                    cond("Ready", false, Some("ContainersNotReady"))],
                "containerStatuses": statuses})
        } else {
            let mut children = Vec::new();
            for container in &spec.containers {
                let log = log_path(dir, &ns, &name, &uid, &container.name);
                match start_container(container, &log) {
                    Ok(child) => children.push((container.name.clone(), child, log)),
                    Err(e) => eprintln!(
                        "kubelet stand-in: starting {ns}/{name}/{}: {e}",
                        container.name
                    ),
                }
            }
            let count = {
                let mut st = state.lock().unwrap();
                let running = Running {
                    namespace: ns.clone(),
                    name: name.clone(),
                    started: jiff::Timestamp::now(),
                    children,
                };
                st.pods.insert(uid.clone(), running);
                st.pods.len()
            };
            let started = now();
            let statuses: Vec<serde_json::Value> = spec.containers.iter().map(|c| json!({
                "name": c.name, "image": c.image, "imageID": format!("local://{}", c.image.as_deref().unwrap_or_default()),
                "containerID": format!("stand-in://{uid}/{}", c.name),
                "ready": true, "restartCount": 0, "started": true, "state": {"running": {"startedAt": started}}})).collect();
            // A Pod on the host's network has the host's address, as the kubelet reports it.
            let ip = if spec.host_network == Some(true) {
                "127.0.0.1".to_owned()
            } else {
                format!("10.88.{}.{}", count / 250, count % 250 + 2)
            };
            json!({"phase": "Running", "startTime": started, "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}], "podIP": ip, "podIPs": [{"ip": ip}],
                "conditions": [cond("PodScheduled", true, None), cond("Initialized", true, None),
                    cond("ContainersReady", true, None), cond("Ready", true, None)],
                "containerStatuses": statuses})
        };
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await?;
        if status["phase"] == "Running" {
            for container in &spec.containers {
                let message = format!("Started container {}", container.name);
                record(c, pod, node, "Started", &message).await?;
            }
        }
    }
    Ok(())
}
