//! Which container CLI preflight drives, resolved the way the node itself starts containers: the
//! kubelet's CRI endpoint wherever the host names one, else whichever CLI the host has.
//!
//! Sources of the endpoint, in order; the first that names one answers:
//! 1. the running kubelet's command line (host `/proc/*/cmdline`): the explicit flag, else its
//!    `--config-dir` drop-ins, else its `--config` file;
//! 2. `/var/lib/kubelet/kubeadm-flags.env`;
//! 3. `/var/lib/kubelet/config.yaml`;
//! 4. the rancher distributions' drop-ins, `/var/lib/rancher/*/agent/etc/kubelet.conf.d/*.conf`.
//!    Two directories there that disagree stop the run (steps are emitted instead), unless one of
//!    them is the running kubelet's own `--config-dir`.
//!
//! `ctr` is never driven (`ctr run` has no `--device`; its alternative grants every device).

use std::fmt;

use crate::system_root::SystemRoot;

/// The namespace containerd CLIs run probes in, apart from Kubernetes' own.
pub(crate) const CONTAINERD_NAMESPACE: &str = "gpustack-preflight";

/// containerd sockets tried, in order, when nothing names one.
const CONTAINERD_SOCKETS: [&str; 3] = [
    "/run/containerd/containerd.sock",
    "/run/k3s/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock",
];

/// A container CLI on the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cli {
    /// `docker`.
    Docker,
    /// `nerdctl`, against a containerd socket.
    Nerdctl,
    /// `ctr`: recognized, but probes are printed for it, never run.
    Ctr,
}

impl Cli {
    /// The executable's name, as `--runtime` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Cli::Docker => "docker",
            Cli::Nerdctl => "nerdctl",
            Cli::Ctr => "ctr",
        }
    }

    /// The `--runtime` flag's values (the CLI parses them; anything else is a usage error there).
    pub fn from_flag(value: &str) -> Option<Self> {
        match value {
            "docker" => Some(Cli::Docker),
            "nerdctl" => Some(Cli::Nerdctl),
            "ctr" => Some(Cli::Ctr),
            _ => None,
        }
    }
}

/// The CLI probes are written for: docker, or nerdctl against a containerd socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Engine {
    pub cli: Cli,
    /// containerd's socket (nerdctl only).
    pub address: Option<String>,
}

impl Engine {
    pub fn docker() -> Self {
        Self {
            cli: Cli::Docker,
            address: None,
        }
    }

    pub fn nerdctl(address: String) -> Self {
        Self {
            cli: Cli::Nerdctl,
            address: Some(address),
        }
    }

    /// The CLI and its connection flags, before the subcommand.
    pub fn base_argv(&self) -> Vec<String> {
        let mut argv = vec![self.cli.name().to_owned()];
        if let Some(address) = &self.address {
            argv.extend([
                "--address".to_owned(),
                address.clone(),
                "--namespace".to_owned(),
                CONTAINERD_NAMESPACE.to_owned(),
            ]);
        }
        argv
    }
}

/// The outcome of resolution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Resolution {
    pub engine: Engine,
    /// `None`: probes run with `engine`. `Some(why)`: they are printed for it, never run.
    pub emit_only: Option<String>,
    /// How the engine was chosen, for the operator.
    pub source: String,
}

/// What the kubelet configuration on the host says about the CRI endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Named {
        endpoint: String,
        source: String,
    },
    /// Two places of one source disagree; `(place, endpoint)` each.
    Conflict(Vec<(String, String)>),
    None,
}

/// The running kubelet's command line, if the host's `/proc` shows one.
pub(crate) fn kubelet_cmdline(host: &SystemRoot) -> Option<Vec<String>> {
    let pids = host.list_dir("/proc").ok()?;
    pids.iter()
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .find_map(|pid| {
            let raw = std::fs::read(host.path(format!("/proc/{pid}/cmdline"))).ok()?;
            let argv: Vec<String> = raw
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let program = argv.first()?.rsplit('/').next()?;
            (program == "kubelet").then_some(argv)
        })
}

