//! Bounds that relate two flags. Each violation is one line naming the flag, its value and what
//! is allowed, in the same shape as clap's own value errors.

use super::args::{Command, DeviceManagerCommand, KubeConnFlags, LeaderElectionFlags};

pub fn validate(command: &Command) -> Result<(), String> {
    match command {
        Command::Worker(a) => {
            kube_conn(&a.kube)?;
            leader_election(&a.leader)
        }
        Command::WorkerGateway(a) => {
            kube_conn(&a.kube)?;
            if a.worker_readiness_check_timeout > a.kube.kube_conn_timeout {
                return Err(invalid(
                    "--worker-readiness-check-timeout",
                    a.worker_readiness_check_timeout,
                    format!(
                        "must not exceed --kube-conn-timeout ({})",
                        a.kube.kube_conn_timeout
                    ),
                ));
            }
            if let Some(u) = &a.upstreams {
                let mode = a.conn_mode();
                gpustack_gateway::mirror::config::resolve_all(&u.entries, &mode)
                    .map_err(|e| invalid("--upstreams", u.path.display(), e.to_string()))?;
            }
            Ok(())
        }
        Command::DeviceManager(DeviceManagerCommand::Serve(a)) => kube_conn(&a.kube),
        Command::ModelManager(a) => kube_conn(&a.kube),
        Command::DeviceManager(_) => Ok(()),
    }
}

fn invalid(flag: &str, value: impl std::fmt::Display, allowed: String) -> String {
    format!("invalid value '{value}' for '{flag}': {allowed}")
}

fn kube_conn(k: &KubeConnFlags) -> Result<(), String> {
    if f64::from(k.kube_conn_burst) <= k.kube_conn_qps {
        return Err(invalid(
            "--kube-conn-burst",
            k.kube_conn_burst,
            format!("must be greater than --kube-conn-qps ({})", k.kube_conn_qps),
        ));
    }
    Ok(())
}

fn leader_election(l: &LeaderElectionFlags) -> Result<(), String> {
    if l.kube_leader_lease <= l.kube_leader_renew_timeout {
        return Err(invalid(
            "--kube-leader-lease",
            l.kube_leader_lease,
            format!(
                "must be greater than --kube-leader-renew-timeout ({})",
                l.kube_leader_renew_timeout
            ),
        ));
    }
    Ok(())
}
