//! A stand-in for the kubelet, which cannot run here. It speaks the kubelet's real gRPC wire
//! protocols over unix sockets in a kubelet-shaped directory:
//! - `Registration` (device plugin API v1beta1) on `<dir>/device-plugins/kubelet.sock`,
//!   recording every `Register` call;
//! - `PodResourcesLister` (pod-resources API v1) on `<dir>/pod-resources/kubelet.sock`,
//!   answering what the test says the kubelet assigned;
//! - as the client of each registered plugin: `ListAndWatch`, `GetPreferredAllocation`,
//!   `Allocate`, exactly as the kubelet's device manager calls them.
//!
//! A restart removes every socket in `device-plugins/` (as a starting kubelet does) and serves
//! `kubelet.sock` anew.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::Duration,
};

use gpustack_proto::{
    deviceplugin::v1beta1::{
        AllocateRequest, AllocateResponse, ContainerAllocateRequest,
        ContainerPreferredAllocationRequest, Device, DevicePluginOptions, Empty,
        PreferredAllocationRequest, RegisterRequest,
        device_plugin_client::DevicePluginClient,
        registration_server::{Registration, RegistrationServer},
    },
    podresources::v1::{
        AllocatableResourcesRequest, AllocatableResourcesResponse, ContainerDevices,
        ContainerResources, GetPodResourcesRequest, GetPodResourcesResponse,
        ListPodResourcesRequest, ListPodResourcesResponse, PodResources,
        pod_resources_lister_server::{PodResourcesLister, PodResourcesListerServer},
    },
};
use hyper_util::rt::TokioIo;
use tokio::{net::UnixListener, runtime::Runtime, sync::oneshot};
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status, transport::Endpoint};

#[derive(Clone, Default)]
struct Recorder {
    registrations: Arc<Mutex<Vec<RegisterRequest>>>,
    pods: Arc<Mutex<Vec<PodResources>>>,
}

#[tonic::async_trait]
impl Registration for Recorder {
    async fn register(&self, request: Request<RegisterRequest>) -> Result<Response<Empty>, Status> {
        self.registrations
            .lock()
            .unwrap()
            .push(request.into_inner());
        Ok(Response::new(Empty {}))
    }
}

#[tonic::async_trait]
impl PodResourcesLister for Recorder {
    async fn list(
        &self,
        _: Request<ListPodResourcesRequest>,
    ) -> Result<Response<ListPodResourcesResponse>, Status> {
        Ok(Response::new(ListPodResourcesResponse {
            pod_resources: self.pods.lock().unwrap().clone(),
        }))
    }

    async fn get_allocatable_resources(
        &self,
        _: Request<AllocatableResourcesRequest>,
    ) -> Result<Response<AllocatableResourcesResponse>, Status> {
        Ok(Response::new(AllocatableResourcesResponse::default()))
    }

    async fn get(
        &self,
        r: Request<GetPodResourcesRequest>,
    ) -> Result<Response<GetPodResourcesResponse>, Status> {
        let r = r.into_inner();
        let found = self
            .pods
            .lock()
            .unwrap()
            .iter()
            .find(|p| p.name == r.pod_name && p.namespace == r.pod_namespace)
            .cloned();
        found
            .map(|p| {
                Response::new(GetPodResourcesResponse {
                    pod_resources: Some(p),
                })
            })
            .ok_or_else(|| Status::not_found("no such pod"))
    }
}

/// The kubelet stand-in. Blocking API for `#[test]` functions; it owns its own runtime.
pub struct Kubelet {
    pub dir: PathBuf,
    runtime: Runtime,
    recorder: Recorder,
    stop_registration: Option<oneshot::Sender<()>>,
    stop_pod_resources: Option<oneshot::Sender<()>>,
}

fn serve_unix<S>(runtime: &Runtime, path: &Path, service: S) -> oneshot::Sender<()>
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let _ = std::fs::remove_file(path);
    let listener = runtime
        .block_on(async { UnixListener::bind(path) })
        .expect("binding a kubelet socket");
    let (tx, rx) = oneshot::channel::<()>();
    runtime.spawn(async move {
        let _ = tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(UnixListenerStream::new(listener), async {
                let _ = rx.await;
            })
            .await;
    });
    tx
}

impl Kubelet {
    /// Serves both kubelet sockets under `dir` (created if missing).
    pub fn start(dir: &Path) -> Self {
        std::fs::create_dir_all(dir.join("device-plugins")).unwrap();
        std::fs::create_dir_all(dir.join("pod-resources")).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let recorder = Recorder::default();
        let stop_registration = serve_unix(
            &runtime,
            &dir.join("device-plugins/kubelet.sock"),
            RegistrationServer::new(recorder.clone()),
        );
        let stop_pod_resources = serve_unix(
            &runtime,
            &dir.join("pod-resources/kubelet.sock"),
            PodResourcesListerServer::new(recorder.clone()),
        );
        Kubelet {
            dir: dir.to_owned(),
            runtime,
            recorder,
            stop_registration: Some(stop_registration),
            stop_pod_resources: Some(stop_pod_resources),
        }
    }

    /// The registration socket (`--kube-socket`).
    pub fn kube_socket(&self) -> PathBuf {
        self.dir.join("device-plugins/kubelet.sock")
    }

    pub fn plugin_socket(&self, name: &str) -> PathBuf {
        self.dir.join("device-plugins").join(name)
    }

