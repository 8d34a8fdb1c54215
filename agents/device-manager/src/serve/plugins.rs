//! Starting the device plugin servers, registering them, and re-registering when the kubelet
//! restarts (its `kubelet.sock` is recreated; a restarted kubelet also clears the directory, so
//! a plugin whose socket is gone is served again first).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use gpustack_api::{
    Manufacturer,
    devices::{AllocationMode, DevicesGroup},
};
use gpustack_proto::deviceplugin::v1beta1::device_plugin_server::DevicePluginServer;
use gpustack_serving::grpc_metrics::GrpcMetrics;
use prometheus::{IntGaugeVec, Opts, Registry};
use tokio::{
    net::UnixListener,
    sync::{oneshot, watch},
    task::JoinHandle,
};
use tonic::service::Routes;

use crate::plugin::{
    register,
    server::{Plugin, Shared},
};

/// Which modes a manufacturer's plugins offer.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModeFlags {
    /// No `shared` plugin.
    pub no_shared: bool,
    /// No `sliced` plugin.
    pub no_sliced: bool,
    /// No `partitioned` plugin.
    pub no_partitioned: bool,
}

/// The modes served for a manufacturer (`has_partition_kind` from its resolved table entry).
pub(crate) fn modes(flags: ModeFlags, has_partition_kind: bool) -> Vec<AllocationMode> {
    let mut out = vec![AllocationMode::Exclusive];
    if !flags.no_shared {
        out.push(AllocationMode::Shared);
    }
    if !flags.no_sliced {
        out.push(AllocationMode::Sliced);
    }
    if has_partition_kind && !flags.no_partitioned {
        out.push(AllocationMode::Partitioned);
    }
    out.push(AllocationMode::Visibility);
    out
}

/// Every socket name this agent could ever create, for the stale-socket sweep at start.
pub(crate) fn all_socket_names() -> Vec<String> {
    Manufacturer::ALL
        .iter()
        .flat_map(|m| {
            AllocationMode::ALL
                .iter()
                .filter(|x| **x != AllocationMode::None)
                .map(move |x| format!("{m}.{}.sock", x.as_str()))
        })
        .collect()
}

struct Running {
    plugin: Plugin,
    socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// The device plugin's series: which resources the kubelet has accepted, and the calls served.
#[derive(Clone)]
pub struct PluginMetrics {
    registered: IntGaugeVec,
    grpc: GrpcMetrics,
}

/// The DevicePlugin service's methods, the only values of the gRPC series' `method` label.
const METHODS: [&str; 5] = [
    "/v1beta1.DevicePlugin/GetDevicePluginOptions",
    "/v1beta1.DevicePlugin/ListAndWatch",
    "/v1beta1.DevicePlugin/GetPreferredAllocation",
    "/v1beta1.DevicePlugin/Allocate",
    "/v1beta1.DevicePlugin/PreStartContainer",
];

impl PluginMetrics {
    /// Registers the device plugin's series (registration state, gRPC calls) in `registry`.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let registered = IntGaugeVec::new(
            Opts::new(
                "gpustack_device_manager_plugin_registered",
                "1 while the kubelet holds the plugin of a resource registered, 0 while it does not (never registered, refused, or the kubelet restarted).",
            ),
            &["resource"],
        )?;
        registry.register(Box::new(registered.clone()))?;
        let grpc = GrpcMetrics::register(registry, "gpustack_device_manager", &METHODS)?;
        Ok(PluginMetrics { registered, grpc })
    }

    fn set_registered(&self, resource: &str, yes: bool) {
        self.registered
            .with_label_values(&[resource])
            .set(i64::from(yes));
    }
}

fn start(plugin: Plugin, socket: PathBuf, metrics: &PluginMetrics) -> std::io::Result<Running> {
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)?;
    let (tx, rx) = oneshot::channel::<()>();
    let service = DevicePluginServer::new(plugin.clone());
    let name = socket.display().to_string();
    let grpc = metrics.grpc.clone();
    let served = gpustack_serving::grpc::serve_unix(
        Routes::new(service),
        listener,
        grpc,
        Box::pin(async {
            let _ = rx.await;
        }),
    );
    let task = tokio::spawn(async move {
        if let Err(e) = served.await {
            tracing::error!(socket = %name, "device plugin server ended: {e}");
        }
    });
    Ok(Running {
        plugin,
        socket,
        stop: Some(tx),
        task,
    })
}

async fn halt(mut r: Running) {
    if let Some(tx) = r.stop.take() {
        let _ = tx.send(());
    }
    // Graceful shutdown waits for open streams, and a kubelet's ListAndWatch never ends on its
    // own: give it a moment, then cut it.
    if tokio::time::timeout(Duration::from_millis(200), &mut r.task)
        .await
        .is_err()
    {
        r.task.abort();
    }
    let _ = std::fs::remove_file(&r.socket);
}

