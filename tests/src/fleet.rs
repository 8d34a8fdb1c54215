//! A fleet in containers, as a fleet operator runs one: three GPU clusters, each on a Docker
//! network of its own created `--internal` (no route anywhere else), and a hub attached to all
//! of them, every component running from the project's image (built from this build's binary by
//! `deploy/image/build.sh`; nothing is pulled).
//!
//! - A cluster is an embedded-cluster gateway (`worker-gateway --embedded-cluster=NAME`) and its
//!   `worker` in the gateway's network namespace (the worker reaches its cluster, and the
//!   cluster's aggregation the worker, on loopback, as in a Pod), and per node a
//!   `device-manager serve` there too, on the node's fixture host tree
//!   ([`crate::fleet_hosts`]: the HGX H100 node, the MI210 node, a mixed node), which detects
//!   the cards and writes the node's `Devices` and accelerator labels. No kubelet exists here:
//!   the test writes what it would, the Node and its capacity.
//! - The hub is a mirroring gateway (`worker-gateway --worker-conn-mode=loopback`) on every
//!   cluster's network and the hub's own, its own embedded cluster, and the hub `worker` serving
//!   `fleet.gpustack.ai` from the mirror's unix socket (a volume both containers mount).
//!   Upstreams are subscribed as an operator does, `POST /apis/workers` with the kubeconfig
//!   inline.
//!
//! Docker assigns every network's subnet and every container's address (fixed ones could
//! collide with the host's networks). Containers reach each other by their names, which
//! Docker's DNS answers on a shared network, and the serving certificates the test issues name
//! those; the test process reaches a container over its network's bridge at the address `docker
//! inspect` gives (looked up again after a restart), verifying the certificate against the
//! container's name (`tls-server-name`). Only what the fleet created is ever addressed, by
//! name, all of it labelled; [`Fleet`]'s drop removes containers, networks, volumes and the
//! image, also when a test panics.

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
    time::Duration,
};

use base64::Engine;
use gpustack_serving::certs::{Names, generate};

use crate::{
    docker::{build_image, require_engine},
    embedded::DEADLINE,
    fleet_hosts::{FleetNode, MOUNT},
    inventory::devices_resource,
    wait::{poll, poll_until, wait_until},
};

/// The port every gateway serves HTTPS on inside its container.
pub const API_PORT: u16 = 6443;
/// The mirror's port.
pub const MIRROR_PORT: u16 = 9443;
/// Where the image keeps its data.
const DATA: &str = "/var/lib/gpustack";
/// The hub worker's view of the mirror's data volume (its unix socket is there).
const MIRROR_MOUNT: &str = "/tmp/mirror";

/// `docker` with `args`, its output whatever happened.
pub fn docker_output(args: &[&str]) -> Output {
    Command::new("docker")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running docker {args:?}: {e}"))
}

