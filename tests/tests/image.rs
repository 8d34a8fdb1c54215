//! The container image, built in the test by `deploy/image/build.sh` from this build's binary
//! with the real Docker engine (FROM scratch: nothing is pulled), then run: its files (exactly
//! the libraries the binary links), `--version`, the command links, `device-manager detect` on
//! a mounted fixture tree, and a `worker` container serving an embedded cluster on the host.
//! Every image and container the test makes is removed at the end, also when it fails.

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Output},
};

use gpustack_tests::{
    binary,
    docker::{build_image, docker, require_engine},
    embedded::{DEADLINE, GatewayProcess, free_port},
    machines::amd,
    operator,
    python_grpc::checkout,
    stdout,
    sysfs::HostTree,
    wait::wait_until,
};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// An image built for this test; removed on drop, with any container left from it.
struct Image {
    tag: String,
}

impl Image {
    /// Builds the image under a tag of this process and `test` (the tests run in parallel).
    fn build(test: &str) -> Self {
        require_engine();
        let tag = format!(
            "gpustack/gpustack-operator:test-{}-{test}",
            std::process::id()
        );
        assert_eq!(build_image(&tag), tag);
        Image { tag }
    }

    /// `docker run --rm` of the image with `flags` before it and `args` after.
    fn run(&self, flags: &[&str], args: &[&str]) -> Output {
        Command::new("docker")
            .args(["run", "--rm", "--label", &self.label()])
            .args(flags)
            .arg(&self.tag)
            .args(args)
            .output()
            .expect("docker run")
    }

    /// The label on every container of this test, for cleaning up.
    fn label(&self) -> String {
        format!("gpustack.test={}", self.tag.replace([':', '/'], "-"))
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let ids = Command::new("docker")
            .args(["ps", "-aq", "--filter", &format!("label={}", self.label())])
            .output();
        if let Ok(ids) = ids {
            for id in String::from_utf8_lossy(&ids.stdout).split_whitespace() {
                let _ = Command::new("docker").args(["rm", "-f", id]).output();
            }
        }
        let _ = Command::new("docker")
            .args(["rmi", "-f", &self.tag])
            .output();
    }
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The files of the image, from an exported container's tar listing.
fn files_of(image: &Image) -> BTreeSet<String> {
    let id = docker(&["create", "--label", &image.label(), &image.tag]);
    let id = id.trim();
    let tar = Command::new("docker")
        .args(["export", id])
        .output()
        .expect("docker export");
    let _ = docker(&["rm", id]);
    assert!(tar.status.success());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("image.tar");
    std::fs::write(&path, &tar.stdout).unwrap();
    let list = Command::new("tar")
        .args(["-tf", path.to_str().unwrap()])
        .output()
        .expect("tar");
    String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter(|l| !l.ends_with('/'))
        .map(|l| format!("/{l}"))
        .collect()
}

/// What ldd says the binary links, as absolute paths (the loader included).
fn linked_libraries(bin: &Path) -> BTreeSet<String> {
    let out = Command::new("ldd").arg(bin).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| path.to_owned())
        })
        .collect()
}

