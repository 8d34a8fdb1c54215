//! `device-manager preflight` through the real binary, against the real Docker engine, on the
//! command reference's node (two RX 7800 XT cards) as a fixture host root. Probe containers are
//! started from the allocator's own injection; the slicing shim is a stand-in `.so` built in this
//! workspace and staged where the injection mounts it from.

use std::{path::Path, process::Output, time::Instant};

use gpustack_tests::{
    docker::{self, drivable_host, labelled_containers, require_engine},
    machines::amd,
    operator,
    preflight::{Node, Shim, install_script, shim_library},
    stderr, stdout,
    sysfs::HostTree,
};
use serde_json::Value;

const LABEL: &str = "gpustack.ai/preflight=true";

/// One test at a time on the engine: a run sweeps every labelled container, other tests' probes
/// included, and the dry-run test reads the engine's events for all of them.
static ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn engine() -> std::sync::MutexGuard<'static, ()> {
    require_engine();
    ENGINE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
const SHIM: &str = "/usr/local/vrocm/libvrocm.so";

fn report(out: &Output) -> Value {
    let text = stdout(out);
    serde_yaml_ng::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}\n{text}\nstderr: {}", stderr(out)))
}

fn amd_group(report: &Value) -> &Value {
    report["accelerators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["manufacturer"] == "amd")
        .expect("an amd group")
}

fn row<'a>(group: &'a Value, capability: &str, accelerator: &str) -> &'a Value {
    group["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == capability && c["accelerator"] == accelerator)
        .unwrap_or_else(|| panic!("no {capability} row for {accelerator}: {group:#}"))
}

const CARD0: &str = "GPU-5c88007d760374f3";
const CARD1: &str = "GPU-3f0be7a6a1f2c4d9";

#[test]
fn measured_run_proves_the_slicing_runtime_is_loaded() {
    let _engine = engine();
    let node = Node::new(Shim::Loads);
    let started = Instant::now();
    let out = node.preflight(&[]);
    let wall = started.elapsed();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stderr(&out),
        stdout(&out)
    );
    let text = stdout(&out);
    // Indent 4: a group's mapping continues after `- `, nested blocks four further.
    assert!(
        text.starts_with("accelerators:\n    - manufacturer: amd\n"),
        "{text}"
    );
    assert!(
        text.contains("\n      detection:\n          state: ok\n"),
        "{text}"
    );
    let r = report(&out);
    let g = amd_group(&r);
    assert_eq!(g["detection"]["state"], "ok");
    assert_eq!(g["detection"]["accelerators"], 2);
    assert_eq!(g["detection"]["host"]["accelerators"], 2);
    for card in [CARD0, CARD1] {
        let loaded = row(g, "sliced-runtime-loaded", card);
        assert_eq!(
            (loaded["state"].as_str(), loaded["depth"].as_str()),
            (Some("ok"), Some("measured")),
            "{loaded:#}"
        );
        let evidence = loaded["evidence"].as_str().unwrap();
        assert!(
            evidence.starts_with("gpustack-preflight-maps-begin\n"),
            "{evidence}"
        );
        // The verdict is a mapping line of the exact path: `addr perms offset dev inode path`.
        let mapping = evidence
            .lines()
            .find(|l| l.ends_with(SHIM))
            .unwrap_or_else(|| panic!("no mapping line: {evidence}"));
        assert_eq!(mapping.split_whitespace().count(), 6, "{mapping}");
        let command = loaded["command"].as_str().unwrap();
        assert!(
            command.starts_with(&format!(
                "/usr/sbin/chroot {} docker run --rm",
                node.tree.root().display()
            )),
            "{command}"
        );
        assert!(
            command.contains("--label=gpustack.ai/preflight=true")
                && !command.contains("privileged")
        );
        // The seed's reading: the reader reports nothing before a charge, so the cap is intent.
        let quota = row(g, "sliced-quota-in-force", card);
        assert_eq!(
            (quota["state"].as_str(), quota["depth"].as_str()),
            (Some("ok"), Some("simulated")),
            "{quota:#}"
        );
        assert!(quota["detail"].as_str().unwrap().contains("8184 MiB"));
        let sidecar = row(g, "sidecar-visibility", card);
        assert_eq!(
            (sidecar["state"].as_str(), sidecar["depth"].as_str()),
            (Some("ok"), Some("simulated"))
        );
        let co = row(g, "co-tenancy", card);
        assert_eq!(co["state"], "ok", "{co:#}");
        assert!(
            co["evidence"].as_str().unwrap().matches(SHIM).count() >= 2,
            "{co:#}"
        );
        assert_eq!(row(g, "cu-mask-topology", card)["state"], "ok");
    }
    // Probes are removed afterwards, and so are the rendered work directories.
    assert!(labelled_containers(LABEL).is_empty());
    let work = node.tree.path("/var/lib/gpustack/operator/preflight");
    let left: Vec<_> = std::fs::read_dir(&work)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .filter(|n| n != "lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    // The staged libraries are kept, where the allocator mounts them from.
    assert!(
        node.tree
            .path("/var/lib/gpustack/operator/lib/amd/libvrocm.so")
            .exists()
    );
    // Shown with --nocapture: docs/device-manager-preflight.md's example output.
    eprintln!("measured preflight: {wall:.2?}\n{text}");
}

