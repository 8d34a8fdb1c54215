//! Probe containers as data: the `run` argv built from an injection (sorted, unprivileged,
//! labelled), the script they run, and the verdicts read from what they printed. Pure.

use std::path::Path;

use gpustack_api::labels;

use super::{
    injection::ContainerInjection,
    runtime::{Cli, Engine},
};

pub const MAPS_BEGIN: &str = "gpustack-preflight-maps-begin";
pub const MAPS_END: &str = "gpustack-preflight-maps-end";
pub const READER_BEGIN: &str = "gpustack-preflight-reader-begin";
pub const READER_END: &str = "gpustack-preflight-reader-end";
/// Printed by a co-tenancy probe once it has shown everything; it then waits for its stdin to
/// close, so that both slices are provably alive at once.
pub const READY: &str = "gpustack-preflight-ready";

/// The vendor's own reader of the cap a slice runs under, as a shell command line.
pub fn reader_command(reader: Option<&str>) -> String {
    match reader {
        Some(r) => {
            let program = r.split_whitespace().next().unwrap_or(r);
            // Only the reader's own output counts: the loader's and the shim's messages go to
            // stderr, and the maps block already shows whether the shim loaded.
            format!("if [ -x {program} ]; then {r} 2>/dev/null; fi")
        }
        None => ":".into(),
    }
}

/// The probe's script: its own memory map between markers (the loader has applied the injected
/// preload by then), then the reader's output between markers. With `wait`, it announces that it
/// is done and blocks until its stdin closes.
pub fn script(reader: Option<&str>, wait: bool) -> String {
    let mut s = format!(
        "exec 2>&1; echo {MAPS_BEGIN}; cat /proc/self/maps; echo {MAPS_END}; echo {READER_BEGIN}; {}; echo {READER_END}",
        reader_command(reader)
    );
    if wait {
        s.push_str(&format!(
            "; echo {READY}; read gpustack_preflight_barrier || true"
        ));
    }
    s
}

/// Everything that makes one probe container.
pub struct ProbeSpec<'a> {
    pub name: &'a str,
    pub image: &'a str,
    pub injection: &'a ContainerInjection,
    /// Where the engine sees the host's root (`/` when the engine runs on the host).
    pub engine_root: &'a Path,
    /// The vendor runtime to ask for (`nvidia`, `ascend`), where the manufacturer has one.
    pub vendor_runtime: Option<&'a str>,
    pub script: &'a str,
    /// Keep stdin open (co-tenancy's barrier).
    pub interactive: bool,
}

/// A host path as the engine sees it.
pub fn engine_path(engine_root: &Path, host_path: &str) -> String {
    engine_root
        .join(host_path.trim_start_matches('/'))
        .display()
        .to_string()
}

/// `<cli> [--address --namespace] run --rm …`: options in a fixed, sorted order, never
/// `--privileged`.
pub fn run_argv(engine: &Engine, p: &ProbeSpec<'_>) -> Vec<String> {
    let mut argv = engine.base_argv();
    argv.extend(["run", "--rm"].map(str::to_owned));
    if p.interactive {
        argv.push("-i".into());
    }
    argv.push(format!("--name={}", p.name));
    argv.push(format!("--label={}=true", labels::PREFLIGHT));
    match (p.vendor_runtime, engine.cli) {
        (Some("nvidia"), Cli::Nerdctl) => argv.push("--gpus=all".into()),
        (Some(rt), _) => argv.push(format!("--runtime={rt}")),
        (None, _) => {}
    }
    for (k, v) in &p.injection.envs {
        argv.push("-e".into());
        argv.push(format!("{k}={v}"));
    }
    let mut mounts: Vec<_> = p.injection.mounts.iter().collect();
    mounts.sort_by(|a, b| a.container_path.cmp(&b.container_path));
    for m in mounts {
        argv.push("-v".into());
        argv.push(format!(
            "{}:{}{}",
            engine_path(p.engine_root, &m.host_path),
            m.container_path,
            if m.read_only { ":ro" } else { "" }
        ));
    }
    let mut devices: Vec<_> = p.injection.devices.iter().collect();
    devices.sort_by(|a, b| a.container_path.cmp(&b.container_path));
    for d in devices {
        argv.push(format!(
            "--device={}:{}:{}",
            engine_path(p.engine_root, &d.host_path),
            d.container_path,
            d.permissions
        ));
    }
    for (k, v) in &p.injection.annotations {
        argv.push(format!("--annotation={k}={v}"));
    }
    argv.push(p.image.to_owned());
    argv.extend(["/bin/sh".to_owned(), "-c".to_owned(), p.script.to_owned()]);
    argv
}

/// `argv` as one shell line, quoted where a shell would split or expand it.
pub fn shell_line(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./:=,@+%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The lines between `begin` and `end` (to the end of the output if `end` never came).
pub fn block<'a>(output: &'a str, begin: &str, end: &str) -> Option<Vec<&'a str>> {
    let mut lines = output.lines();
    lines.by_ref().find(|l| l.trim() == begin)?;
    Some(lines.take_while(|l| l.trim() != end).collect())
}

