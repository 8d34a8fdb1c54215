//! The command line: every command and flag of the command reference, with the reference's names,
//! defaults and bounds. Bounds that involve one flag are checked by its value parser; bounds
//! between flags are checked in [`super::validate`].

use std::{net::IpAddr, path::PathBuf};

use clap::{Args, Parser, Subcommand};
use gpustack_api::Manufacturer;

use super::duration::GoDuration;

#[derive(Parser, Debug)]
#[command(
    name = "gpustack-operator",
    version,
    about = "Control plane and node agents for GPU fleets on Kubernetes",
    propagate_version = true,
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalFlags,
    #[command(subcommand)]
    pub command: Command,
}

/// klog's flags, accepted by every command, plus `--print-cmdline`.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Global flags")]
pub struct GlobalFlags {
    /// Log verbosity: 0 info, 1-2 debug, 3 and above every decision (trace).
    #[arg(short = 'v', long = "v", global = true, default_value_t = 0, value_name = "N", value_parser = parse_verbosity)]
    pub verbosity: u8,
    /// Per-module verbosity, `target=N,...`; a target is a Rust module path prefix (`gpustack_apiserver::store=3`).
    #[arg(long, global = true, default_value = "", value_parser = parse_vmodule, hide_default_value = true)]
    pub vmodule: VModule,
    /// Log to standard error. Logs always go there; `false` is accepted for compatibility.
    #[arg(long, global = true, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub logtostderr: bool,
    /// Add the source file and line to each log line.
    #[arg(long = "add_dir_header", global = true, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub add_dir_header: bool,
    /// Omit the time, level and target from each log line.
    #[arg(long = "skip_headers", global = true, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub skip_headers: bool,
    /// When a log line is emitted at `file:line`, also write a backtrace.
    #[arg(long = "log_backtrace_at", global = true, value_parser = parse_backtrace_at, value_name = "FILE:LINE")]
    pub log_backtrace_at: Option<BacktraceAt>,
    /// Print the effective command line, including flags taken from the environment, and exit.
    #[arg(long, global = true, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub print_cmdline: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Per-cluster control plane: capacity profiling, the Kueue chain, webhooks, the aggregated API.
    #[command(visible_alias = "w")]
    Worker(Box<WorkerArgs>),
    /// The hub: mirrors upstream clusters into SQLite and serves them to the worker.
    #[command(name = "worker-gateway", visible_alias = "wg")]
    WorkerGateway(Box<WorkerGatewayArgs>),
    /// Per-node accelerator agent and its one-shot commands.
    #[command(name = "device-manager", visible_alias = "dm", subcommand)]
    DeviceManager(DeviceManagerCommand),
    /// Per-node CSI plugin that caches Hugging Face model files.
    #[command(name = "model-manager", visible_alias = "mm")]
    ModelManager(ModelManagerArgs),
}

impl Command {
    /// The command's name as the user typed it canonically (`device-manager serve`).
    pub fn name(&self) -> &'static str {
        match self {
            Command::Worker(_) => "worker",
            Command::WorkerGateway(_) => "worker-gateway",
            Command::DeviceManager(DeviceManagerCommand::Serve(_)) => "device-manager serve",
            Command::DeviceManager(DeviceManagerCommand::Detect(_)) => "device-manager detect",
            Command::DeviceManager(DeviceManagerCommand::Monitor(_)) => "device-manager monitor",
            Command::DeviceManager(DeviceManagerCommand::Preflight(_)) => {
                "device-manager preflight"
            }
            Command::ModelManager(_) => "model-manager",
        }
    }
}

#[derive(Subcommand, Debug)]
pub enum DeviceManagerCommand {
    /// Run the node agent: detection loop, Devices ledger, monitor, kubelet device plugin.
    Serve(DeviceManagerServeArgs),
    /// Detect accelerators once and print them as `Devices.spec.groups` YAML. Reads only.
    Detect(DetectArgs),
    /// Take one utilization sample and print it as YAML. Reads only.
    Monitor(DetectArgs),
    /// Check that the allocation modes the node offers work here. Acts unless --dry-run.
    Preflight(PreflightArgs),
}