#[test]
fn dry_run_prints_commands_and_starts_nothing() {
    let _engine = engine();
    let node = Node::new(Shim::Loads);
    let since = docker::docker(&["version", "--format", "{{.Server.Os}}"]);
    assert!(!since.is_empty());
    // The engine takes fractional Unix times: the window starts at this run, not at its second.
    let unix_now = || {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap();
        format!("{}.{:09}", t.as_secs(), t.subsec_nanos())
    };
    let start = unix_now();
    let out = node.preflight(&["--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&out);
    let g = amd_group(&r);
    for card in [CARD0, CARD1] {
        for cap in [
            "sliced-runtime-loaded",
            "sliced-quota-in-force",
            "co-tenancy",
        ] {
            let c = row(g, cap, card);
            assert_eq!(c["depth"], "simulated", "{c:#}");
            assert_eq!(c["state"], "ok");
            assert!(
                c["command"].as_str().unwrap().contains("docker run --rm"),
                "{c:#}"
            );
            assert!(c.get("evidence").is_none(), "{c:#}");
        }
    }
    // Nothing staged, locked or started.
    assert!(
        !node
            .tree
            .path("/var/lib/gpustack/operator/lib/amd")
            .exists()
    );
    assert!(
        !node
            .tree
            .path("/var/lib/gpustack/operator/preflight/lock")
            .exists()
    );
    let end = unix_now();
    let events = docker::docker(&[
        "events",
        "--since",
        &start,
        "--until",
        &end,
        "--filter",
        "type=container",
        "--filter",
        &format!("label={LABEL}"),
    ]);
    assert!(
        events.trim().is_empty(),
        "the dry run started containers: {events}"
    );
}

#[test]
fn a_shim_that_fails_to_load_is_not_ok_whatever_the_greeting() {
    let _engine = engine();
    let node = Node::new(Shim::Refused);
    let out = node.preflight(&[]);
    assert_ne!(out.status.code(), Some(0), "{}", stdout(&out));
    let r = report(&out);
    let g = amd_group(&r);
    let loaded = row(g, "sliced-runtime-loaded", CARD0);
    assert_eq!(
        (loaded["state"].as_str(), loaded["depth"].as_str()),
        (Some("unavailable"), Some("measured")),
        "{loaded:#}"
    );
    // The container's output named the path (the loader's refusal, the reader's greeting)...
    let evidence = loaded["evidence"].as_str().unwrap();
    assert!(evidence.contains(SHIM), "{evidence}");
    // ...and that was not taken as proof.
    assert_ne!(row(g, "co-tenancy", CARD0)["state"], "ok");
    assert!(
        stderr(&out).contains(&format!("error: amd: sliced-runtime-loaded on {CARD0}: ")),
        "{}",
        stderr(&out)
    );
    assert!(labelled_containers(LABEL).is_empty());
}

#[test]
fn a_stale_probe_container_is_swept() {
    let _engine = engine();
    let node = Node::new(Shim::Loads);
    let image = docker::probe_image(&[shim_library()]);
    let id = docker::docker(&[
        "run",
        "-d",
        "-i",
        "--label",
        LABEL,
        "--name",
        "gpustack-preflight-stale-test",
        image,
        "/bin/sh",
        "-c",
        "read x",
    ]);
    assert!(labelled_containers(LABEL).contains(&id.trim()[..12].to_owned()));
    // No NVIDIA cards here: the run only sweeps and reports.
    let root = node.tree.root().display().to_string();
    let out = operator()
        .args([
            "device-manager",
            "preflight",
            "--manufacturer=nvidia",
            &format!("--host-root={root}"),
        ])
        .env("GPUSTACK_SYSTEM_ROOT", &root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed 1 stale preflight container(s)"),
        "{}",
        stderr(&out)
    );
    assert!(labelled_containers(LABEL).is_empty());
    let r = report(&out);
    assert_eq!(r["accelerators"][0]["detection"]["state"], "not-declared");
    assert!(r["accelerators"][0]["note"].as_str().is_some());
}

#[test]
fn a_run_holding_the_lock_makes_every_detection_unavailable() {
    let _engine = engine();
    let node = Node::new(Shim::Loads);
    let lock = node.tree.path("/var/lib/gpustack/operator/preflight/lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let held = std::fs::File::create(&lock).unwrap();
    held.try_lock().unwrap();
    let root = node.tree.root().display().to_string();
    let out = operator()
        .args([
            "device-manager",
            "preflight",
            "--manufacturer=amd,nvidia",
            &format!("--host-root={root}"),
        ])
        .env("GPUSTACK_SYSTEM_ROOT", &root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let r = report(&out);
    let groups = r["accelerators"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    for g in groups {
        assert_eq!(g["detection"]["state"], "unavailable");
        assert!(
            g["detection"]["reason"]
                .as_str()
                .unwrap()
                .contains("another preflight run holds"),
            "{g:#}"
        );
        assert!(g.get("checks").is_none());
    }
    assert_eq!(
        stderr(&out).matches("error: ").count(),
        2,
        "{}",
        stderr(&out)
    );
    drop(held);
}

#[test]
fn a_missing_host_root_downgrades_to_a_dry_run() {
    let _engine = engine();
    let node = Node::new(Shim::Loads);
    let empty = tempfile::tempdir().unwrap();
    let root = node.tree.root().display().to_string();
    let out = operator()
        .args([
            "device-manager",
            "preflight",
            "--manufacturer=amd",
            &format!("--host-root={}", empty.path().display()),
        ])
        .env("GPUSTACK_SYSTEM_ROOT", &root)
        .output()
        .unwrap();
    let r = report(&out);
    let g = amd_group(&r);
    assert!(
        g["note"]
            .as_str()
            .unwrap()
            .contains("is not a host root (no etc, proc, usr)"),
        "{g:#}"
    );
    let loaded = row(g, "sliced-runtime-loaded", CARD0);
    assert_eq!(loaded["depth"], "simulated");
    assert!(loaded.get("evidence").is_none());
    assert!(stderr(&out).contains("is not a host root"));
    // Emitted steps never fail a run; nothing was written under the "host".
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

#[test]
fn amd_without_rocm_mounted_names_the_missing_mount() {
    let _engine = engine();
    require_engine();
    // What the preflight container sees: the cards in sysfs, no /opt/rocm.
    let own = tempfile::tempdir().unwrap();
    let own_tree = HostTree::new(own.path());
    amd::seed_node(&own_tree);
    std::fs::remove_dir_all(own_tree.path("/opt/rocm")).unwrap();
    // The host: its rocm-smi sees both cards.
    let host = tempfile::tempdir().unwrap();
    let host_tree = HostTree::new(host.path());
    docker::shell_only_host(&host_tree);
    install_script(&host_tree, "rocm-smi", "/usr/bin/rocm-smi");
    let out = operator()
        .args([
            "device-manager",
            "preflight",
            "--manufacturer=amd",
            "--dry-run",
            &format!("--host-root={}", host.path().display()),
        ])
        .env("GPUSTACK_SYSTEM_ROOT", own.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let r = report(&out);
    let d = &amd_group(&r)["detection"];
    assert_eq!(d["state"], "unavailable", "{d:#}");
    assert_eq!(d["host"]["command"], "rocm-smi --showuniqueid");
    assert_eq!(d["host"]["accelerators"], 2);
    assert_eq!(d["host"]["missingMounts"], serde_json::json!(["/opt/rocm"]));
    assert!(amd_group(&r).get("checks").is_none());
    assert!(
        stderr(&out).contains("error: amd: detection: "),
        "{}",
        stderr(&out)
    );
}

/// A host root with kubelet configuration `files` and the CLIs `clis` (empty scripts on PATH),
/// run dry on the seed's cards; the printed probe command and the stderr note.
fn resolve_on(files: &[(&str, &str)], clis: &[&str], extra: &[&str]) -> (String, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    amd::seed_node(&tree);
    docker::shell_only_host(&tree);
    for (path, text) in files {
        tree.file(path, text);
    }
    for cli in clis {
        let p = tree.path(&format!("/usr/bin/{cli}"));
        tree.file(&format!("/usr/bin/{cli}"), "#!/bin/sh\nexit 0\n");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let root = dir.path().display().to_string();
    let mut args = vec![
        "device-manager",
        "preflight",
        "--manufacturer=amd",
        "--dry-run",
    ];
    let host_root = format!("--host-root={root}");
    args.push(&host_root);
    args.extend(extra);
    let out = operator()
        .args(&args)
        .env("GPUSTACK_SYSTEM_ROOT", &root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let r = report(&out);
    let command = row(amd_group(&r), "sliced-runtime-loaded", CARD0)["command"]
        .as_str()
        .unwrap()
        .split(" run ")
        .next()
        .unwrap()
        .split_once(&root)
        .unwrap()
        .1
        .trim()
        .to_owned();
    let note = stderr(&out)
        .lines()
        .find(|l| l.starts_with("note: container runtime: "))
        .unwrap()
        .to_owned();
    (command, note, r)
}

#[test]
fn runtime_resolution_on_fixture_hosts() {
    let _engine = engine();
    const K3S: &str = "/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf";
    const RKE2: &str = "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf";
    let nerdctl = |sock: &str| format!("nerdctl --address {sock} --namespace gpustack-preflight");
    /// (kubelet files, host CLIs, extra flags, expected CLI and connection flags, source named)
    type Case<'a> = (
        &'a [(&'a str, &'a str)],
        &'a [&'a str],
        &'a [&'a str],
        String,
        &'a str,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            &[(
                "/var/lib/kubelet/kubeadm-flags.env",
                "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n",
            )],
            &["docker", "nerdctl"],
            &[],
            nerdctl("/run/containerd/containerd.sock"),
            "/var/lib/kubelet/kubeadm-flags.env",
        ),
        (
            &[(
                "/var/lib/kubelet/config.yaml",
                "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///var/run/cri-dockerd.sock\n",
            )],
            &["docker", "nerdctl"],
            &[],
            "docker".into(),
            "/var/lib/kubelet/config.yaml",
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
            &["nerdctl"],
            &[],
            nerdctl("/run/k3s/containerd/containerd.sock"),
            "kubelet.conf.d",
        ),
        (
            &[],
            &["nerdctl"],
            &[],
            nerdctl("/run/containerd/containerd.sock"),
            "probed the host's PATH",
        ),
        (
            &[],
            &["docker", "nerdctl"],
            &[],
            "docker".into(),
            "probed the host's PATH",
        ),
        (
            &[(
                "/var/lib/kubelet/config.yaml",
                "containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n",
            )],
            &[],
            &["--runtime=docker"],
            "docker".into(),
            "--runtime=docker",
        ),
    ];
    for (files, clis, extra, engine, source) in cases {
        let (command, note, _) = resolve_on(files, clis, extra);
        assert_eq!(command, engine, "{files:?} {clis:?}: {note}");
        assert!(note.contains(source), "{note}");
    }

    // Two rancher directories that disagree: steps emitted, naming both.
    let (_, note, r) = resolve_on(
        &[
            (
                K3S,
                "containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n",
            ),
            (RKE2, "containerRuntimeEndpoint: unix:///run/rke2.sock\n"),
        ],
        &["nerdctl", "docker"],
        &[],
    );
    assert!(note.contains("probes printed, not run"), "{note}");
    let g = amd_group(&r);
    let detail = row(g, "sliced-runtime-loaded", CARD0)["detail"]
        .as_str()
        .unwrap();
    for named in [
        "unix:///run/k3s/containerd/containerd.sock",
        "unix:///run/rke2.sock",
        "--runtime",
    ] {
        assert!(detail.contains(named), "{detail}");
    }
    // Nothing on the host: printed for docker.
    let (command, note, _) = resolve_on(&[], &[], &[]);
    assert_eq!(command, "docker");
    assert!(note.contains("no container CLI"), "{note}");
}

/// Allocator injections that go wrong, driven through preflight's library entry point (the
/// binary always passes the node's real injection): one answers every request with an error,
/// one panics. Either way the run completes and the card's slice rows are not `ok`.
mod broken_injection {
    use gpustack_api::{
        Manufacturer,
        devices::{Accelerator, DevicesGroup},
    };
    use gpustack_device_manager::{
        preflight::{
            self, Options,
            injection::{AllocatorInjection, ContainerInjection, InjectionError, SliceRequest},
            report::State,
            runtime::Cli,
        },
        system_root::SystemRoot,
    };

    use super::*;

    struct Refusing;

    impl AllocatorInjection for Refusing {
        fn sliced(&self, _: &SliceRequest<'_>) -> Result<ContainerInjection, InjectionError> {
            Err(InjectionError::NoAccelerator)
        }
        fn visibility(
            &self,
            _: &DevicesGroup,
            _: &Accelerator,
        ) -> Result<ContainerInjection, InjectionError> {
            Err(InjectionError::NoAccelerator)
        }
    }

    struct Panicking;

    impl AllocatorInjection for Panicking {
        fn sliced(&self, r: &SliceRequest<'_>) -> Result<ContainerInjection, InjectionError> {
            panic!("allocator bug on {}", r.accelerator.id)
        }
        fn visibility(
            &self,
            _: &DevicesGroup,
            a: &Accelerator,
        ) -> Result<ContainerInjection, InjectionError> {
            panic!("allocator bug on {}", a.id)
        }
    }

    fn run_with(injection: &dyn AllocatorInjection) -> preflight::report::PreflightReport {
        let node = Node::new(Shim::Loads);
        let root = node.tree.root().to_path_buf();
        let opts = Options {
            manufacturers: vec![Manufacturer::Amd],
            no_pci_check: false,
            dry_run: true,
            probe_image: Some("gpustack-preflight-probe:unused".into()),
            host_root: root.clone(),
            runtime: Some(Cli::Docker),
            engine_root: root.clone(),
            chroot: "/usr/sbin/chroot".into(),
            command_timeout: std::time::Duration::from_secs(60),
        };
        preflight::run(&opts, &SystemRoot::new(&root), &|_| None, injection).report
    }

    #[test]
    fn a_failing_or_panicking_injection_is_a_failing_row_not_a_crash() {
        let _engine = engine();

        let refused = run_with(&Refusing);
        let g = &refused.accelerators[0];
        assert_eq!(g.detection.state, State::Ok, "{g:#?}");
        for card in [CARD0, CARD1] {
            for cap in [
                "sliced-runtime-loaded",
                "sliced-quota-in-force",
                "co-tenancy",
            ] {
                let c = g
                    .checks
                    .iter()
                    .find(|c| c.accelerator == card && c.capability == cap)
                    .unwrap_or_else(|| panic!("no {cap} on {card}: {g:#?}"));
                assert_eq!(c.state, State::Unavailable, "{c:#?}");
                assert!(c.reason.is_some(), "{c:#?}");
            }
        }
        assert!(!refused.failures().is_empty());

        let panicked = run_with(&Panicking);
        let g = &panicked.accelerators[0];
        // The driver rows read before the panic stand; each card gets its panicked row.
        assert_eq!(g.detection.state, State::Ok, "{g:#?}");
        for card in [CARD0, CARD1] {
            let cu = g
                .checks
                .iter()
                .find(|c| c.accelerator == card && c.capability == "cu-mask-topology")
                .unwrap();
            assert_eq!(cu.state, State::Ok);
            let p = g
                .checks
                .iter()
                .find(|c| c.accelerator == card && c.capability == "preflight-panicked")
                .unwrap_or_else(|| panic!("no preflight-panicked row for {card}: {g:#?}"));
            assert_eq!(p.state, State::Unavailable);
            assert!(
                p.reason
                    .as_deref()
                    .unwrap()
                    .contains(&format!("allocator bug on {card}")),
                "{p:#?}"
            );
            assert!(
                !g.checks
                    .iter()
                    .any(|c| c.accelerator == card && c.capability == "sliced-runtime-loaded"),
                "{g:#?}"
            );
        }
        let causes = panicked.failures();
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert!(causes.iter().all(|c| c.contains("preflight-panicked")));
    }
}

/// Warns, never fails, when this process is not in the host's network namespace (the host's CLI
/// entered through chroot would pull through a network it cannot reach).
#[test]
fn a_network_namespace_other_than_the_hosts_is_a_warning() {
    // The preflight process inherits this test's namespace.
    let own = std::fs::read_link("/proc/self/ns/net").unwrap();
    let run = |host_ns: &Path| {
        let dir = tempfile::tempdir().unwrap();
        let tree = HostTree::new(dir.path());
        amd::seed_node(&tree);
        docker::shell_only_host(&tree);
        let link = tree.path("/proc/1/ns/net");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(host_ns, &link).unwrap();
        let root = dir.path().display().to_string();
        operator()
            .args([
                "device-manager",
                "preflight",
                "--manufacturer=amd",
                "--dry-run",
                &format!("--host-root={root}"),
            ])
            .env("GPUSTACK_SYSTEM_ROOT", &root)
            .output()
            .unwrap()
    };
    let other = run(Path::new("net:[4026530001]"));
    assert_eq!(other.status.code(), Some(0), "{}", stderr(&other));
    let warning = stderr(&other)
        .lines()
        .find(|l| l.contains("network namespace"))
        .unwrap_or_else(|| panic!("no namespace warning: {}", stderr(&other)))
        .to_owned();
    assert!(warning.contains("net:[4026530001]"), "{warning}");
    assert!(warning.contains(&own.display().to_string()), "{warning}");
    assert!(warning.contains("--network=host"), "{warning}");

    let same = run(&own);
    assert_eq!(same.status.code(), Some(0), "{}", stderr(&same));
    assert!(
        !stderr(&same).contains("network namespace"),
        "{}",
        stderr(&same)
    );
}

/// The sharing switches that must be on before a card is shared: Ascend's container-share flag
/// (DCMI) and Cambricon's sMLU mode (CNDev), served by the vendor stand-ins, which log every
/// set call to a file. A switch that is off is turned on for the card's checks and put back off
/// afterwards, whatever the checks did; a dry run only reads.
mod sharing_switches {
    use gpustack_tests::machines::{ascend, cambricon};

    use super::*;

    fn group<'a>(report: &'a Value, m: &str) -> &'a Value {
        report["accelerators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["manufacturer"] == m)
            .unwrap_or_else(|| panic!("no {m} group: {report:#}"))
    }

    fn log_lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Edits a stand-in's JSON fixture: `f` gets each card (or device) object by position.
    fn edit_fixture(path: &Path, list: &[&str], f: impl Fn(usize, &mut Value)) {
        let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        let mut items = &mut v;
        for key in list {
            items = &mut items[*key];
        }
        for (i, item) in items.as_array_mut().unwrap().iter_mut().enumerate() {
            f(i, item);
        }
        std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    /// The Atlas 800T A2 node (eight 910B3, CANN 8) made drivable: NPU 1's flag is on already,
    /// NPU 2's setter is refused (`DCMI_ERR_CODE_OPER_NOT_PERMITTED`), the rest are off. The
    /// vcann-rt files are staged, so the probes really start, and fail: Docker has no `ascend`
    /// runtime here.
    #[test]
    fn ascend_container_share_is_switched_on_for_the_probes_and_put_back() {
        let _engine = engine();
        let dir = tempfile::tempdir().unwrap();
        let node = ascend::atlas_800t_a2_node(dir.path());
        edit_fixture(&node.dcmi_fixture, &["cards"], |i, card| {
            let device = &mut card["devices"][0];
            device["shareEnabled"] = Value::Bool(i == 1);
            device["shareLocked"] = Value::Bool(i == 2);
        });
        let tree = HostTree::new(&node.root);
        drivable_host(&tree);
        std::fs::create_dir_all(tree.path("/usr/local/dcmi")).unwrap();
        let lib = "/etc/gpustack/lib/ascend";
        tree.file(
            &format!("{lib}/cann-8-910b/lib/libvruntime.so"),
            "stands in for vcann-rt\n",
        );
        tree.file(
            &format!("{lib}/ld.so.preload"),
            "/opt/enpu/vcann-rt/lib/libvruntime.so\n",
        );
        install_script(&tree, "rocm-monitor-silent", &format!("{lib}/enpu-monitor"));
        let log = dir.path().join("dcmi-set.log");
        let log_env = log.display().to_string();
        let root = node.root.display().to_string();
        let image = docker::probe_image(&[shim_library()]);
        let run = |extra: &[&str]| {
            let mut args = vec![
                "device-manager".to_owned(),
                "preflight".to_owned(),
                "--manufacturer=ascend".to_owned(),
                format!("--host-root={root}"),
                format!("--probe-image={image}"),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            gpustack_tests::run_on_host(
                &node.root,
                (ascend::FIXTURE_ENV, Some(&node.dcmi_fixture)),
                &[
                    ("GPUSTACK_FAKE_DCMI_SET_LOG", &log_env),
                    ("GPUSTACK_PREFLIGHT_ENGINE_ROOT", &root),
                ],
                &args,
            )
        };
        let npus: Vec<String> = ascend::a2_npus().iter().map(|n| n.id()).collect();

        // Dry run: read only.
        let out = run(&["--dry-run"]);
        let r = report(&out);
        let g = group(&r, "ascend");
        assert_eq!(g["detection"]["state"], "ok", "{g:#}");
        let off = row(g, "container-share", &npus[0]);
        assert_eq!(
            (off["state"].as_str(), off["depth"].as_str()),
            (Some("ok"), Some("declared")),
            "{off:#}"
        );
        let detail = off["detail"].as_str().unwrap();
        assert!(
            detail.contains("not switched in a dry run")
                && detail.contains("npu-smi set -t device-share -i 0 -c 0 -d 1"),
            "{detail}"
        );
        assert_eq!(
            row(g, "container-share", &npus[2])["state"],
            "ok",
            "a dry run does not try the setter"
        );
        assert!(log_lines(&log).is_empty(), "{:?}", log_lines(&log));

        // The run: switched on around each card's probes, put back off either way.
        let out = run(&[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let r = report(&out);
        let g = group(&r, "ascend");
        let switched = row(g, "container-share", &npus[0]);
        assert_eq!(
            (switched["state"].as_str(), switched["depth"].as_str()),
            (Some("ok"), Some("declared")),
            "{switched:#}"
        );
        assert!(
            switched["detail"].as_str().unwrap().contains(
                "switched on (it reads back on) for this card's checks, then put back off"
            ),
            "{switched:#}"
        );
        // The probes ran and failed (no `ascend` runtime in this engine).
        let probe = row(g, "sliced-runtime-loaded", &npus[0]);
        assert_eq!(probe["state"], "unavailable", "{probe:#}");
        assert!(
            probe["command"].as_str().unwrap().contains("--runtime"),
            "{probe:#}"
        );
        assert!(
            probe["reason"]
                .as_str()
                .unwrap()
                .contains("the probe container did not run"),
            "{probe:#}"
        );
        let cause = probe["reason"].as_str().unwrap().to_lowercase();
        assert!(
            cause.contains("runtime") && cause.contains("ascend"),
            "the engine's own refusal, not its pointer to --help: {cause}"
        );
        let already = row(g, "container-share", &npus[1]);
        assert_eq!(already["state"], "ok");
        assert!(
            already["detail"].as_str().unwrap().contains("on already"),
            "{already:#}"
        );
        let refused = row(g, "container-share", &npus[2]);
        assert_eq!(refused["state"], "unavailable", "{refused:#}");
        assert!(
            refused["reason"].as_str().unwrap().contains("-8002"),
            "{refused:#}"
        );
        assert!(
            stderr(&out).contains(&format!("error: ascend: container-share on {}", npus[2])),
            "{}",
            stderr(&out)
        );

        let mut expected = Vec::new();
        for card in 0..8 {
            match card {
                1 => {}
                // Refused: still off, nothing to put back.
                2 => expected.push("dcmi_set_device_share_enable 2 0 1 -> -8002".to_owned()),
                _ => {
                    expected.push(format!("dcmi_set_device_share_enable {card} 0 1 -> 0"));
                    expected.push(format!("dcmi_set_device_share_enable {card} 0 0 -> 0"));
                }
            }
        }
        assert_eq!(log_lines(&log), expected);
        assert!(
            !stderr(&out).contains("left ON"),
            "every flag was put back: {}",
            stderr(&out)
        );
    }

    /// Four MLU370-X8 cards: MLU 0 off, MLU 1 on already, MLU 2's setter refused
    /// (`CNDEV_ERROR_NO_PERMISSION`), MLU 3's library without the sMLU calls. No container engine
    /// is needed: Cambricon has no probe.
    #[test]
    fn cambricon_smlu_mode_is_switched_on_and_put_back() {
        let dir = tempfile::tempdir().unwrap();
        let node = cambricon::mlu370_x8_node(dir.path());
        edit_fixture(&node.cndev_fixture, &["devices"], |i, card| {
            if i < 3 {
                card["smluMode"] = Value::Bool(i == 1);
            }
            card["smluLocked"] = Value::Bool(i == 2);
        });
        docker::shell_only_host(&HostTree::new(&node.root));
        let log = dir.path().join("cndev-set.log");
        let log_env = log.display().to_string();
        let root = node.root.display().to_string();
        let run = |extra: &[&str]| {
            let host_root = format!("--host-root={root}");
            let mut args = vec![
                "device-manager",
                "preflight",
                "--manufacturer=cambricon",
                &host_root,
            ];
            args.extend(extra);
            gpustack_tests::run_on_host(
                &node.root,
                (cambricon::FIXTURE_ENV, Some(&node.cndev_fixture)),
                &[("GPUSTACK_FAKE_CNDEV_SET_LOG", &log_env)],
                &args,
            )
        };
        let mlus: Vec<String> = cambricon::x8_mlus().iter().map(|m| m.id()).collect();

        let out = run(&["--dry-run"]);
        let r = report(&out);
        let g = group(&r, "cambricon");
        let off = row(g, "smlu-mode", &mlus[0]);
        assert_eq!(off["state"], "ok", "{off:#}");
        assert!(
            off["detail"]
                .as_str()
                .unwrap()
                .contains("not switched in a dry run"),
            "{off:#}"
        );
        assert!(log_lines(&log).is_empty(), "{:?}", log_lines(&log));

        let out = run(&[]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let r = report(&out);
        let g = group(&r, "cambricon");
        let switched = row(g, "smlu-mode", &mlus[0]);
        assert_eq!(
            (switched["state"].as_str(), switched["depth"].as_str()),
            (Some("ok"), Some("declared")),
            "{switched:#}"
        );
        assert!(
            switched["detail"]
                .as_str()
                .unwrap()
                .contains("put back off"),
            "{switched:#}"
        );
        let already = row(g, "smlu-mode", &mlus[1]);
        assert!(
            already["detail"].as_str().unwrap().contains("on already"),
            "{already:#}"
        );
        let refused = row(g, "smlu-mode", &mlus[2]);
        assert_eq!(refused["state"], "unavailable", "{refused:#}");
        assert!(
            refused["reason"]
                .as_str()
                .unwrap()
                .contains("CNDEV_ERROR_NO_PERMISSION"),
            "{refused:#}"
        );
        let unsupported = row(g, "smlu-mode", &mlus[3]);
        assert_eq!(unsupported["state"], "unavailable", "{unsupported:#}");
        assert!(
            unsupported["reason"]
                .as_str()
                .unwrap()
                .contains("CNDEV_ERROR_NOT_SUPPORTED"),
            "{unsupported:#}"
        );
        // The simulated slice rows are still there beside the switch.
        assert_eq!(
            row(g, "sliced-runtime-loaded", &mlus[0])["depth"],
            "simulated"
        );
        assert_eq!(
            log_lines(&log),
            [
                "cndevSetSMLUMode 0 1 -> 0",
                "cndevSetSMLUMode 0 0 -> 0",
                "cndevSetSMLUMode 2 1 -> 13",
            ]
        );
    }
}