/// `docker` with `args`, which must succeed; its standard output.
fn docker_ok(args: &[&str]) -> String {
    let out = docker_output(args);
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The address Docker gave `container` on `network`, as `docker inspect` tells it.
pub fn address(container: &str, network: &str) -> String {
    let format = format!("{{{{(index .NetworkSettings.Networks \"{network}\").IPAddress}}}}");
    let ip = docker_ok(&["inspect", "-f", &format, container]);
    assert!(!ip.is_empty(), "{container} has no address on {network}");
    ip
}

/// One GPU cluster to run: its name and its nodes.
pub struct ClusterSpec {
    pub name: &'static str,
    pub nodes: Vec<FleetNode>,
}

/// The cluster's data volume as an agent mounts it (read-only: it reads the kubeconfig).
const CLUSTER_MOUNT: &str = "/cluster";
/// The first agent's HTTPS port in a cluster's network namespace (the next one the next).
const AGENT_PORT: u16 = 32443;

/// A running cluster of the fleet.
pub struct Cluster {
    pub name: String,
    pub nodes: Vec<FleetNode>,
    /// Each node's `device-manager serve` container, in the order of `nodes`.
    pub agents: Vec<String>,
    /// Each node's fixture directory (mounted at [`MOUNT`]) and its agent's environment.
    hosts: Vec<(PathBuf, Vec<(String, String)>)>,
    /// Its network (Docker chose the subnet).
    pub network: String,
    /// Its gateway's container, also the name the hub reaches it by and its certificate names.
    pub api: String,
    pub worker: String,
    volume: String,
    /// `ca.crt`, `tls.crt`, `tls.key` of its gateway (mounted as `--cert-dir`).
    certs: PathBuf,
    /// The admin kubeconfig this test process uses (the gateway's current address, rewritten
    /// when it restarts).
    pub kubeconfig: PathBuf,
    /// The gateway's address on its network when it last started.
    address: String,
    /// Its admin token and CA, for the hub's kubeconfig.
    token: String,
}

impl Cluster {
    /// A kube client as the cluster's admin.
    pub async fn client(&self) -> kube::Client {
        client_of(&self.kubeconfig).await
    }

    /// The kubeconfig the hub reaches it with: its container's name (Docker's DNS on the
    /// shared network), its CA and its admin token, all inline (a subscription may name no
    /// file).
    pub fn hub_kubeconfig(&self) -> String {
        kubeconfig_text(
            &format!("https://{}:{API_PORT}", self.api),
            &self.api,
            &read(&self.certs.join("ca.crt")),
            &self.token,
        )
    }

    /// The names its serving certificate is for: its container (as the hub and this process
    /// verify it), its cluster name, and loopback.
    fn serving_names(&self) -> [&str; 4] {
        [&self.api, &self.name, "localhost", "127.0.0.1"]
    }

    /// Writes this process's kubeconfig: the gateway's address, verified as its name.
    fn write_kubeconfig(&self) {
        let server = format!("https://{}:{API_PORT}", self.address);
        let text = kubeconfig_text(
            &server,
            &self.api,
            &read(&self.certs.join("ca.crt")),
            &self.token,
        );
        write_atomically(&self.kubeconfig, &text);
    }
}

/// The hub's containers and how this test process reaches them.
pub struct Hub {
    pub network: String,
    pub api: String,
    pub worker: String,
    pub mirror: String,
    api_volume: String,
    mirror_volume: String,
    /// The hub cluster's admin kubeconfig (fleet reads go there).
    pub kubeconfig: PathBuf,
    /// The mirror's `--token-file` token, as a kubeconfig for its HTTPS port.
    pub mirror_kubeconfig: PathBuf,
}

impl Hub {
    /// `kubectl` at the hub cluster with `args`.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        let cache = self.kubeconfig.with_extension("kube-cache");
        let flags = vec![
            format!("--kubeconfig={}", self.kubeconfig.display()),
            format!("--cache-dir={}", cache.display()),
        ];
        crate::embedded::kubectl_with(&flags, args)
            .output()
            .expect("running kubectl")
    }

    /// A kube client as the hub cluster's admin.
    pub async fn client(&self) -> kube::Client {
        client_of(&self.kubeconfig).await
    }

    /// [`Hub::client`] without kube's retries: a 503 reaches the caller as the hub answered
    /// it (kube's client retries 429, 503 and 504 with backoff by default, so a read answered
    /// 503 while the hub restarts looked like a read that never answered).
    pub async fn client_without_retries(&self) -> kube::Client {
        let mut config = config_of(&self.kubeconfig).await;
        config.default_retry = false;
        kube::Client::try_from(config).expect("a kube client")
    }

    /// A kube client of the mirror gateway as its admin (`/apis/workers`, `/metrics`, and
    /// `/clusters/NAME/...` of every mirror).
    pub async fn mirror_client(&self) -> kube::Client {
        self.mirror_at("").await
    }

    /// A kube client of the mirror of `cluster` (`/clusters/NAME/` at the mirror).
    pub async fn mirror_of(&self, cluster: &str) -> kube::Client {
        self.mirror_at(&format!("/clusters/{cluster}")).await
    }

    /// A client of the mirror's `path`, at the address it has now (a restarted container may
    /// have another).
    async fn mirror_at(&self, path: &str) -> kube::Client {
        let kc = kube::config::Kubeconfig::read_from(&self.mirror_kubeconfig)
            .expect("the mirror's kubeconfig");
        let mut config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .expect("a config from the mirror's kubeconfig");
        let ip = address(&self.mirror, &self.network);
        config.cluster_url = format!("https://{ip}:{MIRROR_PORT}{path}")
            .parse()
            .expect("a URL");
        config.connect_timeout = Some(Duration::from_secs(2));
        config.read_timeout = Some(Duration::from_secs(5));
        kube::Client::try_from(config).expect("a mirror client")
    }
}