/// Which manufacturers to act for, and how to find their accelerators.
#[derive(Args, Debug, Clone)]
pub struct DetectArgs {
    /// Manufacturers to handle, comma separated or repeated.
    #[arg(long, value_delimiter = ',', value_parser = parse_manufacturer, default_values_t = Manufacturer::ALL)]
    pub manufacturer: Vec<Manufacturer>,
    /// Skip the PCI scan that gates loading each vendor's library.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_pci_check: bool,
    /// With exactly one --manufacturer: publish an empty first detection instead of retrying it.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_fast_failed: bool,
}

#[derive(Args, Debug, Clone)]
pub struct WorkerArgs {
    /// Manufacturers to handle, comma separated or repeated.
    #[arg(long, value_delimiter = ',', value_parser = parse_manufacturer, default_values_t = Manufacturer::ALL)]
    pub manufacturer: Vec<Manufacturer>,
    /// Applications not to install: `*` or names (kueue, node-feature-discovery, csi-driver-nfs,
    /// csi-driver-s3, device-manager, model-manager).
    #[arg(long, value_delimiter = ',', value_parser = parse_application)]
    pub disable_applications: Vec<String>,
    /// How often the worker re-applies the node agents it installs itself (image mode: the
    /// applications --disable-applications leaves on); drift is repaired within one period.
    #[arg(long, default_value_t = GoDuration::secs(60), value_name = "DURATION", value_parser = at_least_1s)]
    pub applications_resync_period: GoDuration,
    /// HTTPS port of the aggregated API and the webhooks.
    #[arg(long, default_value_t = 31443, value_parser = clap::value_parser!(u16).range(1..))]
    pub secure_port: u16,
    #[command(flatten)]
    pub serving: ServingFlags,
    /// Skip delegated authentication and authorization.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub disable_auths: bool,
    /// Answer admission reviews from callers that present no credentials. By default a review
    /// must come from the API server (its client certificate, signed by the cluster's
    /// request-header CA) or from a token allowed to POST the webhook's path; set this where the
    /// API server is not configured to authenticate to webhooks.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub allow_anonymous_reviews: bool,
    /// Who may scrape /metrics: `delegated` asks the cluster (TokenReview, then
    /// SubjectAccessReview of `get` on the non-resource URL /metrics, as kube-rbac-proxy does);
    /// `none` serves it to anyone who reaches the port.
    #[arg(long, default_value = "delegated", value_parser = ["delegated", "none"])]
    pub metrics_auth: String,
    /// How long token review answers are cached (at least 10s).
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_10s)]
    pub authentication_token_webhook_cache_ttl: GoDuration,
    /// Timeout of a token review request (at least 10s).
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_10s)]
    pub authentication_token_request_timeout: GoDuration,
    /// How long an allowed authorization answer is cached (at least 10s).
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_10s)]
    pub authorization_webhook_cache_authorized_ttl: GoDuration,
    /// How long a denied authorization answer is cached (at least 10s).
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_10s)]
    pub authorization_webhook_cache_unauthorized_ttl: GoDuration,
    /// Audit log file; `-` for standard output.
    #[arg(long, default_value = "")]
    pub audit_log_path: String,
    /// Audit policy file.
    #[arg(long, default_value = "")]
    pub audit_policy_file: String,
    /// Audit webhook kubeconfig file.
    #[arg(long, default_value = "")]
    pub audit_webhook_config_file: String,
    /// Allowed CORS origins as anchored regular expressions, comma separated; empty allows all.
    #[arg(long, value_delimiter = ',', value_parser = parse_origin_regex)]
    pub cors_allowed_origins: Vec<String>,
    /// Port of the embedded cluster's API on 127.0.0.1, when no cluster is given (no
    /// --kubeconfig, no KUBECONFIG, not in a cluster) and the worker runs one itself.
    #[arg(long, default_value_t = 6443, value_parser = clap::value_parser!(u16).range(1..))]
    pub embedded_api_port: u16,
    /// The only service account allowed to write NodeModelStore status.
    #[arg(long, default_value = "gpustack-operator-model-manager")]
    pub model_manager_service_account: String,
    #[command(flatten)]
    pub leader: LeaderElectionFlags,
    #[command(flatten)]
    pub kube: KubeConnFlags,
    #[command(flatten)]
    pub informer: InformerFlags,
    /// Use lower thresholds when filtering events.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub aggressive_event_filtering: bool,
    /// The hub gateway's unix socket (its --bind-unix-path): its mirror is served as
    /// fleet.gpustack.ai/v1 once it answers. Empty serves no fleet.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/var/lib/gpustack/gpustack-operator-worker-gateway.sock"
    )]
    pub gateway_socket: String,
    /// Reach the gateway over HTTPS instead of its socket, with this kubeconfig (its address,
    /// CA and token: the gateway's <data-dir>/_admin.kubeconfig).
    #[arg(long, value_name = "FILE")]
    pub gateway_kubeconfig: Option<PathBuf>,
}

