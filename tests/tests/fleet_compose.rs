//! The fleet for people (`deploy/compose/`): the compose file is valid for the machine's
//! `docker-compose` and keeps every cluster on an internal network with the hub's mirror on all
//! of them; and `up.sh` brings the fleet up from local files so that `kubectl get clusters`,
//! `devices.fleet.gpustack.ai` and `instancetypes.fleet.gpustack.ai` answer at the hub within a
//! minute of the command (the image is built from this build's binary first, as the other
//! Docker tests do, and the nodes' fixture trees written), the Devices coming from each node's
//! `device-manager serve`. `down.sh` removes it, also when the test fails.

use std::{
    path::PathBuf,
    process::{Command, Output},
    time::{Duration, Instant},
};

use gpustack_tests::{
    docker::{build_image, require_engine},
    embedded::free_port,
    fleet::docker_output,
    wait::poll_until,
};

fn compose_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/compose")
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_compose_file_keeps_each_cluster_on_an_internal_network_and_the_hub_on_all() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("docker-compose")
        .arg("-f")
        .arg(compose_dir().join("docker-compose.yml"))
        .arg("config")
        .env("GPUSTACK_FLEET_DIR", dir.path())
        .output()
        .expect("running docker-compose");
    let text = ok(&out, "docker-compose config");
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
    for c in ["east", "west", "north"] {
        assert_eq!(
            doc["networks"][c]["internal"].as_bool(),
            Some(true),
            "{c}: {text}"
        );
        let api = &doc["services"][format!("{c}-api")];
        let on = |service: &serde_yaml_ng::Value, network: &str| {
            service["networks"]
                .as_mapping()
                .is_some_and(|m| m.contains_key(network))
        };
        assert!(on(api, c), "{c}-api on {c}");
        assert_eq!(api["networks"].as_mapping().map(|m| m.len()), Some(1));
        assert!(on(&doc["services"]["hub-mirror"], c), "hub-mirror on {c}");
        // Docker picks subnets and addresses: fixed ones could collide with the host's.
        assert!(
            doc["networks"][c]["ipam"].is_null(),
            "{c}'s subnet is fixed"
        );
        // The worker and the node's agent share the API's network namespace, as in a Pod.
        for part in ["worker", "dm"] {
            assert_eq!(
                doc["services"][format!("{c}-{part}")]["network_mode"].as_str(),
                Some(format!("service:{c}-api").as_str()),
                "{c}-{part}"
            );
        }
        let agent = &doc["services"][format!("{c}-dm")]["command"];
        assert_eq!(
            agent[0].as_str(),
            Some("device-manager"),
            "{c}-dm: {agent:?}"
        );
        assert_eq!(agent[1].as_str(), Some("serve"), "{c}-dm: {agent:?}");
        // Flags only: a comma in an unquoted flow-list item splits one flag into two items
        // (the mixed node's `--manufacturer=nvidia,amd` did, and its agent exited).
        let args = agent.as_sequence().map(|a| &a[2..]).unwrap_or_default();
        assert!(
            args.iter()
                .all(|a| a.as_str().is_some_and(|a| a.starts_with("--"))),
            "{c}-dm: {agent:?}"
        );
    }
    assert!(
        !text.contains("ipv4_address") && !text.contains("subnet"),
        "a fixed address or subnet: {text}"
    );
}

/// The fleet `up.sh` started; `down.sh` on drop.
struct Up {
    env: Vec<(String, String)>,
    image: String,
}

impl Up {
    fn script(&self, name: &str) -> Output {
        Command::new(compose_dir().join(name))
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap_or_else(|e| panic!("running {name}: {e}"))
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.script("down.sh");
        let _ = docker_output(&["rmi", "-f", &self.image]);
    }
}

#[test]
fn up_sh_brings_the_fleet_up_and_kubectl_answers_at_the_hub_within_a_minute() {
    require_engine();
    let dir = tempfile::tempdir().unwrap();
    let image = format!("gpustack/gpustack-operator:compose-{}", std::process::id());
    build_image(&image);
    let fleet_dir = dir.path().join("fleet");
    let up = Up {
        env: vec![
            ("GPUSTACK_IMAGE".into(), image.clone()),
            ("GPUSTACK_FLEET_DIR".into(), fleet_dir.display().to_string()),
            (
                "GPUSTACK_FLEET_PROJECT".into(),
                format!("gpustack-fleet-test-{}", std::process::id()),
            ),
            ("GPUSTACK_HUB_PORT".into(), free_port().to_string()),
        ],
        image,
    };
    // The nodes' fixtures as `fleet-hosts` writes them (up.sh would build and run it), from
    // this build's NVML stand-in.
    gpustack_tests::fleet_hosts::write_compose_hosts(&fleet_dir.join("hosts"));
    let started = Instant::now();
    ok(&up.script("up.sh"), "up.sh");
    let kubeconfig = fleet_dir.join("hub.kubeconfig");
    let minute = Duration::from_secs(60);
    // Every node's cards, the mixed node's too (its agent is given two manufacturers, a
    // comma inside the compose file's command list).
    for (resource, want) in [
        ("clusters", &["Ready"][..]),
        (
            "devices.fleet.gpustack.ai",
            &[
                "NVIDIA H100 80GB HBM3",
                "AMD Instinct MI210",
                "AMD Radeon RX 7800 XT",
            ][..],
        ),
        ("instancetypes.fleet.gpustack.ai", &["instinct-mi210"][..]),
    ] {
        let mut last = String::new();
        let answered = poll_until(minute.saturating_sub(started.elapsed()), || {
            let out = Command::new("kubectl")
                .arg(format!("--kubeconfig={}", kubeconfig.display()))
                .args(["get", resource])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            last = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
            let all = resource != "clusters"
                || ["east", "west", "north"].iter().all(|c| text.contains(c));
            let shown = want.iter().all(|w| text.contains(w));
            (out.status.success() && shown && all).then_some(text)
        });
        match answered {
            Some(text) => eprintln!("$ kubectl get {resource}\n{text}"),
            None => panic!("kubectl get {resource} within a minute of up.sh:\n{last}"),
        }
    }
    let took = started.elapsed();
    eprintln!("up.sh to every kubectl answer: {took:?}");
    assert!(took < Duration::from_secs(60), "took {took:?}");
}
