//! The command surface of the real binary: every validated flag's error, flags from the
//! environment, `--print-cmdline`, dispatch on the binary's name, help and version.

use gpustack_tests::{operator, run, stderr, stdout};

/// Runs the binary and checks that it refused the input the way users are promised: exit 2 and
/// exactly one line on stderr that contains every `expected` fragment.
fn assert_rejected(args: &[&str], expected: &[&str]) {
    let out = run(args);
    let err = stderr(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{args:?} must exit 2; stderr: {err}"
    );
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?} must print one line, got: {err}"
    );
    assert!(err.starts_with("error: "), "{args:?}: {err}");
    for fragment in expected {
        assert!(
            err.contains(fragment),
            "{args:?}: {err:?} lacks {fragment:?}"
        );
    }
    assert!(stdout(&out).is_empty(), "{args:?} printed to stdout");
}

macro_rules! rejects {
    ($($name:ident: [$($arg:expr),*] => [$($frag:expr),*];)*) => {
        $(
            #[test]
            fn $name() {
                assert_rejected(&[$($arg),*], &[$($frag),*]);
            }
        )*
    };
}

rejects! {
    // worker
    worker_manufacturer: ["worker", "--manufacturer=nvidia,intel"] => ["--manufacturer", "'intel'", "allowed are amd, ascend, cambricon, hygon, iluvatar, metax, mthreads, nvidia, thead"];
    worker_disable_applications: ["worker", "--disable-applications=kueue,grafana"] => ["--disable-applications", "'grafana'", "allowed are *, kueue"];
    worker_secure_port_zero: ["worker", "--secure-port=0"] => ["--secure-port", "'0'", "1..=65535"];
    worker_secure_port_too_big: ["worker", "--secure-port=70000"] => ["--secure-port", "'70000'", "1..=65535"];
    worker_bind_address: ["worker", "--bind-address=somewhere"] => ["--bind-address", "'somewhere'", "IP address"];
    worker_disable_auths: ["worker", "--disable-auths=sometimes"] => ["--disable-auths", "'sometimes'", "true or false"];
    worker_authn_cache_ttl: ["worker", "--authentication-token-webhook-cache-ttl=5s"] => ["--authentication-token-webhook-cache-ttl", "'5s'", "at least 10s"];
    worker_authn_request_timeout: ["worker", "--authentication-token-request-timeout=9s"] => ["--authentication-token-request-timeout", "'9s'", "at least 10s"];
    worker_authz_authorized_ttl: ["worker", "--authorization-webhook-cache-authorized-ttl=1s"] => ["--authorization-webhook-cache-authorized-ttl", "'1s'", "at least 10s"];
    worker_authz_unauthorized_ttl: ["worker", "--authorization-webhook-cache-unauthorized-ttl=1s"] => ["--authorization-webhook-cache-unauthorized-ttl", "'1s'", "at least 10s"];
    worker_duration_without_unit: ["worker", "--authentication-token-request-timeout=10"] => ["--authentication-token-request-timeout", "'10'", "not a duration", "15s"];
    worker_cors_regex: ["worker", "--cors-allowed-origins=https://a.example,(unclosed"] => ["--cors-allowed-origins", "'(unclosed'", "regular expression"];
    worker_leader_election: ["worker", "--kube-leader-election=maybe"] => ["--kube-leader-election", "'maybe'", "true or false"];
    worker_leader_lease_min: ["worker", "--kube-leader-lease=4s"] => ["--kube-leader-lease", "'4s'", "at least 5s"];
    worker_leader_renew_min: ["worker", "--kube-leader-renew-timeout=4s"] => ["--kube-leader-renew-timeout", "'4s'", "at least 5s"];
    worker_leader_lease_above_renew: ["worker", "--kube-leader-lease=10s", "--kube-leader-renew-timeout=10s"] => ["--kube-leader-lease", "'10s'", "greater than --kube-leader-renew-timeout (10s)"];
    worker_qps_min: ["worker", "--kube-conn-qps=5"] => ["--kube-conn-qps", "'5'", "at least 10"];
    worker_burst_min: ["worker", "--kube-conn-burst=5"] => ["--kube-conn-burst", "'5'", "at least 10"];
    worker_burst_above_qps: ["worker", "--kube-conn-qps=300", "--kube-conn-burst=300"] => ["--kube-conn-burst", "'300'", "greater than --kube-conn-qps (300)"];
    worker_conn_timeout: ["worker", "--kube-conn-timeout=5s"] => ["--kube-conn-timeout", "'5s'", "at least 10s"];
    worker_content_type: ["worker", "--kube-content-type=text/plain"] => ["--kube-content-type", "'text/plain'", "application/json"];
    worker_resync_period: ["worker", "--informer-cache-resync-period=1m"] => ["--informer-cache-resync-period", "'1m'", "at least 5m0s"];
    worker_gopool_factor: ["worker", "--gopool-worker-factor=50"] => ["--gopool-worker-factor", "'50'", "100.."];
    worker_aggressive_filtering: ["worker", "--aggressive-event-filtering=2"] => ["--aggressive-event-filtering", "'2'", "true or false"];
    // worker-gateway
    gateway_conn_mode: ["worker-gateway", "--worker-conn-mode=direct"] => ["--worker-conn-mode", "'direct'", "gpustack-api", "loopback"];
    gateway_api_port: ["wg", "--worker-conn-gpustack-api-port=0"] => ["--worker-conn-gpustack-api-port", "'0'", "1..=65535"];
    gateway_api_scheme: ["wg", "--worker-conn-gpustack-api-scheme=ftp"] => ["--worker-conn-gpustack-api-scheme", "'ftp'", "http", "https"];
    gateway_readiness_timeout_format: ["wg", "--worker-readiness-check-timeout=soon"] => ["--worker-readiness-check-timeout", "'soon'", "not a duration"];
    gateway_embedded_cluster_name: ["wg", "--embedded-cluster=Demo_1"] => ["--embedded-cluster", "'Demo_1'", "DNS label"];
    gateway_upstreams_missing: ["wg", "--upstreams=/nonexistent/upstreams.yaml"] => ["--upstreams", "'/nonexistent/upstreams.yaml'", "cannot read"];
    gateway_embedded_cluster_empty: ["wg", "--embedded-cluster="] => ["--embedded-cluster", "DNS label"];
    gateway_embedded_cluster_too_long: ["wg", "--embedded-cluster=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"] => ["--embedded-cluster", "at most 63 characters"];
    gateway_readiness_within_conn_timeout: ["wg", "--worker-readiness-check-timeout=10m"] => ["--worker-readiness-check-timeout", "must not exceed --kube-conn-timeout (5m0s)"];
    gateway_secure_port: ["wg", "--secure-port=65536"] => ["--secure-port", "'65536'"];
    gateway_qps: ["wg", "--kube-conn-qps=1"] => ["--kube-conn-qps", "at least 10"];
    gateway_burst_above_qps: ["wg", "--kube-conn-burst=20", "--kube-conn-qps=20"] => ["--kube-conn-burst", "greater than --kube-conn-qps"];
    gateway_resync: ["wg", "--informer-cache-resync-period=30s"] => ["--informer-cache-resync-period", "at least 5m0s"];
    gateway_gopool: ["wg", "--gopool-worker-factor=99"] => ["--gopool-worker-factor", "'99'"];
    // device-manager serve
    serve_manufacturer: ["dm", "serve", "--manufacturer=nvidia,NVIDIA"] => ["--manufacturer", "'NVIDIA'", "allowed are"];
    serve_monitor_period: ["dm", "serve", "--monitor-period=0s"] => ["--monitor-period", "'0s'", "at least 1s"];
    serve_secure_port: ["device-manager", "serve", "--secure-port=0"] => ["--secure-port", "'0'"];
    serve_no_sliced: ["dm", "serve", "--no-sliced=yes"] => ["--no-sliced", "'yes'", "true or false"];
    serve_no_partitioned: ["dm", "serve", "--no-partitioned=on"] => ["--no-partitioned", "'on'", "true or false"];
    serve_no_shared: ["dm", "serve", "--no-shared=2"] => ["--no-shared", "'2'", "true or false"];
    serve_burst_above_qps: ["dm", "serve", "--kube-conn-burst=10", "--kube-conn-qps=10"] => ["--kube-conn-burst", "greater than --kube-conn-qps"];
    // device-manager detect / monitor / preflight
    detect_manufacturer: ["dm", "detect", "--manufacturer=intel"] => ["--manufacturer", "'intel'", "allowed are"];
    detect_no_pci_check: ["dm", "detect", "--no-pci-check=perhaps"] => ["--no-pci-check", "'perhaps'", "true or false"];
    detect_no_fast_failed: ["dm", "detect", "--no-fast-failed=x"] => ["--no-fast-failed", "'x'", "true or false"];
    monitor_manufacturer: ["dm", "monitor", "--manufacturer=amd,"] => ["--manufacturer", "''", "allowed are"];
    preflight_runtime: ["dm", "preflight", "--runtime=podman"] => ["--runtime", "'podman'", "docker", "nerdctl", "ctr"];
    preflight_dry_run: ["dm", "preflight", "--dry-run=please"] => ["--dry-run", "'please'", "true or false"];
    preflight_manufacturer: ["dm", "preflight", "--manufacturer=xpu"] => ["--manufacturer", "'xpu'"];
    // model-manager
    mm_node_name_required: ["model-manager"] => ["missing required flag --node-name"];
    mm_node_name_shape: ["mm", "--node-name=GPU_Node"] => ["--node-name", "'GPU_Node'", "DNS labels"];
    mm_secure_port: ["mm", "--node-name=n1", "--secure-port=99999"] => ["--secure-port", "'99999'"];
    mm_burst: ["mm", "--node-name=n1", "--kube-conn-burst=1"] => ["--kube-conn-burst", "at least 10"];
    // global flags
    global_verbosity: ["-v=high", "worker"] => ["--v", "'high'", "0 to 10"];
    global_verbosity_range: ["worker", "-v=11"] => ["--v", "'11'", "0 to 10"];
    global_vmodule: ["worker", "--vmodule=gateway"] => ["--vmodule", "'gateway'", "target=N"];
    global_backtrace_at: ["worker", "--log_backtrace_at=store.rs"] => ["--log_backtrace_at", "'store.rs'", "file:line"];
    global_logtostderr: ["worker", "--logtostderr=nope"] => ["--logtostderr", "'nope'", "true or false"];
    global_print_cmdline: ["worker", "--print-cmdline=sure"] => ["--print-cmdline", "'sure'", "true or false"];
    // shape of the command line
    unknown_flag: ["worker", "--no-such-flag"] => ["'--no-such-flag'"];
    unknown_command: ["frobnicate"] => ["'frobnicate'"];
    unknown_dm_command: ["dm", "diagnose"] => ["'diagnose'"];
}