impl WorkerArgs {
    /// Where the fleet API reads the gateway, if anywhere: `socket` is `--gateway-socket` as
    /// resolved against the data directory.
    pub fn gateway(&self, socket: &str) -> Option<gpustack_worker::fleet::gateway::Address> {
        use gpustack_worker::fleet::gateway::Address;
        match (&self.gateway_kubeconfig, socket) {
            (Some(k), _) => Some(Address::Kubeconfig(k.clone())),
            (None, "") => None,
            (None, s) => Some(Address::Socket(PathBuf::from(s))),
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct WorkerGatewayArgs {
    /// Serve on this unix socket (parent directory must exist); empty serves HTTPS on
    /// --bind-address and --secure-port instead.
    #[arg(
        long,
        default_value = "/var/lib/gpustack/gpustack-operator-worker-gateway.sock"
    )]
    pub bind_unix_path: String,
    /// HTTPS port when not serving on a unix socket; 0 means 9443.
    #[arg(long, default_value_t = 0)]
    pub secure_port: u16,
    #[command(flatten)]
    pub serving: ServingFlags,
    /// How upstream clusters are reached: `gpustack-api` (the GPUStack server's proxy) or
    /// `loopback` (a local kubeconfig).
    #[arg(long, default_value = "gpustack-api", value_parser = ["gpustack-api", "loopback"])]
    pub worker_conn_mode: String,
    /// Port of the GPUStack server on localhost, in gpustack-api mode.
    #[arg(long, default_value_t = 30080, value_parser = clap::value_parser!(u16).range(1..))]
    pub worker_conn_gpustack_api_port: u16,
    /// Scheme of the GPUStack server; by default `https` when the port is 443, else `http`.
    #[arg(long, value_parser = ["http", "https"])]
    pub worker_conn_gpustack_api_scheme: Option<String>,
    /// How long one readiness check of an upstream may take; at most --kube-conn-timeout.
    #[arg(long, default_value_t = GoDuration::secs(30), value_name = "DURATION", value_parser = at_least_1s)]
    pub worker_readiness_check_timeout: GoDuration,
    #[command(flatten)]
    pub kube: KubeConnFlags,
    #[command(flatten)]
    pub informer: InformerFlags,
    /// Host an embedded cluster of this name (a DNS label), repeatable; its admin kubeconfig is
    /// written to <data-dir>/<NAME>.kubeconfig.
    #[arg(long, value_name = "NAME", value_parser = parse_cluster_name)]
    pub embedded_cluster: Vec<String>,
    /// Mirror the upstream clusters listed in this YAML file: a list of {name, kubeconfig,
    /// context, token} (names are DNS labels; relative kubeconfig paths are read from the file's
    /// directory; an entry without a kubeconfig is reached through the GPUStack server's proxy
    /// with its token, in gpustack-api mode). More are subscribed at run time with
    /// POST /apis/workers.
    #[arg(long, value_name = "FILE", value_parser = parse_upstreams)]
    pub upstreams: Option<Upstreams>,
    /// Directory of the SQLite store, the generated certificates and the kubeconfigs.
    #[arg(long, default_value = "/var/lib/gpustack")]
    pub data_dir: PathBuf,
    /// Where the hub keeps its mirror (the mirrored objects, their event log, the fleet's
    /// members) and its bookkeeping (subscriptions, watch progress, last sync times): `sqlite`
    /// (in --data-dir's database) or a PostgreSQL URL,
    /// `postgres://USER:PASSWORD@HOST:PORT/DB?sslmode=MODE` (`postgresql://` too; libpq's
    /// parameters and sslmode names; `host=/dir` for a unix socket), which several replicas may
    /// share. Embedded clusters stay in --data-dir. Pass a password through the environment
    /// variable rather than the command line.
    #[arg(long, default_value = "sqlite", value_name = "sqlite|URL", value_parser = super::store_flag::StoreParser)]
    pub store: gpustack_gateway::hub_store::StoreSetting,
    /// With a PostgreSQL --store, several replicas may share the database: each upstream is
    /// mirrored by one replica at a time, under a lease kept in the database (renewed every
    /// third of this, by the database's clock); a replica that dies loses its upstreams after
    /// this and the others take them over. Ignored on SQLite.
    #[arg(long, default_value_t = GoDuration(gpustack_gateway::server::DEFAULT_MIRROR_LEASE), value_name = "DURATION", value_parser = at_least_1s)]
    pub mirror_lease_duration: GoDuration,
    /// Bearer token accepted over HTTPS for everything, including subscribing through
    /// /apis/workers (one line; created with a random token, mode 0600, if missing). Defaults to
    /// <data-dir>/admin.token when --bind-unix-path is empty.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// How many watch events the store keeps for resuming watches; older resourceVersions
    /// answer 410 Gone and the client relists.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub event_log_retention: u64,
    /// How many bytes the event log may hold (object bodies it keeps, plus 64 per event); the
    /// oldest events beyond either bound are dropped.
    #[arg(long, default_value_t = gpustack_apiserver::server::DEFAULT_EVENT_LOG_BYTES, value_parser = clap::value_parser!(u64).range(1..))]
    pub event_log_max_bytes: u64,
    /// How long embedded clusters keep Event objects (as kube-apiserver's --event-ttl).
    #[arg(long, default_value_t = GoDuration::secs(3600), value_name = "DURATION", value_parser = at_least_1s)]
    pub event_ttl: GoDuration,
    /// How long the generated serving certificate is valid (without --cert-dir); it is
    /// re-signed by the same CA at two thirds of that while serving, so clients trusting the
    /// CA never notice. A --cert-dir pair is instead reloaded when its files change.
    #[arg(long, default_value_t = GoDuration(gpustack_apiserver::server::DEFAULT_SERVING_CERT_LIFETIME), value_name = "DURATION", value_parser = at_least_5s)]
    pub serving_cert_lifetime: GoDuration,
    /// How often the event log is trimmed to --event-log-retention (and Events expired).
    #[arg(long, default_value_t = GoDuration::secs(60), value_name = "DURATION", value_parser = at_least_1s)]
    pub event_log_compaction_interval: GoDuration,
    /// A directory whose kubeconfigs run-time subscriptions (POST /apis/workers) may name,
    /// besides --data-dir; repeatable. Such kubeconfigs must carry credentials inline and run
    /// no exec plugin.
    #[arg(long, value_name = "DIR")]
    pub subscription_kubeconfig_dir: Vec<PathBuf>,
    /// Watches one token (or the unix socket's owner) may hold open at once; past it, a new
    /// watch answers 429.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_watches_per_token: u64,
    /// How often embedded clusters check the backends of their APIServices (and set each one's
    /// Available condition); a change to an APIService or Service is checked at once too.
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_100ms)]
    pub apiservice_check_interval: GoDuration,
    /// Open connections per listener (HTTPS, unix socket). When it is full, the idle
    /// connection (no request in flight) of the address holding the most is closed for a
    /// newcomer; only when every connection is busy do new clients wait in the kernel's backlog.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Open HTTPS connections per client address (an IPv6 /64); past it, a new connection from
    /// that address is closed at once, so one address cannot take the listener from others.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_address: u64,
    /// HTTPS connections of one client address in their setup (TLS handshake and first
    /// request) at once; the others wait their turn within --connection-setup-timeout.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_handshakes_per_address: u64,
    /// How long a client has for the TLS handshake and for its first request before the
    /// connection is closed.
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_1s)]
    pub connection_setup_timeout: GoDuration,
    /// How long a connection may stay without a request in flight (waiting for its next
    /// request, or sending its headers) before it is closed gracefully.
    #[arg(long, default_value_t = GoDuration::secs(90), value_name = "DURATION", value_parser = at_least_1s)]
    pub connection_idle_timeout: GoDuration,
}

