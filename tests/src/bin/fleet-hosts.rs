//! `fleet-hosts DIR`: writes the node fixtures of `deploy/compose/`'s clusters under `DIR`
//! (`DIR/east`, `DIR/west`, `DIR/north`), each mounted by that cluster's `device-manager serve`
//! container, with the Node the kubelet would write beside it. The NVML stand-in is copied
//! from `GPUSTACK_FAKE_NVML_LIB` (`up.sh` builds it and names it).

use std::{path::PathBuf, process::ExitCode};

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let (Some(dir), None) = (args.next(), args.next()) else {
        eprintln!("usage: fleet-hosts DIR");
        return ExitCode::from(2);
    };
    gpustack_tests::fleet_hosts::write_compose_hosts(&PathBuf::from(dir));
    ExitCode::SUCCESS
}