    /// Every `Register` call received since start or the last restart.
    pub fn registrations(&self) -> Vec<RegisterRequest> {
        self.recorder.registrations.lock().unwrap().clone()
    }

    /// The resource names registered, sorted.
    pub fn registered_resources(&self) -> Vec<String> {
        let mut r: Vec<String> = self
            .registrations()
            .into_iter()
            .map(|r| r.resource_name)
            .collect();
        r.sort();
        r.dedup();
        r
    }

    /// Says the kubelet assigned `device_ids` of `resource` to `namespace/pod`'s `container`.
    pub fn assign(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
        resource: &str,
        device_ids: &[String],
    ) {
        self.recorder.pods.lock().unwrap().push(PodResources {
            name: pod.to_owned(),
            namespace: namespace.to_owned(),
            containers: vec![ContainerResources {
                name: container.to_owned(),
                devices: vec![ContainerDevices {
                    resource_name: resource.to_owned(),
                    device_ids: device_ids.to_vec(),
                    topology: None,
                }],
                ..ContainerResources::default()
            }],
        });
    }

    /// Forgets a Pod's assignments, as the kubelet does once the Pod is gone.
    pub fn unassign(&self, namespace: &str, pod: &str) {
        self.recorder
            .pods
            .lock()
            .unwrap()
            .retain(|p| !(p.namespace == namespace && p.name == pod));
    }

    /// Restarts the registration side: sockets in `device-plugins/` removed, `kubelet.sock`
    /// served anew, the registration record cleared.
    pub fn restart(&mut self) {
        if let Some(tx) = self.stop_registration.take() {
            let _ = tx.send(());
        }
        for entry in std::fs::read_dir(self.dir.join("device-plugins"))
            .unwrap()
            .flatten()
        {
            let _ = std::fs::remove_file(entry.path());
        }
        self.recorder.registrations.lock().unwrap().clear();
        self.stop_registration = Some(serve_unix(
            &self.runtime,
            &self.kube_socket(),
            RegistrationServer::new(self.recorder.clone()),
        ));
    }

    fn client(&self, socket: &str) -> DevicePluginClient<tonic::transport::Channel> {
        let path = self.plugin_socket(socket);
        let channel = self
            .runtime
            .block_on(
                Endpoint::from_static("http://localhost").connect_with_connector(
                    tower::service_fn(move |_| {
                        let path = path.clone();
                        async move {
                            tokio::net::UnixStream::connect(path)
                                .await
                                .map(TokioIo::new)
                        }
                    }),
                ),
            )
            .expect("connecting to a plugin socket");
        DevicePluginClient::new(channel)
    }

    /// `GetDevicePluginOptions` sent with a W3C `traceparent`, as a traced caller sends it.
    pub fn options_traced(
        &self,
        socket: &str,
        traceparent: &str,
    ) -> Result<DevicePluginOptions, Status> {
        let mut client = self.client(socket);
        let mut request = Request::new(Empty {});
        request.metadata_mut().insert(
            "traceparent",
            traceparent.parse().expect("an ASCII traceparent"),
        );
        self.runtime
            .block_on(client.get_device_plugin_options(request))
            .map(Response::into_inner)
    }

    /// `Allocate` for one container, as the kubelet calls it.
    pub fn allocate(
        &self,
        socket: &str,
        device_ids: &[String],
    ) -> Result<AllocateResponse, Status> {
        let mut client = self.client(socket);
        self.runtime
            .block_on(client.allocate(AllocateRequest {
                container_requests: vec![ContainerAllocateRequest {
                    devices_ids: device_ids.to_vec(),
                }],
            }))
            .map(Response::into_inner)
    }

    /// `GetPreferredAllocation` for one container.
    pub fn preferred(&self, socket: &str, available: &[String], size: i32) -> Vec<String> {
        let mut client = self.client(socket);
        let reply = self
            .runtime
            .block_on(client.get_preferred_allocation(PreferredAllocationRequest {
                container_requests: vec![ContainerPreferredAllocationRequest {
                    available_device_i_ds: available.to_vec(),
                    must_include_device_i_ds: vec![],
                    allocation_size: size,
                }],
            }))
            .expect("GetPreferredAllocation");
        reply.into_inner().container_responses.remove(0).device_i_ds
    }

    /// Opens `ListAndWatch`; every list the plugin sends arrives on the returned channel.
    pub fn list_and_watch(&self, socket: &str) -> std::sync::mpsc::Receiver<Vec<Device>> {
        let mut client = self.client(socket);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut stream = self
            .runtime
            .block_on(client.list_and_watch(Empty {}))
            .expect("ListAndWatch")
            .into_inner();
        self.runtime.spawn(async move {
            while let Ok(Some(reply)) = stream.message().await {
                if tx.send(reply.devices).is_err() {
                    break;
                }
            }
        });
        rx
    }
}

/// Waits for a list on `rx` that satisfies `check`, within `deadline`.
pub fn next_list_where(
    rx: &std::sync::mpsc::Receiver<Vec<Device>>,
    deadline: Duration,
    what: &str,
    check: impl Fn(&[Device]) -> bool,
) -> Vec<Device> {
    let until = std::time::Instant::now() + deadline;
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(list) if check(&list) => return list,
            Ok(_) => {}
            Err(_) => {
                panic!("timed out after {deadline:?} waiting for a ListAndWatch list where {what}")
            }
        }
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        for tx in [
            self.stop_registration.take(),
            self.stop_pod_resources.take(),
        ]
        .into_iter()
        .flatten()
        {
            let _ = tx.send(());
        }
    }
}