impl WorkerGatewayArgs {
    /// How upstreams without a kubeconfig of their own are reached.
    pub fn conn_mode(&self) -> gpustack_gateway::mirror::ConnMode {
        gpustack_gateway::mirror::ConnMode::from_flags(
            &self.worker_conn_mode,
            self.gpustack_api_scheme(),
            self.worker_conn_gpustack_api_port,
        )
    }

    /// The scheme used to reach the GPUStack server.
    pub fn gpustack_api_scheme(&self) -> &str {
        match &self.worker_conn_gpustack_api_scheme {
            Some(s) => s,
            None if self.worker_conn_gpustack_api_port == 443 => "https",
            None => "http",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct DeviceManagerServeArgs {
    #[command(flatten)]
    pub detect: DetectArgs,
    /// Do not offer logical slicing (`<resource>.sliced`).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_sliced: bool,
    /// Do not offer hardware partitions (`<resource>.partitioned`).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_partitioned: bool,
    /// Do not offer shared access (`<resource>.shared`).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_shared: bool,
    /// How often utilization is sampled; only the latest sample is kept.
    #[arg(long, default_value_t = GoDuration::secs(15), value_name = "DURATION", value_parser = at_least_1s)]
    pub monitor_period: GoDuration,
    /// The kubelet's device plugin registration socket.
    #[arg(long, default_value = "/var/lib/kubelet/device-plugins/kubelet.sock")]
    pub kube_socket: PathBuf,
    /// HTTPS port of /metrics, /monitor/snapshot and the health endpoints.
    #[arg(long, default_value_t = 32443, value_parser = clap::value_parser!(u16).range(1..))]
    pub secure_port: u16,
    /// Who may scrape /metrics: `delegated` asks the cluster (TokenReview, then
    /// SubjectAccessReview of `get` on the non-resource URL /metrics, as kube-rbac-proxy does);
    /// `none` serves it to anyone who reaches the port.
    #[arg(long, default_value = "delegated", value_parser = ["delegated", "none"])]
    pub metrics_auth: String,
    #[command(flatten)]
    pub serving: ServingFlags,
    #[command(flatten)]
    pub kube: KubeConnFlags,
    #[command(flatten)]
    pub informer: InformerFlags,
}

#[derive(Args, Debug, Clone)]
pub struct PreflightArgs {
    /// Manufacturers to check, comma separated or repeated.
    #[arg(long, value_delimiter = ',', value_parser = parse_manufacturer, default_values_t = Manufacturer::ALL)]
    pub manufacturer: Vec<Manufacturer>,
    /// Skip the PCI scan that gates loading each vendor's library.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub no_pci_check: bool,
    /// Change nothing: print the commands instead of running them.
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub dry_run: bool,
    /// Image of the probe containers; by default chosen per manufacturer.
    #[arg(long, default_value = "")]
    pub probe_image: String,
    /// Where the host's root filesystem is mounted.
    #[arg(long, default_value = "/host")]
    pub host_root: PathBuf,
    /// Container CLI to drive: docker, nerdctl or ctr; by default resolved from the kubelet.
    #[arg(long, value_parser = ["docker", "nerdctl", "ctr"])]
    pub runtime: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct ModelManagerArgs {
    /// The node this plugin serves (usually the Pod's spec.nodeName).
    #[arg(long, value_parser = parse_node_name)]
    pub node_name: String,
    /// The kubelet's root directory.
    #[arg(long, default_value = "/var/lib/kubelet")]
    pub kubelet_dir: PathBuf,
    /// Root of the on-disk model cache.
    #[arg(long, default_value = "/var/lib/gpustack/models")]
    pub cache_root: PathBuf,
    /// CSI socket; by default `<kubelet-dir>/plugins/model.csi.gpustack.ai/csi.sock`.
    #[arg(long)]
    pub csi_socket: Option<PathBuf>,
    /// HTTPS port of /metrics, the health endpoints and peer sync.
    #[arg(long, default_value_t = 32444, value_parser = clap::value_parser!(u16).range(1..))]
    pub secure_port: u16,
    /// Who may scrape /metrics: `delegated` asks the cluster (TokenReview, then
    /// SubjectAccessReview of `get` on the non-resource URL /metrics, as kube-rbac-proxy does);
    /// `none` serves it to anyone who reaches the port.
    #[arg(long, default_value = "delegated", value_parser = ["delegated", "none"])]
    pub metrics_auth: String,
    #[command(flatten)]
    pub serving: ServingFlags,
    #[command(flatten)]
    pub kube: KubeConnFlags,
}

impl ModelManagerArgs {
    pub fn csi_socket(&self) -> PathBuf {
        self.csi_socket.clone().unwrap_or_else(|| {
            self.kubelet_dir
                .join("plugins")
                .join(gpustack_api::labels::MODEL_CSI_DRIVER)
                .join("csi.sock")
        })
    }
}

/// Where a service listens (its port flag is per command, since defaults differ).
#[derive(Args, Debug, Clone)]
pub struct ServingFlags {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind_address: IpAddr,
    /// Directory holding tls.crt and tls.key; empty uses a generated certificate.
    #[arg(long, default_value = "")]
    pub cert_dir: String,
}

/// How the Kubernetes client is built.
#[derive(Args, Debug, Clone)]
pub struct KubeConnFlags {
    /// Kubeconfig file; empty uses $KUBECONFIG, the in-cluster config or ~/.kube/config.
    #[arg(long, default_value = "")]
    pub kubeconfig: String,
    /// Sustained requests per second to the API server (at least 10).
    #[arg(long, default_value_t = 200.0, value_parser = parse_qps)]
    pub kube_conn_qps: f64,
    /// Burst of requests to the API server (at least 10, and above --kube-conn-qps).
    #[arg(long, default_value_t = 400, value_parser = parse_burst)]
    pub kube_conn_burst: u32,
    /// Timeout of one API request (at least 10s).
    #[arg(long, default_value_t = GoDuration::secs(300), value_name = "DURATION", value_parser = at_least_10s)]
    pub kube_conn_timeout: GoDuration,
    /// Content type of API requests; empty means JSON.
    #[arg(long, default_value = "", value_parser = ["", "application/json", "application/vnd.kubernetes.protobuf"], hide_possible_values = true)]
    pub kube_content_type: String,
}

#[derive(Args, Debug, Clone)]
pub struct InformerFlags {
    /// How often watch caches are fully resynchronised (at least 5m).
    #[arg(long, default_value_t = GoDuration::secs(3600), value_name = "DURATION", value_parser = at_least_5m)]
    pub informer_cache_resync_period: GoDuration,
    /// Worker pool size per CPU core (at least 100).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(100..))]
    pub gopool_worker_factor: u32,
}

#[derive(Args, Debug, Clone)]
pub struct LeaderElectionFlags {
    /// Elect one replica to run the controllers.
    #[arg(long, default_value_t = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool, value_name = "BOOL")]
    pub kube_leader_election: bool,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "worker.gpustack.ai")]
    pub kube_leader_election_id: String,
    /// How long a leader's Lease lasts (at least 5s, above the renew timeout).
    #[arg(long, default_value_t = GoDuration::secs(15), value_name = "DURATION", value_parser = at_least_5s)]
    pub kube_leader_lease: GoDuration,
    /// How long the leader keeps trying to renew before giving up (at least 5s).
    #[arg(long, default_value_t = GoDuration::secs(10), value_name = "DURATION", value_parser = at_least_5s)]
    pub kube_leader_renew_timeout: GoDuration,
}

/// Per-target verbosity from `--vmodule`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VModule(pub Vec<(String, u8)>);

/// `--log_backtrace_at`'s `file:line`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BacktraceAt {
    pub file: String,
    pub line: u32,
}

fn parse_verbosity(s: &str) -> Result<u8, String> {
    s.parse::<u8>()
        .ok()
        .filter(|v| *v <= 10)
        .ok_or_else(|| "must be a whole number from 0 to 10".to_owned())
}

fn parse_go_bool(s: &str) -> Result<bool, String> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err("must be true or false".into()),
    }
}