#[test]
fn environment_values_are_validated_like_flags() {
    let out = operator()
        .args(["worker"])
        .env("GPUSTACK_WORKER_SECURE_PORT", "0")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("'--secure-port"), "{}", stderr(&out));
}

#[test]
fn print_cmdline_shows_flags_from_the_environment() {
    let out = operator()
        .args(["wg", "--secure-port=9000", "--print-cmdline"])
        .env("GPUSTACK_WORKER_GATEWAY_SECURE_PORT", "1")
        .env("GPUSTACK_WORKER_GATEWAY_WORKER_CONN_MODE", "loopback")
        .env(
            "GPUSTACK_WORKER_GATEWAY_BIND_UNIX_PATH",
            "$GATEWAY_DIR/gw.sock",
        )
        .env("GATEWAY_DIR", "/run/gpustack")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &words[1..],
        [
            "wg",
            "--secure-port=9000",
            "--print-cmdline",
            "--bind-unix-path=/run/gpustack/gw.sock",
            "--worker-conn-mode=loopback",
        ],
        "{line}"
    );
    assert!(line.ends_with('\n') && line.lines().count() == 1);
}

#[test]
fn command_line_wins_over_the_environment() {
    let out = operator()
        .args(["dm", "detect", "--manufacturer=amd", "--print-cmdline"])
        .env("GPUSTACK_DEVICE_MANAGER_MANUFACTURER", "intel")
        .env("GPUSTACK_DEVICE_MANAGER_NO_PCI_CHECK", "true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    assert!(!line.contains("intel"), "{line}");
    assert!(line.trim_end().ends_with("--no-pci-check=true"), "{line}");
}

#[test]
fn binary_name_selects_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("worker-gateway");
    std::os::unix::fs::symlink(gpustack_tests::binary(), &link).unwrap();
    let out = std::process::Command::new(&link)
        .args(["--print-cmdline", "--worker-conn-mode=loopback"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let line = stdout(&out);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &words[1..],
        [
            "worker-gateway",
            "--print-cmdline",
            "--worker-conn-mode=loopback"
        ]
    );
}

#[test]
fn worker_with_an_unreadable_kubeconfig_says_which_and_fails() {
    let args = &["worker", "--kubeconfig=/nonexistent/kubeconfig"][..];
    let out = run(args);
    assert_eq!(out.status.code(), Some(1), "{args:?}");
    assert!(
        stderr(&out).contains("reading --kubeconfig /nonexistent/kubeconfig"),
        "{args:?}: {}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
}

/// Bad `--upstreams` files: each is refused before anything starts, with one line naming the
/// flag and what is wrong.
#[test]
fn gateway_rejects_bad_upstreams_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.kubeconfig"), "apiVersion: v1\n").unwrap();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "names.yaml",
            "- {name: East_1, kubeconfig: a.kubeconfig}\n",
            &["DNS label", "East_1"],
        ),
        (
            "twice.yaml",
            "- {name: a, kubeconfig: a.kubeconfig}\n- {name: a, kubeconfig: a.kubeconfig}\n",
            &["listed twice"],
        ),
        ("nokc.yaml", "- {name: a}\n", &["kubeconfig is required"]),
        (
            "unreadable.yaml",
            "- {name: a, kubeconfig: missing.kubeconfig}\n",
            &["missing.kubeconfig", "not readable"],
        ),
        ("garbage.yaml", "{name: a}\n", &["not a YAML list"]),
    ];
    for (file, text, expected) in cases {
        let path = dir.path().join(file);
        std::fs::write(&path, text).unwrap();
        let flag = format!("--upstreams={}", path.display());
        let mut fragments = vec!["--upstreams"];
        fragments.extend_from_slice(expected);
        assert_rejected(&["wg", "--worker-conn-mode=loopback", &flag], &fragments);
    }
    // In gpustack-api mode an entry without a kubeconfig goes through the GPUStack server's
    // proxy; in loopback mode it has no way to its upstream.
    let proxied = dir.path().join("proxied.yaml");
    std::fs::write(&proxied, "- {name: a, token: t}\n").unwrap();
    assert_rejected(
        &[
            "wg",
            "--worker-conn-mode=loopback",
            &format!("--upstreams={}", proxied.display()),
        ],
        &["--upstreams", "kubeconfig is required in loopback mode"],
    );
}