#[test]
fn the_image_holds_the_binary_its_libraries_and_nothing_else() {
    let image = Image::build("files");
    let files = files_of(&image);
    let libraries = linked_libraries(&binary());
    assert!(!libraries.is_empty());
    let mut want: BTreeSet<String> = [
        "/usr/bin/gpustack-operator",
        "/usr/bin/worker",
        "/usr/bin/worker-gateway",
        "/usr/bin/device-manager",
        "/usr/bin/model-manager",
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/passwd",
        "/etc/group",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    want.extend(libraries);
    want.insert(format!(
        "/etc/gpustack/charts/gpustack-operator-{VERSION}.tgz"
    ));
    for crd in std::fs::read_dir(checkout().join("deploy/crds")).unwrap() {
        let name = crd.unwrap().file_name().into_string().unwrap();
        want.insert(format!("/etc/gpustack/crds/{name}"));
    }
    // Docker adds these to every container it creates; they are not the image's.
    let docker_made: BTreeSet<String> = [
        "/.dockerenv",
        "/dev/console",
        "/etc/hostname",
        "/etc/hosts",
        "/etc/mtab",
        "/etc/resolv.conf",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    let found: BTreeSet<String> = files.difference(&docker_made).cloned().collect();
    assert_eq!(found, want, "the image's files");

    let user = docker(&["image", "inspect", "-f", "{{.Config.User}}", &image.tag]);
    assert_eq!(user.trim(), "65532:65532", "a non-root user by default");

    // The version, through the binary and through a command's link.
    let version = ok(
        &image.run(&[], &["gpustack-operator", "--version"]),
        "--version",
    );
    assert_eq!(version.trim(), format!("gpustack-operator {VERSION}"));
    let help = ok(
        &image.run(&[], &["worker-gateway", "--help"]),
        "worker-gateway --help",
    );
    assert!(help.contains("--embedded-cluster"), "{help}");

    // The bundled chart unpacks to the chart in the tree.
    let dir = tempfile::tempdir().unwrap();
    let id = docker(&["create", "--label", &image.label(), &image.tag]);
    let tgz = dir.path().join("chart.tgz");
    docker(&[
        "cp",
        &format!(
            "{}:/etc/gpustack/charts/gpustack-operator-{VERSION}.tgz",
            id.trim()
        ),
        tgz.to_str().unwrap(),
    ]);
    let _ = docker(&["rm", id.trim()]);
    let untar = Command::new("tar")
        .args([
            "-xzf",
            tgz.to_str().unwrap(),
            "-C",
            dir.path().to_str().unwrap(),
        ])
        .status()
        .unwrap();
    assert!(untar.success());
    let chart = std::fs::read_to_string(dir.path().join("gpustack-operator/Chart.yaml")).unwrap();
    let tree =
        std::fs::read_to_string(checkout().join("deploy/chart/gpustack-operator/Chart.yaml"))
            .unwrap();
    assert_eq!(chart, tree);
}

#[test]
fn detect_in_the_image_reads_a_mounted_fixture_tree() {
    let image = Image::build("detect");
    let dir = tempfile::tempdir().unwrap();
    let tree = HostTree::new(dir.path());
    amd::seed_node(&tree);
    let on_host = operator()
        .args(["device-manager", "detect", "--manufacturer=amd"])
        .env("GPUSTACK_SYSTEM_ROOT", tree.root())
        .output()
        .unwrap();
    let on_host = stdout(&on_host);
    assert!(on_host.contains("id: radeon-rx-7800-xt"), "{on_host}");

    // The whole fixture as the host root: the same output, byte for byte.
    let host = format!("{}:/host:ro", tree.root().display());
    let whole = ok(
        &image.run(
            &["-v", &host, "-e", "GPUSTACK_SYSTEM_ROOT=/host"],
            &["device-manager", "detect", "--manufacturer=amd"],
        ),
        "detect on /host",
    );
    assert_eq!(whole, on_host);

    // As the seed runs it: /sys (and AMD's libraries at /opt/rocm) mounted over the
    // container's own. Only the kernel's release is the running kernel's then: a container
    // cannot have /proc/sys/kernel/osrelease replaced, and the AMD driver's version is it.
    let sys = format!("{}:/sys:ro", tree.path("/sys").display());
    let rocm = format!("{}:/opt/rocm:ro", tree.path("/opt/rocm").display());
    let mounted = ok(
        &image.run(
            &["-v", &sys, "-v", &rocm],
            &["device-manager", "detect", "--manufacturer=amd"],
        ),
        "detect on mounted /sys",
    );
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let running = release.trim().split('-').next().unwrap().to_owned();
    let without_driver = |text: &str| -> String {
        text.lines()
            .filter(|l| !l.trim_start().starts_with("driverVersion:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(without_driver(&mounted), without_driver(&on_host));
    assert!(
        mounted.contains(&format!("driverVersion: {running}")),
        "{mounted}"
    );
}

#[test]
fn a_worker_container_serves_an_embedded_cluster_on_the_host() {
    let image = Image::build("worker");
    let dir = tempfile::tempdir().unwrap();
    let gw = GatewayProcess::start(&dir.path().join("data"), "boxed");
    // The container's user (65532) reads a copy of the admin kubeconfig.
    let shared = dir.path().join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    let kubeconfig: PathBuf = shared.join("kubeconfig");
    std::fs::copy(gw.kubeconfig(), &kubeconfig).unwrap();
    let mut perms = std::fs::metadata(&kubeconfig).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o644);
    std::fs::set_permissions(&kubeconfig, perms).unwrap();

    let port = free_port();
    let name = format!("gpustack-test-worker-{}", std::process::id());
    let mount = format!("{}:/config:ro", shared.display());
    let started = Command::new("docker")
        .args([
            "run",
            "-d",
            "--name",
            &name,
            "--label",
            &image.label(),
            "--network",
            "host",
        ])
        .args(["-v", &mount, &image.tag])
        .args([
            "worker",
            "--kubeconfig=/config/kubeconfig",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={port}"),
            "--gateway-socket=",
        ])
        .output()
        .expect("docker run");
    ok(&started, "starting the worker container");
    let logs = || {
        let out = Command::new("docker")
            .args(["logs", &name])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Installed itself (CRDs, APIServices), and serves its views through the aggregator.
    wait_until(
        "devices.v1.worker.gpustack.ai to be served",
        DEADLINE * 2,
        || {
            let running = docker(&["inspect", "-f", "{{.State.Running}}", &name]);
            assert_eq!(
                running.trim(),
                "true",
                "the worker container exited:\n{}",
                logs()
            );
            let out = gw.kubectl(&["get", "devices.v1.worker.gpustack.ai"]);
            out.status.success().then_some(())
        },
    );
    let apiservice = gw.kubectl_ok(&["get", "apiservice", "v1.worker.gpustack.ai"]);
    assert!(apiservice.contains("True"), "{apiservice}");
    let table = gw.kubectl_ok(&["get", "settings", "-n", "gpustack-system"]);
    assert!(table.contains("workload-fit-affinity"), "{table}");
}