fn parse_manufacturer(s: &str) -> Result<Manufacturer, String> {
    s.trim().parse().map_err(|_| {
        format!(
            "allowed are {}",
            gpustack_api::manufacturer::allowed_names()
        )
    })
}

const APPLICATIONS: [&str; 7] = [
    "*",
    "kueue",
    "node-feature-discovery",
    "csi-driver-nfs",
    "csi-driver-s3",
    "device-manager",
    "model-manager",
];

fn parse_application(s: &str) -> Result<String, String> {
    let s = s.trim();
    if APPLICATIONS.contains(&s) {
        Ok(s.to_owned())
    } else {
        Err(format!("allowed are {}", APPLICATIONS.join(", ")))
    }
}

fn parse_origin_regex(s: &str) -> Result<String, String> {
    regex::Regex::new(&format!("^(?:{s})$"))
        .map(|_| s.to_owned())
        .map_err(|e| {
            let reason = e.to_string();
            let last = reason.lines().last().unwrap_or("invalid").trim().to_owned();
            format!("must be a regular expression ({last})")
        })
}

fn parse_node_name(s: &str) -> Result<String, String> {
    let valid = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if valid {
        Ok(s.to_owned())
    } else {
        Err(
            "must be a node name: lowercase DNS labels separated by dots, at most 253 characters"
                .into(),
        )
    }
}