/// The pathname column of a `/proc/<pid>/maps` line, if it has one.
fn mapped_path(line: &str) -> Option<&str> {
    let mut rest = line.trim_start();
    for _ in 0..5 {
        let (_, tail) = rest.split_once(char::is_whitespace)?;
        rest = tail.trim_start();
    }
    (!rest.is_empty()).then_some(rest)
}

/// Whether the slicing runtime is loaded: a mapping whose path is exactly one of `shims`. A line
/// that merely names the path (the shim's greeting, or the loader's refusal) never counts.
#[derive(Debug, PartialEq, Eq)]
pub enum Loaded {
    /// The mapping lines, framed as the evidence block.
    Yes(String),
    /// No maps block at all: the container's script did not run.
    NoMaps,
    /// The block is there and the shim is not in it; the output's lines naming it, if any.
    NotMapped(Vec<String>),
}

pub fn runtime_loaded(output: &str, shims: &[String]) -> Loaded {
    let Some(maps) = block(output, MAPS_BEGIN, MAPS_END) else {
        return Loaded::NoMaps;
    };
    let mapped: Vec<&str> = maps
        .iter()
        .copied()
        .filter(|l| mapped_path(l).is_some_and(|p| shims.iter().any(|s| s == p)))
        .collect();
    if mapped.is_empty() {
        let naming = output
            .lines()
            .filter(|l| shims.iter().any(|s| l.contains(s.as_str())))
            .map(str::to_owned)
            .collect();
        return Loaded::NotMapped(naming);
    }
    let mut evidence = vec![MAPS_BEGIN, "…"];
    evidence.extend(mapped);
    evidence.push("…");
    evidence.push(MAPS_END);
    Loaded::Yes(evidence.join("\n") + "\n")
}

/// What the vendor's reader said about the cap.
#[derive(Debug, PartialEq, Eq)]
pub enum ReaderSaw {
    /// It printed nothing (nothing charged yet, or no reader): the cap is intent only.
    Nothing,
    /// It printed the cap; its lines.
    Cap(String),
    /// It printed something without the cap.
    Other(String),
}

/// Reads the reader block for `cap_mib` as a whole number.
pub fn reader_saw(output: &str, cap_mib: u64) -> ReaderSaw {
    let lines: Vec<&str> = block(output, READER_BEGIN, READER_END)
        .unwrap_or_default()
        .into_iter()
        .filter(|l| !l.trim().is_empty())
        .collect();
    if lines.is_empty() {
        return ReaderSaw::Nothing;
    }
    let text = lines.join("\n") + "\n";
    let cap = cap_mib.to_string();
    let shows = lines
        .iter()
        .any(|l| l.split(|c: char| !c.is_ascii_digit()).any(|n| n == cap));
    if shows {
        ReaderSaw::Cap(text)
    } else {
        ReaderSaw::Other(text)
    }
}

/// The slicing runtime's container paths: what the injected `/etc/ld.so.preload` names (read
/// from its host file through `read_host`), else every injected `.so`.
pub fn shim_paths(
    injection: &ContainerInjection,
    read_host: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let preload = injection
        .mounts
        .iter()
        .find(|m| m.container_path == "/etc/ld.so.preload")
        .and_then(|m| read_host(&m.host_path));
    let mut paths: Vec<String> = match preload {
        Some(text) => text
            .split_whitespace()
            .filter(|w| !w.starts_with('#'))
            .map(str::to_owned)
            .collect(),
        None => Vec::new(),
    };
    if paths.is_empty() {
        paths = injection
            .mounts
            .iter()
            .filter(|m| m.container_path.ends_with(".so"))
            .map(|m| m.container_path.clone())
            .collect();
    }
    paths
}