/// The fleet: its clusters, its hub, and everything to remove afterwards.
pub struct Fleet {
    pub name: String,
    label: String,
    pub image: String,
    pub dir: tempfile::TempDir,
    pub clusters: Vec<Cluster>,
    pub hub: Hub,
}

/// A kube client from a kubeconfig file, each request bounded.
pub async fn client_of(kubeconfig: &Path) -> kube::Client {
    kube::Client::try_from(config_of(kubeconfig).await).expect("a kube client")
}

/// The client configuration of a kubeconfig file, each request bounded.
async fn config_of(kubeconfig: &Path) -> kube::Config {
    let kc = kube::config::Kubeconfig::read_from(kubeconfig).expect("reading a kubeconfig");
    let mut config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .expect("a config from a kubeconfig");
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(30));
    config
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Writes `path` through a rename, so that a reader never sees half of it.
fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// A kubeconfig with everything inline; the server's certificate is verified as `name`.
fn kubeconfig_text(server: &str, name: &str, ca_pem: &str, token: &str) -> String {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    tls-server-name: {name}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
    )
}

/// Writes a fresh CA and a serving pair for `names` into `dir` (readable by the image's user).
pub fn issue_certs(dir: &Path, ca_name: &str, names: &[&str]) {
    let g = generate(&Names {
        ca_common_name: ca_name,
        common_name: names[0],
        subject_alt_names: names,
    })
    .expect("generating certificates");
    std::fs::create_dir_all(dir).unwrap();
    set_mode(dir, 0o755);
    // The pair first, then the CA: the gateway reloads once both files of the pair changed.
    for (name, pem) in [
        ("tls.key", &g.key_pem),
        ("tls.crt", &g.cert_pem),
        ("ca.crt", &g.ca_pem),
    ] {
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, pem).unwrap();
        set_mode(&tmp, 0o644);
        std::fs::rename(&tmp, dir.join(name)).unwrap();
    }
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The admin token of the kubeconfig a gateway wrote at `path` in `container`, once it is
/// there.
fn token_in(container: &str, path: &str, scratch: &Path) -> String {
    let copy = scratch.join(format!("{container}.kubeconfig"));
    wait_until(
        &format!("{container} to write {path}"),
        DEADLINE * 2,
        || {
            let out = docker_output(&["cp", &format!("{container}:{path}"), copy.to_str()?]);
            if !out.status.success() {
                assert_running(container);
                return None;
            }
            let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&read(&copy)).ok()?;
            doc["users"][0]["user"]["token"].as_str().map(str::to_owned)
        },
    )
}

/// Panics with its log when `container` is not running.
pub fn assert_running(container: &str) {
    let running = docker_output(&["inspect", "-f", "{{.State.Running}}", container]);
    if String::from_utf8_lossy(&running.stdout).trim() != "true" {
        panic!("{container} is not running:\n{}", logs(container));
    }
}