fn parse_qps(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 10.0 => Ok(v),
        _ => Err("must be a number of at least 10".into()),
    }
}

fn parse_burst(s: &str) -> Result<u32, String> {
    match s.parse::<u32>() {
        Ok(v) if v >= 10 => Ok(v),
        _ => Err("must be a whole number of at least 10".into()),
    }
}

fn duration_at_least(s: &str, min: GoDuration) -> Result<GoDuration, String> {
    let d: GoDuration = s.parse()?;
    if d < min {
        return Err(format!("must be at least {min}"));
    }
    Ok(d)
}

/// The parsed `--upstreams` file (validated when the command line is read).
#[derive(Clone, Debug)]
pub struct Upstreams {
    pub path: PathBuf,
    pub entries: Vec<gpustack_gateway::mirror::config::Entry>,
}

fn parse_upstreams(s: &str) -> Result<Upstreams, String> {
    let path = PathBuf::from(s);
    let entries = gpustack_gateway::mirror::config::load(&path).map_err(|e| e.to_string())?;
    Ok(Upstreams { path, entries })
}

/// A cluster name: a DNS label, as upstream names are.
fn parse_cluster_name(s: &str) -> Result<String, String> {
    if gpustack_gateway::mirror::config::is_dns_label(s) {
        Ok(s.to_owned())
    } else {
        Err("must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters".into())
    }
}