/// One manufacturer's plugins.
#[derive(Clone, Debug)]
pub(crate) struct Planned {
    pub manufacturer: Manufacturer,
    /// The resource base (`nvidia.com/gpu`).
    pub base: String,
    /// The partition kind (`mig`), where the manufacturer has one.
    pub partition_kind: Option<String>,
    pub modes: Vec<AllocationMode>,
}

/// What the supervisor needs.
pub(crate) struct Supervisor {
    pub shared: Arc<Shared>,
    pub kube_socket: PathBuf,
    pub plan: Vec<Planned>,
    pub metrics: PluginMetrics,
}

impl Supervisor {
    fn dir(&self) -> &Path {
        self.kube_socket.parent().unwrap_or_else(|| Path::new("."))
    }

    /// Runs until `stop` turns true, then stops every server and removes its socket.
    pub async fn run(
        self,
        mut spec: watch::Receiver<Option<Vec<DevicesGroup>>>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut running: Vec<Running> = Vec::new();
        let mut started: BTreeSet<Manufacturer> = BTreeSet::new();
        let mut registered_with: Option<register::SocketIdentity> = None;
        let mut pending = false;
        let mut last_try: Option<(Instant, Option<register::SocketIdentity>)> = None;
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                _ = spec.changed() => {}
                _ = tick.tick() => {}
                _ = stop.wait_for(|s| *s) => break,
            }
            let groups = spec.borrow().clone().unwrap_or_default();
            for Planned {
                manufacturer: m,
                base,
                partition_kind,
                modes,
            } in &self.plan
            {
                if started.contains(m)
                    || !groups
                        .iter()
                        .any(|g| g.manufacturer == *m && !g.accelerators.is_empty())
                {
                    continue;
                }
                for mode in modes {
                    let plugin = Plugin {
                        shared: self.shared.clone(),
                        manufacturer: *m,
                        mode: *mode,
                        base: base.clone(),
                        partition_kind: partition_kind.clone(),
                    };
                    let socket = self.dir().join(plugin.socket_name());
                    self.metrics.set_registered(&plugin.resource_name(), false);
                    match start(plugin, socket.clone(), &self.metrics) {
                        Ok(r) => running.push(r),
                        Err(e) => {
                            tracing::error!(socket = %socket.display(), "serving the device plugin: {e}")
                        }
                    }
                }
                started.insert(*m);
                pending = true;
            }
            let kubelet = register::socket_identity(&self.kube_socket);
            if kubelet.is_none() {
                // No kubelet: nothing is registered.
                for r in &running {
                    self.metrics
                        .set_registered(&r.plugin.resource_name(), false);
                }
            }
            if kubelet.is_none() || running.is_empty() || (kubelet == registered_with && !pending) {
                continue;
            }
            // A failed attempt against the same kubelet is retried once a second; a new
            // kubelet socket is tried at once.
            if let Some((at, against)) = last_try
                && against == kubelet
                && at.elapsed() < Duration::from_secs(1)
            {
                continue;
            }
            if kubelet != registered_with {
                tracing::info!(
                    "kubelet socket (re)created: registering {} plugins",
                    running.len()
                );
                // A restarted kubelet clears its directory: serve again where our socket is gone.
                // Stopped together: each may wait out an open ListAndWatch stream.
                let (mut again, gone): (Vec<Running>, Vec<Running>) = std::mem::take(&mut running)
                    .into_iter()
                    .partition(|r| r.socket.exists());
                let restart: Vec<(Plugin, PathBuf)> = gone
                    .iter()
                    .map(|r| (r.plugin.clone(), r.socket.clone()))
                    .collect();
                futures::future::join_all(gone.into_iter().map(halt)).await;
                for r in &again {
                    self.metrics
                        .set_registered(&r.plugin.resource_name(), false);
                }
                for (plugin, socket) in restart {
                    self.metrics.set_registered(&plugin.resource_name(), false);
                    match start(plugin, socket.clone(), &self.metrics) {
                        Ok(r) => again.push(r),
                        Err(e) => {
                            tracing::error!(socket = %socket.display(), "serving the device plugin again: {e}")
                        }
                    }
                }
                running = again;
            }
            last_try = Some((Instant::now(), kubelet));
            let mut all = true;
            for r in &running {
                let endpoint = r.plugin.socket_name();
                let resource = r.plugin.resource_name();
                let done = register::register(&self.kube_socket, &endpoint, &resource).await;
                if let Err(e) = &done {
                    tracing::warn!(resource = %resource, "registering with the kubelet: {e}");
                    all = false;
                }
                self.metrics.set_registered(&resource, done.is_ok());
            }
            if all {
                registered_with = kubelet;
                pending = false;
            }
        }
        futures::future::join_all(running.into_iter().map(halt)).await;
    }
}