/// The last `n` lines of `text`, for evidence of a failure.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    lines[start..].join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::preflight::injection::{InjectedDevice, InjectedMount};

    const SHIM: &str = "/usr/local/vrocm/libvrocm.so";

    fn maps(lines: &[&str]) -> String {
        format!("{MAPS_BEGIN}\n{}\n{MAPS_END}\n", lines.join("\n"))
    }

    #[test]
    fn only_a_mapping_of_the_exact_path_proves_the_load() {
        let mapped =
            "7205a176b000-7205a176d000 r--p 00000000 fc:00 13006695   /usr/local/vrocm/libvrocm.so";
        let libc = "7f00-7f10 r-xp 00000000 fc:00 1   /usr/lib/x86_64-linux-gnu/libc.so.6";
        let refused = "ERROR: ld.so: object '/usr/local/vrocm/libvrocm.so' from /etc/ld.so.preload cannot be preloaded (invalid ELF header): ignored.";
        let greeting = "libvrocm: loaded /usr/local/vrocm/libvrocm.so";
        let shims = [SHIM.to_owned()];
        let cases: [(String, &str); 6] = [
            (maps(&[libc, mapped]), "yes"),
            (format!("{refused}\n{}", maps(&[libc])), "not"),
            // The greeting alone, even inside the block, is not a mapping.
            (format!("{greeting}\n{}", maps(&[libc, greeting])), "not"),
            // A look-alike path is not the shim.
            (
                maps(&["7f-8f r--p 0 fc:00 1 /usr/local/vrocm/libvrocm.so.bak"]),
                "not",
            ),
            (greeting.to_owned(), "nomaps"),
            (String::new(), "nomaps"),
        ];
        for (output, expected) in cases {
            let got = runtime_loaded(&output, &shims);
            let kind = match &got {
                Loaded::Yes(e) => {
                    assert!(e.starts_with(MAPS_BEGIN) && e.contains(mapped), "{e}");
                    "yes"
                }
                Loaded::NotMapped(_) => "not",
                Loaded::NoMaps => "nomaps",
            };
            assert_eq!(kind, expected, "{output}");
        }
        let Loaded::NotMapped(naming) =
            runtime_loaded(&format!("{refused}\n{}", maps(&[libc])), &shims)
        else {
            unreachable!()
        };
        assert_eq!(naming, [refused]);
    }

    #[test]
    fn the_reader_shows_the_cap_or_nothing() {
        let out = |reader: &str| format!("{}{READER_BEGIN}\n{reader}{READER_END}\n", maps(&[]));
        assert_eq!(reader_saw(&out(""), 8184), ReaderSaw::Nothing);
        assert_eq!(reader_saw(&out("\n  \n"), 8184), ReaderSaw::Nothing);
        assert_eq!(
            reader_saw(&out("GPU[0] memory limit: 8184 MiB\n"), 8184),
            ReaderSaw::Cap("GPU[0] memory limit: 8184 MiB\n".into())
        );
        assert!(matches!(
            reader_saw(&out("GPU[0] memory limit: 81840 MiB\n"), 8184),
            ReaderSaw::Other(_)
        ));
        assert_eq!(reader_saw("no markers", 1), ReaderSaw::Nothing);
    }

    #[test]
    fn argv_is_sorted_unprivileged_and_labelled() {
        let injection = ContainerInjection {
            envs: BTreeMap::from([
                ("ROCR_VISIBLE_DEVICES".into(), "GPU-1".into()),
                ("AMD_VISIBLE_DEVICES".into(), "none".into()),
            ]),
            mounts: vec![
                InjectedMount {
                    container_path: SHIM.into(),
                    host_path: "/var/lib/gpustack/operator/lib/amd/libvrocm.so".into(),
                    read_only: true,
                },
                InjectedMount {
                    container_path: "/etc/ld.so.preload".into(),
                    host_path: "/var/lib/gpustack/operator/lib/amd/ld.so.preload".into(),
                    read_only: true,
                },
            ],
            devices: vec![
                InjectedDevice {
                    container_path: "/dev/kfd".into(),
                    host_path: "/dev/kfd".into(),
                    permissions: "rw".into(),
                },
                InjectedDevice {
                    container_path: "/dev/dri/card1".into(),
                    host_path: "/dev/dri/card1".into(),
                    permissions: "rw".into(),
                },
            ],
            ..ContainerInjection::default()
        };
        let spec = ProbeSpec {
            name: "gpustack-preflight-1-0",
            image: "ubuntu:24.04",
            injection: &injection,
            engine_root: Path::new("/"),
            vendor_runtime: None,
            script: "echo hi",
            interactive: false,
        };
        let argv = run_argv(&Engine::docker(), &spec);
        assert!(!argv.iter().any(|a| a.contains("privileged")));
        assert_eq!(
            shell_line(&argv),
            "docker run --rm --name=gpustack-preflight-1-0 --label=gpustack.ai/preflight=true \
             -e AMD_VISIBLE_DEVICES=none -e ROCR_VISIBLE_DEVICES=GPU-1 \
             -v /var/lib/gpustack/operator/lib/amd/ld.so.preload:/etc/ld.so.preload:ro \
             -v /var/lib/gpustack/operator/lib/amd/libvrocm.so:/usr/local/vrocm/libvrocm.so:ro \
             --device=/dev/dri/card1:/dev/dri/card1:rw --device=/dev/kfd:/dev/kfd:rw \
             ubuntu:24.04 /bin/sh -c 'echo hi'"
        );
        let shifted = ProbeSpec {
            engine_root: Path::new("/srv/node"),
            ..spec
        };
        assert!(
            run_argv(&Engine::docker(), &shifted)
                .contains(&"--device=/srv/node/dev/kfd:/dev/kfd:rw".to_owned())
        );
        let preload = |p: &str| (p.ends_with("ld.so.preload")).then(|| format!("{SHIM}\n"));
        assert_eq!(shim_paths(&injection, &preload), [SHIM]);
        assert_eq!(shim_paths(&injection, &|_| None), [SHIM]);
    }
}