/// The last lines of a container's log.
pub fn logs(container: &str) -> String {
    let out = docker_output(&["logs", "--tail", "60", container]);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

impl Fleet {
    /// Builds the image and starts the clusters of `specs` and the hub, each upstream
    /// subscribed; returns once `kubectl get clusters` at the hub shows every one `Ready`.
    pub async fn start(specs: Vec<ClusterSpec>) -> Fleet {
        require_engine();
        let name = format!("gpustack-fleet-{}", std::process::id());
        let label = format!("gpustack.test={name}");
        let dir = tempfile::tempdir().expect("a scratch directory");
        set_mode(dir.path(), 0o755);
        // The fleet is assembled before anything can fail, so that its drop removes all.
        let mut fleet = Fleet {
            image: format!("gpustack/gpustack-operator:{name}"),
            hub: Hub {
                network: format!("{name}-hub"),
                api: format!("{name}-hub-api"),
                worker: format!("{name}-hub-worker"),
                mirror: format!("{name}-hub-mirror"),
                api_volume: format!("{name}-hub-api"),
                mirror_volume: format!("{name}-hub-mirror"),
                kubeconfig: dir.path().join("hub.kubeconfig"),
                mirror_kubeconfig: dir.path().join("mirror.kubeconfig"),
            },
            clusters: Vec::new(),
            name,
            label,
            dir,
        };
        build_image(&fleet.image);
        for spec in specs {
            let n = &fleet.name;
            let hosts = spec
                .nodes
                .iter()
                .map(|node| {
                    let dir = fleet
                        .dir
                        .path()
                        .join(format!("hosts/{}/{}", spec.name, node.name));
                    let env = node.build(&dir);
                    (dir, env)
                })
                .collect();
            let agents = spec
                .nodes
                .iter()
                .map(|node| format!("{n}-{}-dm-{}", spec.name, node.name))
                .collect();
            let cluster = Cluster {
                agents,
                hosts,
                network: format!("{n}-{}", spec.name),
                api: format!("{n}-{}-api", spec.name),
                worker: format!("{n}-{}-worker", spec.name),
                volume: format!("{n}-{}", spec.name),
                certs: fleet.dir.path().join(format!("certs-{}", spec.name)),
                kubeconfig: fleet.dir.path().join(format!("{}.kubeconfig", spec.name)),
                name: spec.name.to_owned(),
                nodes: spec.nodes,
                address: String::new(),
                token: String::new(),
            };
            fleet.clusters.push(cluster);
        }
        fleet.networks();
        for i in 0..fleet.clusters.len() {
            let c = &fleet.clusters[i];
            issue_certs(&c.certs, &format!("{}-ca", c.name), &c.serving_names());
            fleet.start_cluster(i, true).await;
        }
        fleet.start_hub();
        for i in 0..fleet.clusters.len() {
            fleet.subscribe(i).await;
        }
        let names: Vec<String> = fleet.clusters.iter().map(|c| c.name.clone()).collect();
        fleet.wait_phases(&names, "Ready", DEADLINE * 4);
        fleet
    }

    /// `docker run -d` of the image as `name`, labelled, with `flags` and the command `args`.
    fn run(&self, name: &str, flags: &[&str], args: &[&str]) {
        let mut all = vec!["run", "-d", "--name", name, "--label", &self.label];
        all.extend_from_slice(flags);
        all.push(&self.image);
        all.extend_from_slice(args);
        docker_ok(&all);
    }

    /// Creates the internal networks, the hub's and each cluster's, on subnets Docker picks.
    fn networks(&self) {
        let mut names = vec![&self.hub.network];
        names.extend(self.clusters.iter().map(|c| &c.network));
        for network in names {
            docker_ok(&[
                "network",
                "create",
                "--internal",
                "--label",
                &self.label,
                network,
            ]);
        }
    }

    /// Starts cluster `i`'s gateway and worker (its volume created first when `fresh`), and
    /// starts an agent per node.
    async fn start_cluster(&mut self, i: usize, fresh: bool) {
        let c = &self.clusters[i];
        if fresh {
            docker_ok(&["volume", "create", "--label", &self.label, &c.volume]);
        }
        let data = format!("{}:{DATA}", c.volume);
        let certs = format!("{}:/certs:ro", c.certs.display());
        let serve = format!("--embedded-cluster={}", c.name);
        let port = format!("--secure-port={API_PORT}");
        self.run(
            &c.api,
            &["--network", &c.network, "-v", &data, "-v", &certs],
            &[
                "worker-gateway",
                &serve,
                "--bind-address=0.0.0.0",
                &port,
                "--cert-dir=/certs",
                "--bind-unix-path=",
            ],
        );
        let token = token_in(
            &c.api,
            &format!("{DATA}/{}.kubeconfig", c.name),
            self.dir.path(),
        );
        let address = address(&c.api, &c.network);
        let c = &mut self.clusters[i];
        c.token = token;
        c.address = address;
        c.write_kubeconfig();
        let c = &self.clusters[i];
        let kubeconfig = format!("--kubeconfig={DATA}/{}.kubeconfig", c.name);
        let netns = format!("container:{}", c.api);
        self.run(
            &c.worker,
            &["--network", &netns, "-v", &data, "-v", &certs],
            &[
                "worker",
                &kubeconfig,
                "--bind-address=127.0.0.1",
                "--gateway-socket=",
                "--kube-leader-election=false",
            ],
        );
        let client = c.client().await;
        for (k, node) in c.nodes.iter().enumerate() {
            // What the kubelet would write, before the agent looks for its Node.
            let last = std::cell::RefCell::new(None);
            let published = poll(DEADLINE * 4, || async {
                publish_node(&client, node)
                    .await
                    .map_err(|e| *last.borrow_mut() = Some(e))
                    .ok()
            })
            .await;
            if published.is_none() {
                panic!(
                    "publishing the Node {} in {}: {:?}\n{}",
                    node.name,
                    c.name,
                    last.borrow(),
                    logs(&c.api)
                );
            }
            self.start_agent(i, k);
        }
        // Each agent's first detection is in its Devices once the worker has installed the kind.
        let c = &self.clusters[i];
        let devices = kube::Api::<kube::core::DynamicObject>::all_with(client, &devices_resource());
        for (node, agent) in c.nodes.iter().zip(&c.agents) {
            let written = poll(DEADLINE * 4, || async {
                let d = devices.get_opt(&node.name).await.ok()??;
                let groups = d.data["spec"]["groups"].as_array()?;
                (!groups.is_empty()).then_some(())
            })
            .await;
            if written.is_none() {
                panic!(
                    "{agent} wrote no Devices {} in {}:\n{}\nworker:\n{}",
                    node.name,
                    c.name,
                    logs(agent),
                    logs(&c.worker)
                );
            }
        }
    }

    /// Starts `device-manager serve` for node `k` of cluster `i`, in the cluster's network
    /// namespace, on the node's fixture tree, as root (as its DaemonSet runs it), with its
    /// device plugin directory on a scratch tmpfs (no kubelet registers it here).
    fn start_agent(&self, i: usize, k: usize) {
        let c = &self.clusters[i];
        let node = &c.nodes[k];
        let (dir, env) = &c.hosts[k];
        let netns = format!("container:{}", c.api);
        let data = format!("{}:{CLUSTER_MOUNT}:ro", c.volume);
        let fixture = format!("{}:{MOUNT}:ro", dir.display());
        let node_env = format!("KUBERNETES_NODE_NAME={}", node.name);
        let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut flags = vec![
            "--network",
            &netns,
            "--user",
            "0",
            "--tmpfs",
            "/var/lib/kubelet/device-plugins",
            "-v",
            &data,
            "-v",
            &fixture,
            "-e",
            &node_env,
        ];
        for e in &env {
            flags.extend_from_slice(&["-e", e]);
        }
        let manufacturers = format!("--manufacturer={}", node.manufacturers());
        let port = format!("--secure-port={}", AGENT_PORT + k as u16);
        let kubeconfig = format!("--kubeconfig={CLUSTER_MOUNT}/{}.kubeconfig", c.name);
        self.run(
            &c.agents[k],
            &flags,
            &[
                "device-manager",
                "serve",
                &manufacturers,
                "--monitor-period=5s",
                "--bind-address=127.0.0.1",
                &port,
                &kubeconfig,
            ],
        );
    }

    /// Starts the hub: its cluster, the mirror on every network, and the hub worker.
    fn start_hub(&self) {
        let hub = &self.hub;
        let certs = self.dir.path().join("certs-hub");
        issue_certs(&certs, "hub-ca", &[&hub.api, "localhost", "127.0.0.1"]);
        let mirror_certs = self.dir.path().join("certs-mirror");
        issue_certs(
            &mirror_certs,
            "mirror-ca",
            &[&hub.mirror, "localhost", "127.0.0.1"],
        );
        let config = self.dir.path().join("config");
        std::fs::create_dir_all(&config).unwrap();
        set_mode(&config, 0o755);
        let admin = format!("admin-{}", self.name);
        std::fs::write(config.join("admin.token"), &admin).unwrap();
        set_mode(&config.join("admin.token"), 0o644);
        // Its server is looked up at each use (`Hub::mirror_at`).
        std::fs::write(
            &hub.mirror_kubeconfig,
            kubeconfig_text(
                &format!("https://{}:{MIRROR_PORT}", hub.mirror),
                &hub.mirror,
                &read(&mirror_certs.join("ca.crt")),
                &admin,
            ),
        )
        .unwrap();

        for v in [&hub.api_volume, &hub.mirror_volume] {
            docker_ok(&["volume", "create", "--label", &self.label, v]);
        }
        // The hub's own cluster.
        let api_data = format!("{}:{DATA}", hub.api_volume);
        let api_certs = format!("{}:/certs:ro", certs.display());
        let port = format!("--secure-port={API_PORT}");
        self.run(
            &hub.api,
            &["--network", &hub.network, "-v", &api_data, "-v", &api_certs],
            &[
                "worker-gateway",
                "--embedded-cluster=hub",
                "--bind-address=0.0.0.0",
                &port,
                "--cert-dir=/certs",
                "--bind-unix-path=",
            ],
        );
        let token = token_in(&hub.api, &format!("{DATA}/hub.kubeconfig"), self.dir.path());
        std::fs::write(
            &hub.kubeconfig,
            kubeconfig_text(
                &format!("https://{}:{API_PORT}", address(&hub.api, &hub.network)),
                &hub.api,
                &read(&certs.join("ca.crt")),
                &token,
            ),
        )
        .unwrap();

        // The mirror, created on the hub's network, then attached to every cluster's.
        let mirror_data = format!("{}:{DATA}", hub.mirror_volume);
        let mirror_certs = format!("{}:/certs:ro", mirror_certs.display());
        let config_mount = format!("{}:/config:ro", config.display());
        let socket = format!("--bind-unix-path={DATA}/mirror.sock");
        let port = format!("--secure-port={MIRROR_PORT}");
        let mut create = vec![
            "create",
            "--name",
            &hub.mirror,
            "--label",
            &self.label,
            "--network",
            &hub.network,
        ];
        create.extend_from_slice(&["-v", &mirror_data]);
        create.extend_from_slice(&["-v", &mirror_certs, "-v", &config_mount, &self.image]);
        create.extend_from_slice(&[
            "worker-gateway",
            "--worker-conn-mode=loopback",
            "--bind-address=0.0.0.0",
            &port,
            &socket,
            "--cert-dir=/certs",
            "--token-file=/config/admin.token",
        ]);
        docker_ok(&create);
        for c in &self.clusters {
            self.connect_mirror(c);
        }
        docker_ok(&["start", &hub.mirror]);

        // The hub worker, in the hub cluster's network namespace, with the mirror's socket.
        let mirror_mount = format!("{}:{MIRROR_MOUNT}", hub.mirror_volume);
        let kubeconfig = format!("--kubeconfig={DATA}/hub.kubeconfig");
        let gateway = format!("--gateway-socket={MIRROR_MOUNT}/mirror.sock");
        let netns = format!("container:{}", hub.api);
        self.run(
            &hub.worker,
            &[
                "--network",
                &netns,
                "-v",
                &api_data,
                "-v",
                &api_certs,
                "-v",
                &mirror_mount,
            ],
            &[
                "worker",
                &kubeconfig,
                "--bind-address=127.0.0.1",
                &gateway,
                "--kube-leader-election=false",
            ],
        );
    }

    /// Attaches the mirror to `c`'s network.
    pub fn connect_mirror(&self, c: &Cluster) {
        docker_ok(&["network", "connect", &c.network, &self.hub.mirror]);
    }

    /// Cuts the mirror off `c`'s network (the cluster itself keeps running and serving).
    pub fn partition(&self, c: &Cluster) {
        docker_ok(&["network", "disconnect", &c.network, &self.hub.mirror]);
    }

    /// Subscribes cluster `i` at the mirror with its current kubeconfig (`force`: replacing a
    /// subscription of the same name, as an operator does when a cluster's credentials or CA
    /// change).
    pub async fn subscribe(&self, i: usize) {
        let c = &self.clusters[i];
        let body = serde_json::json!({
            "clusters": [c.name],
            "kubeconfigData": c.hub_kubeconfig(),
            "force": true,
        });
        let client = self.hub.mirror_client().await;
        let request = http::Request::post("/apis/workers")
            .header("Content-Type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let last = std::cell::RefCell::new(String::new());
        let done = poll(DEADLINE, || async {
            let asked = client.request_text(request_clone(&request)).await;
            asked.map_err(|e| *last.borrow_mut() = e.to_string()).ok()
        })
        .await;
        if done.is_none() {
            panic!(
                "subscribing {}: {}\n{}",
                c.name,
                last.borrow(),
                logs(&self.hub.mirror)
            );
        }
    }

    /// Replaces cluster `i`'s serving certificate with one of a new CA (its gateway loads it
    /// within 10 s), and this process's kubeconfig with one trusting that CA. The hub is not
    /// told: [`Fleet::subscribe`] does, as an operator would.
    pub fn replace_ca(&self, i: usize, ca_name: &str) {
        let c = &self.clusters[i];
        issue_certs(&c.certs, ca_name, &c.serving_names());
        c.write_kubeconfig();
    }

    /// Kills cluster `i` (gateway and worker, SIGKILL) and starts it again; with `wipe`, on a
    /// new empty volume (a new cluster under the same name: new uids, versions from the start,
    /// a new admin token, which the hub is given again).
    pub async fn kill_cluster(&mut self, i: usize, wipe: bool) {
        let c = &self.clusters[i];
        let (api, worker, volume) = (c.api.clone(), c.worker.clone(), c.volume.clone());
        // SIGKILL (any may be down already: the fault may have begun with its API).
        for agent in &c.agents {
            let _ = docker_output(&["kill", agent]);
        }
        let _ = docker_output(&["kill", &worker]);
        let _ = docker_output(&["kill", &api]);
        let mut gone: Vec<&str> = c.agents.iter().map(String::as_str).collect();
        gone.extend_from_slice(&[&worker, &api]);
        let mut rm = vec!["rm", "-f"];
        rm.extend(gone);
        docker_ok(&rm);
        if wipe {
            docker_ok(&["volume", "rm", &volume]);
        }
        self.start_cluster(i, wipe).await;
        if wipe {
            self.subscribe(i).await;
        }
    }

    /// Waits until `kubectl get clusters` at the hub shows each of `names` in `phase`.
    pub fn wait_phases(&self, names: &[String], phase: &str, deadline: Duration) {
        let mut last = String::new();
        let done = poll_until(deadline, || {
            let out = self
                .hub
                .kubectl(&["get", "clusters.fleet.gpustack.ai", "-o", "json"]);
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            let items = doc["items"].as_array()?;
            names
                .iter()
                .all(|n| {
                    items
                        .iter()
                        .any(|c| c["metadata"]["name"] == **n && c["status"]["phase"] == phase)
                })
                .then_some(())
        });
        if done.is_none() {
            panic!(
                "timed out waiting for {names:?} to be {phase} at the hub; clusters:\n{last}\nmirror log:\n{}\nhub worker log:\n{}",
                logs(&self.hub.mirror),
                logs(&self.hub.worker)
            );
        }
    }
}

/// Writes `node` as the kubelet would: its Node (no accelerator labels: the agent writes those)
/// and its status with the device plugin's pools, with the kubelet's own field manager.
async fn publish_node(c: &kube::Client, node: &FleetNode) -> Result<(), kube::Error> {
    use kube::api::{Api, Patch, PatchParams};
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(c.clone());
    let pp = PatchParams::apply("kubelet-stand-in").force();
    nodes
        .patch(&node.name, &pp, &Patch::Apply(node.node()))
        .await?;
    nodes
        .patch_status(&node.name, &pp, &Patch::Apply(node.node_status()))
        .await?;
    Ok(())
}

/// A copy of a request with a byte body (kube's `request_text` takes it by value).
fn request_clone(r: &http::Request<Vec<u8>>) -> http::Request<Vec<u8>> {
    let mut copy = http::Request::builder()
        .method(r.method().clone())
        .uri(r.uri().clone());
    for (k, v) in r.headers() {
        copy = copy.header(k, v);
    }
    copy.body(r.body().clone()).unwrap()
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // For a look after a failure: everything stays, with the commands that remove it.
        if std::env::var_os("GPUSTACK_FLEET_KEEP").is_some() {
            eprintln!(
                "GPUSTACK_FLEET_KEEP: the fleet stays; remove it with\n  docker rm -f $(docker ps -aq --filter label={0}); docker network prune -f --filter label={0}; docker volume prune -f --filter label={0}; docker rmi {1}",
                self.label, self.image
            );
            std::mem::forget(std::mem::replace(
                &mut self.dir,
                tempfile::tempdir().unwrap(),
            ));
            return;
        }
        let filter = format!("label={}", self.label);
        let ids = docker_output(&["ps", "-aq", "--filter", &filter]);
        for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
            let _ = docker_output(&["rm", "-f", "-v", id]);
        }
        for kind in ["network", "volume"] {
            let ids = docker_output(&[kind, "ls", "-q", "--filter", &filter]);
            for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
                let _ = docker_output(&[kind, "rm", id]);
            }
        }
        let _ = docker_output(&["rmi", "-f", &self.image]);
    }
}