/// The value of `--name=value` or `--name value` in `argv`; the last occurrence wins.
pub(crate) fn flag_value(argv: &[String], name: &str) -> Option<String> {
    let long = format!("--{name}");
    let mut found = None;
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if let Some(v) = a.strip_prefix(&format!("{long}=")) {
            found = Some(unquote(v));
        } else if *a == long
            && let Some(v) = argv.get(i + 1)
        {
            found = Some(unquote(v));
            i += 1;
        }
        i += 1;
    }
    found
}

/// The value of a top-level `key: value` line in a kubelet configuration file.
pub(crate) fn config_value(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|line| line.strip_prefix(key)?.trim_start().strip_prefix(':'))
        .map(|v| unquote(v.split(" #").next().unwrap_or(v).trim()))
        .rfind(|v| !v.is_empty())
}

fn unquote(v: &str) -> String {
    v.trim().trim_matches(['"', '\'']).to_owned()
}

/// Splits a shell-style flag line (`KUBELET_KUBEADM_ARGS="--a=b --c d"`) into words.
fn env_file_words(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .flat_map(|(_, v)| {
            unquote(v)
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The drop-ins of `dir` (host path), in the order the kubelet applies them; the last that
/// names `key` wins.
fn drop_in_value(host: &SystemRoot, dir: &str, key: &str) -> Option<String> {
    host.list_dir(dir)
        .ok()?
        .iter()
        .filter(|n| n.ends_with(".conf"))
        .filter_map(|n| host.read_attr(format!("{dir}/{n}")))
        .filter_map(|text| config_value(&text, key))
        .next_back()
}

/// Reads the kubelet's configuration on the host for `flag` (command-line name) / `key`
/// (configuration-file name), through the sources in order.
pub(crate) fn kubelet_setting(host: &SystemRoot, flag: &str, key: &str) -> Endpoint {
    let cmdline = kubelet_cmdline(host);
    let own_config_dir = cmdline
        .as_deref()
        .and_then(|argv| flag_value(argv, "config-dir"));
    if let Some(argv) = &cmdline {
        let named = flag_value(argv, flag)
            .map(|v| (v, format!("the running kubelet's --{flag}")))
            .or_else(|| {
                let dir = own_config_dir.as_deref()?;
                drop_in_value(host, dir, key)
                    .map(|v| (v, format!("the kubelet's drop-ins in {dir}")))
            })
            .or_else(|| {
                let file = flag_value(argv, "config")?;
                config_value(&host.read_attr(&file)?, key).map(|v| (v, file))
            });
        if let Some((endpoint, source)) = named {
            return Endpoint::Named { endpoint, source };
        }
    }
    const KUBEADM_FLAGS: &str = "/var/lib/kubelet/kubeadm-flags.env";
    if let Some(v) = host
        .read_attr(KUBEADM_FLAGS)
        .and_then(|t| flag_value(&env_file_words(&t), flag))
    {
        return Endpoint::Named {
            endpoint: v,
            source: KUBEADM_FLAGS.into(),
        };
    }
    const CONFIG: &str = "/var/lib/kubelet/config.yaml";
    if let Some(v) = host.read_attr(CONFIG).and_then(|t| config_value(&t, key)) {
        return Endpoint::Named {
            endpoint: v,
            source: CONFIG.into(),
        };
    }
    let mut rancher: Vec<(String, String)> = host
        .list_dir("/var/lib/rancher")
        .unwrap_or_default()
        .into_iter()
        .map(|distro| format!("/var/lib/rancher/{distro}/agent/etc/kubelet.conf.d"))
        .filter_map(|dir| drop_in_value(host, &dir, key).map(|v| (dir, v)))
        .collect();
    rancher.sort();
    match rancher.as_slice() {
        [] => Endpoint::None,
        [(dir, v), rest @ ..] if rest.iter().all(|(_, w)| w == v) => Endpoint::Named {
            endpoint: v.clone(),
            source: dir.clone(),
        },
        _ => match rancher
            .iter()
            .find(|(dir, _)| own_config_dir.as_deref() == Some(dir.as_str()))
        {
            Some((dir, v)) => Endpoint::Named {
                endpoint: v.clone(),
                source: dir.clone(),
            },
            None => Endpoint::Conflict(rancher),
        },
    }
}

/// The socket path of a `unix://` endpoint (or a bare path).
fn socket_path(endpoint: &str) -> String {
    endpoint
        .strip_prefix("unix://")
        .unwrap_or(endpoint)
        .to_owned()
}

/// The first containerd socket that exists on the host, else the first candidate.
fn default_containerd_socket(host: &SystemRoot) -> String {
    CONTAINERD_SOCKETS
        .iter()
        .find(|s| host.path(s).exists())
        .unwrap_or(&CONTAINERD_SOCKETS[0])
        .to_string()
}

/// Resolves the engine. `has_command` answers whether the host has a CLI on its `PATH`.
pub(crate) fn resolve(
    flag: Option<Cli>,
    host: &SystemRoot,
    has_command: &dyn Fn(&str) -> bool,
) -> Resolution {
    let ctr_note = "ctr is never driven (ctr run has no --device, and its alternative grants every device); the probe is printed for nerdctl";
    if let Some(cli) = flag {
        let source = format!("--runtime={}", cli.name());
        return match cli {
            Cli::Docker => Resolution {
                engine: Engine::docker(),
                emit_only: None,
                source,
            },
            Cli::Nerdctl => Resolution {
                engine: Engine::nerdctl(default_containerd_socket(host)),
                emit_only: None,
                source,
            },
            Cli::Ctr => Resolution {
                engine: Engine::nerdctl(default_containerd_socket(host)),
                emit_only: Some(ctr_note.into()),
                source,
            },
        };
    }
    match kubelet_setting(
        host,
        "container-runtime-endpoint",
        "containerRuntimeEndpoint",
    ) {
        Endpoint::Named { endpoint, source } => {
            let source = format!("the kubelet's CRI endpoint {endpoint} (from {source})");
            if endpoint.contains("docker") {
                let emit_only = (!has_command("docker"))
                    .then(|| "the kubelet runs on docker but the host has no docker CLI".into());
                Resolution {
                    engine: Engine::docker(),
                    emit_only,
                    source,
                }
            } else if endpoint.contains("containerd") {
                let engine = Engine::nerdctl(socket_path(&endpoint));
                let emit_only = if has_command("nerdctl") {
                    None
                } else if has_command("ctr") {
                    Some(ctr_note.into())
                } else {
                    Some(
                        "the kubelet runs on containerd but the host has neither nerdctl nor ctr"
                            .into(),
                    )
                };
                Resolution {
                    engine,
                    emit_only,
                    source,
                }
            } else {
                Resolution {
                    engine: Engine::docker(),
                    emit_only: Some(format!(
                        "no CLI here can start a container through {endpoint} (CRI-O has none that takes --device); the probe is printed for docker"
                    )),
                    source,
                }
            }
        }
        Endpoint::Conflict(places) => Resolution {
            engine: Engine::docker(),
            emit_only: Some(format!(
                "the kubelet's drop-ins disagree on the CRI endpoint: {}; pass --runtime to choose",
                places
                    .iter()
                    .map(|(dir, ep)| format!("{ep} in {dir}"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            )),
            source: "the rancher kubelet drop-ins".into(),
        },
        Endpoint::None => {
            let source = "no CRI endpoint configured; probed the host's PATH".to_owned();
            if has_command("docker") {
                Resolution {
                    engine: Engine::docker(),
                    emit_only: None,
                    source,
                }
            } else if has_command("nerdctl") {
                Resolution {
                    engine: Engine::nerdctl(default_containerd_socket(host)),
                    emit_only: None,
                    source,
                }
            } else if has_command("ctr") {
                Resolution {
                    engine: Engine::nerdctl(default_containerd_socket(host)),
                    emit_only: Some(ctr_note.into()),
                    source,
                }
            } else {
                Resolution {
                    engine: Engine::docker(),
                    emit_only: Some(
                        "the host has no container CLI (docker, nerdctl, ctr); the probe is printed for docker".into(),
                    ),
                    source,
                }
            }
        }
    }
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.engine.base_argv().join(" "), self.source)?;
        if let Some(why) = &self.emit_only {
            write!(f, "; probes printed, not run: {why}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(files: &[(&str, &str)]) -> (tempfile::TempDir, SystemRoot) {
        let dir = tempfile::tempdir().unwrap();
        let root = SystemRoot::new(dir.path());
        for (path, text) in files {
            let p = root.path(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        (dir, root)
    }

    const K3S: &str = "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf";
    const RKE2: &str = "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf";

    #[test]
    fn first_source_naming_an_endpoint_wins() {
        let cmdline = "/usr/bin/kubelet\0--config=/etc/kubelet.yaml\0--container-runtime-endpoint\0unix:///run/flag.sock\0";
        let cases: [(&[(&str, &str)], Endpoint); 7] = [
            (&[], Endpoint::None),
            (
                &[
                    ("/proc/812/cmdline", cmdline),
                    (
                        "/var/lib/kubelet/config.yaml",
                        "containerRuntimeEndpoint: unix:///run/other.sock\n",
                    ),
                ],
                Endpoint::Named {
                    endpoint: "unix:///run/flag.sock".into(),
                    source: "the running kubelet's --container-runtime-endpoint".into(),
                },
            ),
            (
                &[
                    ("/proc/9/cmdline", "kubelet\0--config=/etc/kubelet.yaml\0"),
                    (
                        "/etc/kubelet.yaml",
                        "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: \"unix:///run/cfg.sock\"\n",
                    ),
                ],
                Endpoint::Named {
                    endpoint: "unix:///run/cfg.sock".into(),
                    source: "/etc/kubelet.yaml".into(),
                },
            ),
            (
                &[
                    (
                        "/var/lib/kubelet/kubeadm-flags.env",
                        "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock --pod-infra-container-image=pause:3.10\"\n",
                    ),
                    (
                        "/var/lib/kubelet/config.yaml",
                        "containerRuntimeEndpoint: unix:///run/later.sock\n",
                    ),
                ],
                Endpoint::Named {
                    endpoint: "unix:///var/run/containerd/containerd.sock".into(),
                    source: "/var/lib/kubelet/kubeadm-flags.env".into(),
                },
            ),
            (
                &[
                    (
                        "/var/lib/kubelet/config.yaml",
                        "containerRuntimeEndpoint: unix:///run/cfg.sock\n",
                    ),
                    (
                        K3S,
                        "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n",
                    ),
                ],
                Endpoint::Named {
                    endpoint: "unix:///run/cfg.sock".into(),
                    source: "/var/lib/kubelet/config.yaml".into(),
                },
            ),
            (
                &[
                    (
                        K3S,
                        "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n",
                    ),
                    (
                        RKE2,
                        "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n",
                    ),
                ],
                Endpoint::Named {
                    endpoint: "unix:///run/k3s/containerd/containerd.sock".into(),
                    source: "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d".into(),
                },
            ),
            (
                &[
                    (
                        K3S,
                        "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n",
                    ),
                    (RKE2, "containerRuntimeEndpoint: unix:///run/rke2.sock\n"),
                ],
                Endpoint::Conflict(vec![
                    (
                        "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d".into(),
                        "unix:///run/k3s/containerd/containerd.sock".into(),
                    ),
                    (
                        "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d".into(),
                        "unix:///run/rke2.sock".into(),
                    ),
                ]),
            ),
        ];
        for (files, expected) in cases {
            let (_d, root) = host(files);
            assert_eq!(
                kubelet_setting(
                    &root,
                    "container-runtime-endpoint",
                    "containerRuntimeEndpoint"
                ),
                expected,
                "{files:?}"
            );
        }
    }

    #[test]
    fn the_kubelets_own_drop_in_directory_settles_a_disagreement() {
        let (_d, root) = host(&[
            (
                "/proc/77/cmdline",
                "/usr/local/bin/kubelet\0--config-dir=/elsewhere\0",
            ),
            (K3S, "containerRuntimeEndpoint: unix:///run/a.sock\n"),
            (RKE2, "containerRuntimeEndpoint: unix:///run/b.sock\n"),
        ]);
        assert!(matches!(
            kubelet_setting(
                &root,
                "container-runtime-endpoint",
                "containerRuntimeEndpoint"
            ),
            Endpoint::Conflict(_)
        ));
        let (_d, root) = host(&[
            (
                "/proc/77/cmdline",
                "/usr/local/bin/kubelet\0--config-dir=/var/lib/rancher/rke2/agent/etc/kubelet.conf.d\0--node-ip=10.0.0.2\0",
            ),
            // The kubelet's own drop-ins name nothing, so the rancher source answers — by position.
            (
                "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/10-extra.conf",
                "maxPods: 200\n",
            ),
            (K3S, "containerRuntimeEndpoint: unix:///run/a.sock\n"),
            (RKE2, "containerRuntimeEndpoint: unix:///run/b.sock\n"),
        ]);
        // 10-extra.conf sorts after 00-rke2-defaults.conf and does not name one: b.sock stands.
        assert_eq!(
            kubelet_setting(
                &root,
                "container-runtime-endpoint",
                "containerRuntimeEndpoint"
            ),
            Endpoint::Named {
                endpoint: "unix:///run/b.sock".into(),
                source: "the kubelet's drop-ins in /var/lib/rancher/rke2/agent/etc/kubelet.conf.d"
                    .into(),
            }
        );
    }

    #[test]
    fn endpoint_and_host_clis_pick_the_engine() {
        let containerd = [(
            "/var/lib/kubelet/config.yaml",
            "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n",
        )];
        let docker = [(
            "/var/lib/kubelet/kubeadm-flags.env",
            "KUBELET_KUBEADM_ARGS=--container-runtime-endpoint=unix:///var/run/cri-dockerd.sock\n",
        )];
        let crio = [(
            "/var/lib/kubelet/config.yaml",
            "containerRuntimeEndpoint: unix:///var/run/crio/crio.sock\n",
        )];
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            Option<Cli>,
            &'a [&'a str],
            Engine,
            bool,
        );
        let nerd = || Engine::nerdctl("/run/containerd/containerd.sock".into());
        let cases: [Case<'_>; 10] = [
            (&containerd, None, &["nerdctl", "docker"], nerd(), false),
            (&containerd, None, &["ctr"], nerd(), true),
            (&containerd, None, &[], nerd(), true),
            (
                &docker,
                None,
                &["docker", "nerdctl"],
                Engine::docker(),
                false,
            ),
            (&crio, None, &["docker"], Engine::docker(), true),
            (&[], None, &["nerdctl", "docker"], Engine::docker(), false),
            (&[], None, &["nerdctl"], nerd(), false),
            (&[], None, &["ctr"], nerd(), true),
            (&[], None, &[], Engine::docker(), true),
            (&containerd, Some(Cli::Docker), &[], Engine::docker(), false),
        ];
        for (files, flag, clis, engine, emitted) in cases {
            let (_d, root) = host(files);
            let r = resolve(flag, &root, &|c| clis.contains(&c));
            assert_eq!(r.engine, engine, "{files:?} {clis:?}");
            assert_eq!(r.emit_only.is_some(), emitted, "{files:?} {clis:?}: {r}");
        }
        let (_d, root) = host(&[]);
        let r = resolve(Some(Cli::Ctr), &root, &|_| true);
        assert_eq!(r.engine.cli, Cli::Nerdctl);
        assert!(r.emit_only.unwrap().contains("ctr is never driven"));
    }

    #[test]
    fn containerd_clis_get_address_and_namespace() {
        assert_eq!(
            Engine::nerdctl("/run/k3s/containerd/containerd.sock".into()).base_argv(),
            [
                "nerdctl",
                "--address",
                "/run/k3s/containerd/containerd.sock",
                "--namespace",
                "gpustack-preflight"
            ]
        );
        assert_eq!(Engine::docker().base_argv(), ["docker"]);
    }
}