fn at_least_1s(s: &str) -> Result<GoDuration, String> {
    duration_at_least(s, GoDuration::secs(1))
}

fn at_least_100ms(s: &str) -> Result<GoDuration, String> {
    duration_at_least(s, GoDuration(std::time::Duration::from_millis(100)))
}

fn at_least_5s(s: &str) -> Result<GoDuration, String> {
    duration_at_least(s, GoDuration::secs(5))
}

fn at_least_10s(s: &str) -> Result<GoDuration, String> {
    duration_at_least(s, GoDuration::secs(10))
}

fn at_least_5m(s: &str) -> Result<GoDuration, String> {
    duration_at_least(s, GoDuration::secs(300))
}

fn parse_vmodule(s: &str) -> Result<VModule, String> {
    let allowed = "must be target=N pairs, comma separated (e.g. gpustack_apiserver::store=3)";
    let mut entries = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (target, level) = entry.split_once('=').ok_or(allowed)?;
        let valid_target = !target.is_empty()
            && target
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '*' | '-'));
        let level: u8 = level.parse().map_err(|_| allowed)?;
        if !valid_target {
            return Err(allowed.into());
        }
        entries.push((target.trim_end_matches('*').replace('-', "_"), level));
    }
    Ok(VModule(entries))
}

fn parse_backtrace_at(s: &str) -> Result<BacktraceAt, String> {
    let allowed = "must be file:line, e.g. store.rs:120";
    let (file, line) = s.rsplit_once(':').ok_or(allowed)?;
    let line: u32 = line.parse().map_err(|_| allowed)?;
    if file.is_empty() {
        return Err(allowed.into());
    }
    Ok(BacktraceAt {
        file: file.to_owned(),
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn vmodule_becomes_targets() {
        let v = parse_vmodule("gpustack_apiserver::store=3, device-manager*=1").unwrap();
        assert_eq!(
            v.0,
            [
                ("gpustack_apiserver::store".to_owned(), 3),
                ("device_manager".to_owned(), 1)
            ]
        );
        assert!(parse_vmodule("store").is_err());
        assert!(parse_vmodule("a b=1").is_err());
    }

    #[test]
    fn gateway_scheme_follows_port() {
        let parse = |args: &[&str]| match Cli::try_parse_from(
            ["gpustack-operator", "worker-gateway"].iter().chain(args),
        )
        .unwrap()
        .command
        {
            Command::WorkerGateway(a) => a.gpustack_api_scheme().to_owned(),
            other => panic!("parsed {other:?}"),
        };
        assert_eq!(parse(&[]), "http");
        assert_eq!(parse(&["--worker-conn-gpustack-api-port=443"]), "https");
        assert_eq!(
            parse(&[
                "--worker-conn-gpustack-api-port=443",
                "--worker-conn-gpustack-api-scheme=http"
            ]),
            "http"
        );
    }

    #[test]
    fn csi_socket_follows_kubelet_dir() {
        let cli = Cli::try_parse_from([
            "gpustack-operator",
            "mm",
            "--node-name=n1",
            "--kubelet-dir=/k",
        ])
        .unwrap();
        let Command::ModelManager(a) = cli.command else {
            panic!()
        };
        assert_eq!(
            a.csi_socket(),
            PathBuf::from("/k/plugins/model.csi.gpustack.ai/csi.sock")
        );
    }
}