#[test]
fn gateway_with_an_unusable_data_dir_says_so_in_one_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, "").unwrap();
    let out = run(&[
        "wg",
        "--bind-unix-path=",
        &format!("--data-dir={}", file.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("not-a-dir"),
        "{err}"
    );
    assert!(stdout(&out).is_empty());
}

#[test]
fn help_lists_reference_flags_with_defaults() {
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["worker", "--help"],
            &[
                "--secure-port <SECURE_PORT>",
                "[default: 31443]",
                "--kube-leader-lease <DURATION>",
                "[default: 15s]",
                "--kube-conn-timeout <DURATION>",
                "[default: 5m0s]",
                "--informer-cache-resync-period <DURATION>",
                "[default: 1h0m0s]",
                "[default: gpustack-operator-model-manager]",
                "[default: worker.gpustack.ai]",
                "--aggressive-event-filtering",
                "--gateway-socket <PATH>",
                "--gateway-kubeconfig <FILE>",
                "--cors-allowed-origins",
                "--audit-webhook-config-file",
                "Global flags",
                "--log_backtrace_at",
            ],
        ),
        (
            &["wg", "--help"],
            &[
                "[default: /var/lib/gpustack/gpustack-operator-worker-gateway.sock]",
                "[default: gpustack-api]",
                "[default: 30080]",
                "[default: 30s]",
                "--worker-conn-gpustack-api-scheme",
            ],
        ),
        (
            &["dm", "serve", "--help"],
            &[
                "--no-sliced",
                "--no-partitioned",
                "--no-shared",
                "--no-pci-check",
                "--no-fast-failed",
                "[default: 15s]",
                "[default: /var/lib/kubelet/device-plugins/kubelet.sock]",
                "[default: 32443]",
            ],
        ),
        (
            &["dm", "preflight", "--help"],
            &[
                "--dry-run",
                "--probe-image",
                "[default: /host]",
                "--runtime",
            ],
        ),
        (
            &["mm", "--help"],
            &[
                "--node-name <NODE_NAME>",
                "[default: /var/lib/kubelet]",
                "[default: /var/lib/gpustack/models]",
                "--csi-socket",
                "[default: 32444]",
            ],
        ),
        (
            &["--help"],
            &[
                "worker",
                "worker-gateway",
                "device-manager",
                "model-manager",
                "[alias: w]",
            ],
        ),
    ];
    for (args, fragments) in cases {
        let out = run(args);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        // Help is wrapped to the terminal; compare with whitespace collapsed.
        let help = stdout(&out)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        for fragment in *fragments {
            assert!(
                help.contains(fragment),
                "{args:?} help lacks {fragment:?}:\n{help}"
            );
        }
    }
}

#[test]
fn version_is_printed() {
    let out = run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        stdout(&out).trim(),
        format!("gpustack-operator {}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn no_command_prints_help_and_fails() {
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Usage: gpustack-operator"));
}

#[test]
fn gateway_with_a_cert_dir_lacking_its_pair_names_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let certs = dir.path().join("certs");
    std::fs::create_dir(&certs).unwrap();
    let out = run(&[
        "wg",
        "--embedded-cluster=demo",
        "--bind-unix-path=",
        "--secure-port=1",
        &format!("--data-dir={}", dir.path().join("data").display()),
        &format!("--cert-dir={}", certs.display()),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("error: ") && last.contains("tls.crt"),
        "{err}"
    );
}
