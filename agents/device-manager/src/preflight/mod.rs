//! `device-manager preflight`: proves, on a node, in its real container runtime, that each
//! allocation mode its allocators offer works — with probe containers that get the allocator's
//! own injection ([`injection::AllocatorInjection`]) and nothing more.
//!
//! The run: check the host root (else a dry run), take the lock, resolve the runtime, sweep
//! stale probes, detect, then per manufacturer the detection block, the driver rows and, per
//! sliceable card, the probe rows. `--dry-run` starts and changes nothing: every row that would
//! have run carries its command at depth `simulated`.
//!
//! Pure parts: [`report`], [`runtime`] (over a host tree), [`detection`], [`rows`], [`probe`].
//! IO: [`host`] (chroot, lock) and [`run`] here.

pub(crate) mod detection;
pub(crate) mod host;
pub mod injection;
pub(crate) mod network;
pub(crate) mod probe;
pub mod report;
pub(crate) mod rows;
pub mod runtime;
pub(crate) mod toggle;

use std::{
    any::Any,
    fs, io,
    panic::{AssertUnwindSafe, catch_unwind},
    path::{Path, PathBuf},
    time::Duration,
};

use gpustack_api::{
    Manufacturer,
    devices::{Accelerator, DevicesGroup},
    labels,
    time::Timestamp,
};

use crate::{
    detect::{self, Options as DetectOptions},
    detector::DetectError,
    system_root::SystemRoot,
    vendors,
};
use host::{HostError, HostShell};
use injection::{AllocatorInjection, ContainerInjection, SliceRequest};
use probe::{Loaded, ProbeSpec, ReaderSaw};
use report::{
    Check, Depth, Detection, Mode, PreflightGroup, PreflightReport, State, TopologySection,
};
use runtime::{Cli, Endpoint, Engine, Resolution};

/// Where the operator's staged libraries live on the host (the allocator mounts from here).
pub const HOST_LIB_DIR: &str = "/var/lib/gpustack/operator/lib";
/// The in-image tree staged there, resolved under the system root.
pub const IMAGE_LIB_DIR: &str = "/etc/gpustack/lib";
/// Preflight's rendered files (probe work directories), swept at the end of a run.
pub const HOST_WORK_DIR: &str = "/var/lib/gpustack/operator/preflight";

/// What to check and how.
#[derive(Clone, Debug)]
pub struct Options {
    /// The manufacturers to check.
    pub manufacturers: Vec<Manufacturer>,
    /// Skip the PCI scan (`--no-pci-check`).
    pub no_pci_check: bool,
    /// Print the probes and change nothing on the host (`--dry-run`).
    pub dry_run: bool,
    /// The probe image (`--probe-image`), else the manufacturer's own; without one, probes are only
    /// printed.
    pub probe_image: Option<String>,
    /// Where the host's root is mounted (`--host-root`).
    pub host_root: PathBuf,
    /// The container CLI to probe with (`--runtime`); `None` resolves it from the kubelet's CRI
    /// endpoint.
    pub runtime: Option<Cli>,
    /// Where the container engine sees the host's root: `/` when the engine runs on the host
    /// (the DaemonSet case), elsewhere when the host root is a tree the engine reaches by
    /// another path.
    pub engine_root: PathBuf,
    /// The `chroot` executable.
    pub chroot: PathBuf,
    /// How long one host command or probe may take.
    pub command_timeout: Duration,
}

/// The report, and what the operator should read on standard error beside it.
pub struct Outcome {
    /// The output document.
    pub report: PreflightReport,
    /// Things the operator should know (detection warnings, skipped probes), for stderr.
    pub warnings: Vec<String>,
    /// The container runtime resolved and why, when the run got that far.
    pub runtime: Option<String>,
}

/// Runs a preflight. `system` is this process's own view (detection reads it; the in-image
/// libraries are there); the host is reached under `opts.host_root`.
pub fn run(
    opts: &Options,
    system: &SystemRoot,
    env: &dyn Fn(&str) -> Option<String>,
    injection: &dyn AllocatorInjection,
) -> Outcome {
    let mut warnings = Vec::new();
    let mut notes = Vec::new();
    let host = SystemRoot::new(&opts.host_root);
    let shell = HostShell {
        chroot: opts.chroot.clone(),
        root: opts.host_root.clone(),
        timeout: opts.command_timeout,
    };
    let mut manufacturers = opts.manufacturers.clone();
    manufacturers.sort();
    manufacturers.dedup();

    let mut dry_run = opts.dry_run;
    let missing = host::missing_dirs(&opts.host_root);
    if !missing.is_empty() {
        let note = format!(
            "{} is not a host root (no {}): mount the host with -v /:{0}; nothing was started (dry run)",
            opts.host_root.display(),
            missing.join(", ")
        );
        if !dry_run {
            warnings.push(note.clone());
        }
        notes.push(note);
        dry_run = true;
    }

    let _lock = if dry_run {
        None
    } else {
        match host::lock(&opts.host_root) {
            Ok(l) => Some(l),
            Err(e) => {
                warnings.push(e.to_string());
                return Outcome {
                    report: locked_out(&manufacturers, &e.to_string(), system, &host),
                    warnings,
                    runtime: None,
                };
            }
        }
    };

    let resolution = runtime::resolve(opts.runtime, &host, &|c| shell.has_command(c));
    tracing::info!("preflight: container runtime {resolution}");
    if let Some(why) = &resolution.emit_only {
        notes.push(format!("probes are printed, not run: {why}"));
    }
    if let Some(w) = network_namespace_mismatch(&opts.host_root) {
        warnings.push(w);
    }

    let run_id = format!(
        "{}-{}",
        std::process::id(),
        Timestamp::now_local().instant.as_millisecond()
    );
    let ctx = Ctx {
        opts,
        system,
        host: &host,
        shell: &shell,
        injection,
        resolution: &resolution,
        dry_run,
        run_id: &run_id,
    };

    let mut sweep_rows = Vec::new();
    if !dry_run && resolution.emit_only.is_none() {
        match ctx.sweep() {
            Ok(0) => {}
            Ok(n) => warnings.push(format!("removed {n} stale preflight container(s)")),
            Err(why) => sweep_rows.push(
                Check::new(
                    "",
                    "stale-container-sweep",
                    Mode::Unnamed,
                    State::Unavailable,
                    Depth::Declared,
                )
                .reason(format!(
                    "containers labelled {}=true could not be removed: {why}",
                    labels::PREFLIGHT
                ))
                .command(probe::shell_line(&shell.argv(&ctx.sweep_list_argv()))),
            ),
        }
    }

    let mut groups = Vec::new();
    for &m in &manufacturers {
        // A panic inside one manufacturer's checks is that manufacturer's row, not the run's end.
        let mut g = match catch_unwind(AssertUnwindSafe(|| ctx.manufacturer(m, env, &mut warnings)))
        {
            Ok(g) => g,
            Err(payload) => panicked_group(m, &panic_message(payload.as_ref())),
        };
        g.checks.splice(0..0, sweep_rows.iter().cloned());
        let mut group_notes = notes.clone();
        group_notes.extend(g.note.take());
        if g.checks.is_empty() && group_notes.is_empty() {
            group_notes.push(match g.detection.state {
                State::NotDeclared => format!("nothing to check: no {m} accelerator on this node"),
                State::Unavailable => "no rows: detection is unavailable".into(),
                State::Ok => "no rows: no card offers a mode preflight checks".into(),
            });
        }
        g.note = (!group_notes.is_empty()).then(|| group_notes.join("; "));
        groups.push(g);
    }

    if !dry_run {
        // Probes are started with --rm; a probe killed by the timeout may still be there.
        if resolution.emit_only.is_none() {
            let _ = ctx.sweep();
        }
        let dir = host.path(format!("{HOST_WORK_DIR}/{run_id}"));
        if let Err(e) = fs::remove_dir_all(&dir)
            && e.kind() != io::ErrorKind::NotFound
        {
            warnings.push(format!("could not remove {}: {e}", dir.display()));
        }
    }

    Outcome {
        report: PreflightReport {
            accelerators: groups,
            network: network::section(&network::read_ports(system)),
            topology: topology_section(&host),
        },
        warnings,
        runtime: Some(resolution.to_string()),
    }
}

/// What a caught panic said.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// The row that stands for checks a panic cut short: never `ok`, so the run fails.
fn panicked_row(accelerator: &str, reason: &str) -> Check {
    Check::new(
        accelerator,
        "preflight-panicked",
        Mode::Unnamed,
        State::Unavailable,
        Depth::Declared,
    )
    .reason(reason)
}

/// A manufacturer whose checks panicked before its group was built: detection unknown.
fn panicked_group(m: Manufacturer, message: &str) -> PreflightGroup {
    let why = format!("the {m} checks panicked: {message}");
    PreflightGroup {
        manufacturer: m,
        timestamp: Timestamp::now_local(),
        detection: Detection {
            state: State::Unavailable,
            depth: Depth::Declared,
            accelerators: 0,
            detail: None,
            reason: Some(why.clone()),
            host: None,
        },
        checks: vec![panicked_row("", &why)],
        note: None,
    }
}

/// The report when another run holds the lock: every detection unavailable, nothing else done.
fn locked_out(
    manufacturers: &[Manufacturer],
    why: &str,
    system: &SystemRoot,
    host: &SystemRoot,
) -> PreflightReport {
    PreflightReport {
        accelerators: manufacturers
            .iter()
            .map(|&m| PreflightGroup {
                manufacturer: m,
                timestamp: Timestamp::now_local(),
                detection: Detection {
                    state: State::Unavailable,
                    depth: Depth::Declared,
                    accelerators: 0,
                    detail: None,
                    reason: Some(format!("{why}; wait for it to finish")),
                    host: None,
                },
                checks: Vec::new(),
                note: Some(format!("not run: {why}")),
            })
            .collect(),
        network: network::section(&network::read_ports(system)),
        topology: topology_section(host),
    }
}

/// The kubelet's topology manager policy, from the same sources as the CRI endpoint.
fn topology_section(host: &SystemRoot) -> TopologySection {
    let (policy, note) =
        match runtime::kubelet_setting(host, "topology-manager-policy", "topologyManagerPolicy") {
            Endpoint::Named { endpoint, source } => (endpoint, Some(format!("from {source}"))),
            Endpoint::Conflict(_) => (
                "unknown".into(),
                Some("the kubelet's drop-ins disagree".into()),
            ),
            Endpoint::None
                if runtime::kubelet_cmdline(host).is_some()
                    || host.path("/var/lib/kubelet/config.yaml").exists() =>
            {
                (
                    "none".into(),
                    Some("the kubelet's default: no policy is configured".into()),
                )
            }
            Endpoint::None => (
                "unknown".into(),
                Some("no kubelet configuration on this host".into()),
            ),
        };
    TopologySection {
        timestamp: Timestamp::now_local(),
        policy,
        depth: Depth::Declared,
        note,
    }
}

/// Warns when this process is not in the host's network namespace: the host's CLI entered
/// through chroot would then resolve and pull through a network it cannot reach.
fn network_namespace_mismatch(host_root: &Path) -> Option<String> {
    let own = fs::read_link("/proc/self/ns/net").ok()?;
    let hosts = fs::read_link(host_root.join("proc/1/ns/net")).ok()?;
    (own != hosts).then(|| {
        format!(
            "this process's network namespace ({}) is not the host's ({}): run with --network=host, or the host's CLI cannot pull images",
            own.display(),
            hosts.display()
        )
    })
}

/// Everything a run shares.
struct Ctx<'a> {
    opts: &'a Options,
    system: &'a SystemRoot,
    host: &'a SystemRoot,
    shell: &'a HostShell,
    injection: &'a dyn AllocatorInjection,
    resolution: &'a Resolution,
    dry_run: bool,
    run_id: &'a str,
}

/// Two slices of one card started together: half and a quarter of its memory.
const SLICE_SHARES: [(u32, u64); 2] = [(50, 2), (25, 4)];

impl Ctx<'_> {
    fn engine(&self) -> &Engine {
        &self.resolution.engine
    }

    fn sweep_list_argv(&self) -> Vec<String> {
        let mut argv = self.engine().base_argv();
        argv.extend([
            "ps".into(),
            "-a".into(),
            "-q".into(),
            "--filter".into(),
            format!("label={}=true", labels::PREFLIGHT),
        ]);
        argv
    }

    /// Removes every container labelled as a preflight probe; how many there were.
    fn sweep(&self) -> Result<usize, HostError> {
        let listed = self
            .shell
            .run(&self.sweep_list_argv())
            .map_err(HostError::Shell)?;
        if !listed.ok() {
            return Err(HostError::Refused(listed.why()));
        }
        let ids: Vec<String> = listed
            .stdout
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if ids.is_empty() {
            return Ok(0);
        }
        let mut argv = self.engine().base_argv();
        argv.extend(["rm".into(), "-f".into()]);
        argv.extend(ids.iter().cloned());
        let removed = self.shell.run(&argv).map_err(HostError::Shell)?;
        if removed.ok() {
            Ok(ids.len())
        } else {
            Err(HostError::Refused(removed.why()))
        }
    }

    fn manufacturer(
        &self,
        m: Manufacturer,
        env: &dyn Fn(&str) -> Option<String>,
        warnings: &mut Vec<String>,
    ) -> PreflightGroup {
        let timestamp = Timestamp::now_local();
        let detected = detect::detect(
            self.system,
            env,
            &DetectOptions {
                manufacturers: vec![m],
                no_pci_check: self.opts.no_pci_check,
            },
        );
        warnings.extend(detected.warnings.iter().map(|w| format!("{m}: {w}")));
        let mut checks = Vec::new();
        let failure = detected.failures.first().map(|(_, e)| {
            if let DetectError::Panicked { message, .. } = e {
                checks.push(
                    Check::new(
                        "",
                        "preflight-panicked",
                        Mode::Unnamed,
                        State::Unavailable,
                        Depth::Declared,
                    )
                    .reason(format!("the {m} detector panicked: {message}")),
                );
            }
            e
        });
        let groups = detected.items;
        let missing_mounts: Vec<String> = detection::vendor_mounts(m)
            .iter()
            .filter(|p| !self.system.path(p).exists())
            .map(|p| p.to_string())
            .collect();
        let host = m
            .spec()
            .host_cli
            .map(|cli| (cli.to_owned(), self.host_count(m, cli)));
        let detection = detection::block(detection::Inputs {
            manufacturer: m,
            detected: match failure {
                Some(e) => Err(e),
                None => Ok(&groups),
            },
            missing_mounts,
            host,
        });
        let mut group = PreflightGroup {
            manufacturer: m,
            timestamp,
            detection,
            checks,
            note: rows::tier_note(m),
        };
        if group.detection.state != State::Ok {
            if group.detection.state == State::NotDeclared {
                group.note = None;
            }
            return group;
        }
        for g in &groups {
            group.checks.extend(rows::driver_rows(m, g));
            if m == Manufacturer::Metax {
                group.checks.extend(g.accelerators.iter().map(|a| {
                    let create = rows::sgpu_dir(a)
                        .is_some_and(|d| self.system.path(format!("{d}/create")).exists());
                    rows::sgpu_mode(a, create)
                }));
            }
        }
        let sliceable: Vec<(&DevicesGroup, &Accelerator)> = groups
            .iter()
            .flat_map(|g| g.accelerators.iter().map(move |a| (g, a)))
            .filter(|(_, a)| rows::sliceable(a))
            .collect();
        if sliceable.is_empty() {
            return group;
        }
        let staging = if self.dry_run { Ok(()) } else { self.stage(m) };
        // Ascend's container-share flag, Cambricon's sMLU mode: on while the card is checked.
        let switch = vendors::sharing_switch(m, self.system, env);
        for (g, a) in sliceable {
            let checked = || {
                catch_unwind(AssertUnwindSafe(|| {
                    self.card_rows(m, g, a, staging.as_ref().err())
                }))
            };
            let rows = match &switch {
                None => checked(),
                Some(Err(e)) => {
                    group.checks.push(self.switch_unopened(m, a, e));
                    checked()
                }
                Some(Ok(switch)) => {
                    let t = toggle::around(switch.as_ref(), a, self.dry_run, checked);
                    group.checks.push(t.row);
                    warnings.extend(t.warning);
                    t.during
                }
            };
            match rows {
                Ok(rows) => group.checks.extend(rows),
                Err(payload) => group.checks.push(panicked_row(
                    &a.id,
                    &format!(
                        "checking this card's slices panicked: {}",
                        panic_message(payload.as_ref())
                    ),
                )),
            }
        }
        group
    }

    /// The switch row of a card whose switch could not even be reached.
    fn switch_unopened(&self, m: Manufacturer, a: &Accelerator, e: &vendors::SwitchError) -> Check {
        let capability = match m {
            Manufacturer::Cambricon => "smlu-mode",
            _ => "container-share",
        };
        Check::new(
            &a.id,
            capability,
            Mode::Sliced,
            State::Unavailable,
            Depth::Declared,
        )
        .reason(format!(
            "the driver's switch could not be reached: {e}; a slice allocation needs it on"
        ))
    }

    /// The host CLI's count, run through chroot (a read; run in dry runs too).
    fn host_count(&self, m: Manufacturer, cli: &str) -> detection::HostSeen {
        let line = format!("PATH=\"$PATH:/opt/rocm/bin:/usr/local/bin\" {cli}");
        let ran = self
            .shell
            .run(&["sh".into(), "-c".into(), line])
            .map_err(HostError::EnterRoot)?;
        match ran.code {
            Some(0) => Ok(detection::count_host_output(m, &ran.stdout)),
            Some(127) => Err(HostError::NotOnHost(
                cli.split(' ').next().unwrap_or(cli).to_owned(),
            )),
            _ => Err(HostError::CliFailed {
                command: cli.to_owned(),
                why: ran.why(),
            }),
        }
    }

    /// Copies the in-image libraries to where the allocator mounts them from (kept there, as
    /// the DaemonSet's init container would leave them).
    fn stage(&self, m: Manufacturer) -> Result<(), HostError> {
        let from = self.system.path(format!("{IMAGE_LIB_DIR}/{m}"));
        let to = self.host.path(format!("{HOST_LIB_DIR}/{m}"));
        copy_tree(&from, &to).map_err(|source| HostError::Stage {
            from: from.display().to_string(),
            to: to.display().to_string(),
            source,
        })
    }

    /// What the device plugin does before answering: the injection's work directories and
    /// rendered files, on the host.
    fn prepare(&self, inj: &ContainerInjection) -> Result<(), HostError> {
        let failed = |action, path: &std::path::Path| {
            let path = path.display().to_string();
            move |source| HostError::Write {
                action,
                path,
                source,
            }
        };
        for dir in &inj.work_dirs {
            let p = self.host.path(dir);
            fs::create_dir_all(&p).map_err(failed("creating", &p))?;
        }
        for file in &inj.files {
            let p = self.host.path(&file.host_path);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).map_err(failed("creating", parent))?;
            }
            fs::write(&p, &file.contents).map_err(failed("writing", &p))?;
        }
        Ok(())
    }

    fn work_dir(&self, probe: &str) -> String {
        format!("{HOST_WORK_DIR}/{}/{probe}", self.run_id)
    }

    fn slice(
        &self,
        g: &DevicesGroup,
        a: &Accelerator,
        (cores, divisor): (u32, u64),
        work_dir: &str,
    ) -> Result<ContainerInjection, injection::InjectionError> {
        self.injection.sliced(&SliceRequest {
            group: g,
            accelerator: a,
            cores_percentage: cores,
            memory_mib: g.memory / divisor,
            pod_work_dir: work_dir,
        })
    }

    fn probe_name(&self, a: &Accelerator, what: &str) -> String {
        format!("gpustack-preflight-{}-{}-{what}", self.run_id, a.index)
    }

    fn spec_argv(
        &self,
        name: &str,
        image: &str,
        inj: &ContainerInjection,
        script: &str,
        interactive: bool,
        vendor_runtime: Option<&str>,
    ) -> Vec<String> {
        probe::run_argv(
            self.engine(),
            &ProbeSpec {
                name,
                image,
                injection: inj,
                engine_root: &self.opts.engine_root,
                vendor_runtime,
                script,
                interactive,
            },
        )
    }

    /// `sliced-runtime-loaded`, `sliced-quota-in-force`, `sidecar-visibility`, `co-tenancy` for
    /// one card.
    fn card_rows(
        &self,
        m: Manufacturer,
        g: &DevicesGroup,
        a: &Accelerator,
        staging_failed: Option<&HostError>,
    ) -> Vec<Check> {
        let facts = rows::probe_facts(m, g);
        let vendor_runtime = facts
            .vendor_runtime
            .then(|| m.resolve(|_| None).runtime_name)
            .flatten();
        let row = |cap: &str, mode, state, depth| Check::new(&a.id, cap, mode, state, depth);
        let work = self.work_dir(&format!("{}-slice", a.index));
        let owner = match self.slice(g, a, SLICE_SHARES[0], &work) {
            Ok(i) => i,
            Err(e) => {
                return [
                    "sliced-runtime-loaded",
                    "sliced-quota-in-force",
                    "co-tenancy",
                ]
                .into_iter()
                .map(|c| {
                    row(c, Mode::Sliced, State::Unavailable, Depth::Simulated).reason(e.to_string())
                })
                .collect();
            }
        };
        let cap = g.memory / SLICE_SHARES[0].1;
        let mut out = Vec::new();
        let image = self.opts.probe_image.as_deref().or(facts.image);
        let vendor_runtime_blocked =
            facts.vendor_runtime && self.engine().cli == Cli::Nerdctl && m != Manufacturer::Nvidia;
        let emit: Option<String> = if !facts.probes {
            None
        } else if let Some(why) = &self.resolution.emit_only {
            Some(if self.dry_run {
                format!("dry run; {why}")
            } else {
                why.clone()
            })
        } else if self.dry_run {
            Some("dry run".into())
        } else if image.is_none() {
            Some(format!("--probe-image is required for {m}"))
        } else if let Some(why) = staging_failed {
            Some(why.to_string())
        } else if vendor_runtime_blocked {
            Some(format!("nerdctl cannot pass the {m} vendor runtime"))
        } else {
            None
        };
        let read_host = |p: &str| fs::read_to_string(self.host.path(p)).ok();
        let shims = probe::shim_paths(&owner, &read_host);
        let shim_list = shims.join(", ");
        let script = probe::script(facts.reader, false);
        let name = self.probe_name(a, "slice");
        let argv = image.map(|img| {
            self.spec_argv(
                &name,
                img,
                &owner,
                &script,
                false,
                vendor_runtime.as_deref(),
            )
        });
        let command = argv
            .as_ref()
            .map(|v| probe::shell_line(&self.shell.argv(v)));

        match (&emit, facts.probes, &argv) {
            (_, false, _) | (Some(_), _, _) | (None, _, None) => {
                let not_run = match &emit {
                    Some(why) => format!("not run ({why})"),
                    None => format!("no probe exists for {m}"),
                };
                let mut loaded = row("sliced-runtime-loaded", Mode::Sliced, State::Ok, Depth::Simulated)
                    .detail(format!("{not_run}: the injection mounts the slicing runtime ({shim_list}) and preloads it"));
                let mut quota = row(
                    "sliced-quota-in-force",
                    Mode::Sliced,
                    State::Ok,
                    Depth::Simulated,
                )
                .detail(format!("{not_run}: the injection sets a cap of {cap} MiB"));
                if let Some(c) = &command {
                    loaded = loaded.command(c.clone());
                    quota = quota.command(c.clone());
                }
                out.push(loaded);
                out.push(quota);
            }
            (None, true, Some(argv)) => {
                let command = command.clone().unwrap_or_default();
                match self.prepare(&owner) {
                    Ok(()) => out.extend(self.measure_slice(a, argv, &command, &shims, cap)),
                    Err(why) => {
                        out.extend(["sliced-runtime-loaded", "sliced-quota-in-force"].map(|c| {
                            row(c, Mode::Sliced, State::Unavailable, Depth::Simulated)
                                .reason(why.to_string())
                                .command(command.clone())
                        }))
                    }
                }
            }
        }

        out.push(self.sidecar_row(g, a, &owner));

        // Co-tenancy: two slices of the card, started together.
        let shares: Vec<_> = SLICE_SHARES
            .iter()
            .map(|&share| {
                let what = format!("cotenant-{}", share.0);
                let work = self.work_dir(&format!("{}-{what}", a.index));
                (share, what, self.slice(g, a, share, &work))
            })
            .collect();
        let mut injections = Vec::new();
        for (share, what, inj) in shares {
            match inj {
                Ok(i) => injections.push((share, what, i)),
                Err(e) => {
                    out.push(
                        row(
                            "co-tenancy",
                            Mode::Sliced,
                            State::Unavailable,
                            Depth::Simulated,
                        )
                        .reason(e.to_string()),
                    );
                    return out;
                }
            }
        }
        let caps: Vec<u64> = injections
            .iter()
            .map(|((_, d), _, _)| g.memory / d)
            .collect();
        let caps_text = caps
            .iter()
            .map(|c| format!("{c} MiB"))
            .collect::<Vec<_>>()
            .join(" and ");
        let together_script = probe::script(facts.reader, true);
        let argvs: Option<Vec<Vec<String>>> = image.map(|img| {
            injections
                .iter()
                .map(|(_, what, inj)| {
                    self.spec_argv(
                        &self.probe_name(a, what),
                        img,
                        inj,
                        &together_script,
                        true,
                        vendor_runtime.as_deref(),
                    )
                })
                .collect()
        });
        let command = argvs.as_ref().map(|v| {
            v.iter()
                .map(|argv| probe::shell_line(&self.shell.argv(argv)))
                .collect::<Vec<_>>()
                .join(" & ")
        });
        match (&emit, facts.probes, argvs) {
            (None, true, Some(argvs)) => {
                let command = command.unwrap_or_default();
                match injections
                    .iter()
                    .try_for_each(|(_, _, inj)| self.prepare(inj))
                {
                    Ok(()) => out.push(self.measure_together(a, &argvs, command, &shims, &caps)),
                    Err(why) => out.push(
                        row(
                            "co-tenancy",
                            Mode::Sliced,
                            State::Unavailable,
                            Depth::Simulated,
                        )
                        .reason(why.to_string())
                        .command(command),
                    ),
                }
            }
            _ => {
                let not_run = match &emit {
                    Some(why) => format!("not run ({why})"),
                    None => format!("no probe exists for {m}"),
                };
                let mut r = row("co-tenancy", Mode::Sliced, State::Ok, Depth::Simulated)
                    .detail(format!("{not_run}: two slices of this card would run at once under caps of {caps_text}"));
                if let Some(c) = command {
                    r = r.command(c);
                }
                out.push(r);
            }
        }
        out
    }

    /// Runs one probe and reads `sliced-runtime-loaded` and `sliced-quota-in-force` from it.
    fn measure_slice(
        &self,
        a: &Accelerator,
        argv: &[String],
        command: &str,
        shims: &[String],
        cap: u64,
    ) -> Vec<Check> {
        let row = |cap: &str, state, depth| {
            Check::new(&a.id, cap, Mode::Sliced, state, depth).command(command)
        };
        let ran = match self.shell.run(argv) {
            Ok(r) => r,
            Err(e) => {
                let why = format!("could not start {}: {e}", self.opts.chroot.display());
                return vec![
                    row(
                        "sliced-runtime-loaded",
                        State::Unavailable,
                        Depth::Simulated,
                    )
                    .reason(why.clone()),
                    row(
                        "sliced-quota-in-force",
                        State::Unavailable,
                        Depth::Simulated,
                    )
                    .reason(why),
                ];
            }
        };
        let output = format!("{}{}", ran.stdout, ran.stderr);
        match probe::runtime_loaded(&ran.stdout, shims) {
            Loaded::NoMaps => {
                let why = format!("the probe container did not run: {}", ran.why());
                vec![
                    row(
                        "sliced-runtime-loaded",
                        State::Unavailable,
                        Depth::Simulated,
                    )
                    .reason(why.clone())
                    .evidence(probe::tail(&output, 20)),
                    row(
                        "sliced-quota-in-force",
                        State::Unavailable,
                        Depth::Simulated,
                    )
                    .reason(why),
                ]
            }
            Loaded::NotMapped(naming) => {
                let evidence = if naming.is_empty() {
                    probe::tail(&output, 20)
                } else {
                    naming.join("\n") + "\n"
                };
                let why = format!(
                    "the container ran but {} is not in its /proc/self/maps: the slicing runtime did not load",
                    shims.join(", ")
                );
                vec![
                    row("sliced-runtime-loaded", State::Unavailable, Depth::Measured)
                        .reason(why)
                        .evidence(evidence),
                    row("sliced-quota-in-force", State::Unavailable, Depth::Measured)
                        .reason("the slicing runtime is not loaded, so no cap is in force"),
                ]
            }
            Loaded::Yes(evidence) => {
                let loaded = row("sliced-runtime-loaded", State::Ok, Depth::Measured)
                    .detail("the slicing runtime the injection mounts is loaded in the container")
                    .evidence(evidence);
                let quota = match probe::reader_saw(&ran.stdout, cap) {
                    ReaderSaw::Nothing => row("sliced-quota-in-force", State::Ok, Depth::Simulated).detail(format!(
                        "the vendor reader reports nothing until an allocation has been charged and the probe allocates nothing: the injection sets a cap of {cap} MiB, no container was observed under it"
                    )),
                    ReaderSaw::Cap(text) => row("sliced-quota-in-force", State::Ok, Depth::Measured)
                        .detail(format!("the vendor reader shows the injected cap of {cap} MiB"))
                        .evidence(text),
                    ReaderSaw::Other(text) => row("sliced-quota-in-force", State::Unavailable, Depth::Measured)
                        .reason(format!("the vendor reader does not show the injected cap of {cap} MiB"))
                        .evidence(text),
                };
                vec![loaded, quota]
            }
        }
    }

    /// Two probes alive at once, each with the runtime loaded, each under its own cap.
    fn measure_together(
        &self,
        a: &Accelerator,
        argvs: &[Vec<String>],
        command: String,
        shims: &[String],
        caps: &[u64],
    ) -> Check {
        let row = |state, depth| {
            Check::new(&a.id, "co-tenancy", Mode::Sliced, state, depth).command(command.clone())
        };
        let (runs, together) = match self.shell.run_together(argvs, probe::READY) {
            Ok(r) => r,
            Err(e) => {
                return row(State::Unavailable, Depth::Simulated).reason(format!(
                    "could not start {}: {e}",
                    self.opts.chroot.display()
                ));
            }
        };
        let mut evidence = String::new();
        let mut saw_caps = 0;
        for (i, (ran, cap)) in runs.iter().zip(caps).enumerate() {
            match probe::runtime_loaded(&ran.stdout, shims) {
                Loaded::Yes(ev) => {
                    evidence.push_str(&format!("slice {} ({cap} MiB):\n{ev}", i + 1))
                }
                Loaded::NoMaps => {
                    return row(State::Unavailable, Depth::Simulated)
                        .reason(format!("slice {} did not run: {}", i + 1, ran.why()))
                        .evidence(probe::tail(&format!("{}{}", ran.stdout, ran.stderr), 20));
                }
                Loaded::NotMapped(_) => {
                    return row(State::Unavailable, Depth::Measured)
                        .reason(format!(
                            "slice {} ran without the slicing runtime loaded",
                            i + 1
                        ))
                        .evidence(probe::tail(&ran.stdout, 20));
                }
            }
            match probe::reader_saw(&ran.stdout, *cap) {
                ReaderSaw::Nothing => {}
                ReaderSaw::Cap(text) => {
                    saw_caps += 1;
                    evidence.push_str(&text);
                }
                ReaderSaw::Other(text) => {
                    return row(State::Unavailable, Depth::Measured)
                        .reason(format!(
                            "slice {} does not show its own cap of {cap} MiB",
                            i + 1
                        ))
                        .evidence(text);
                }
            }
        }
        if !together {
            return row(State::Unavailable, Depth::Measured)
                .reason("the two slices were not running at the same time")
                .evidence(evidence);
        }
        let caps_text = caps
            .iter()
            .map(|c| format!("{c} MiB"))
            .collect::<Vec<_>>()
            .join(" and ");
        if saw_caps == runs.len() {
            row(State::Ok, Depth::Measured)
                .detail(format!(
                    "two slices ran at once, each showing its own cap ({caps_text})"
                ))
                .evidence(evidence)
        } else {
            row(State::Ok, Depth::Simulated)
                .detail(format!(
                    "two slices ran at once with the slicing runtime loaded; the vendor reader shows no cap until an allocation is charged, so the caps ({caps_text}) are the injection's intent"
                ))
                .evidence(evidence)
        }
    }

    /// `sidecar-visibility`: a sidecar's grant is within its owner's (devices and visible-device
    /// variables). Simulated at most: nothing is started for it.
    fn sidecar_row(&self, g: &DevicesGroup, a: &Accelerator, owner: &ContainerInjection) -> Check {
        let row = |state| {
            Check::new(
                &a.id,
                "sidecar-visibility",
                Mode::Visibility,
                state,
                Depth::Simulated,
            )
        };
        let sidecar = match self.injection.visibility(g, a) {
            Ok(s) => s,
            Err(e) => return row(State::Unavailable).reason(e.to_string()),
        };
        let extra_devices: Vec<&str> = sidecar
            .devices
            .iter()
            .filter(|d| !owner.devices.iter().any(|o| o.host_path == d.host_path))
            .map(|d| d.host_path.as_str())
            .collect();
        let differing_env: Vec<&str> = sidecar
            .envs
            .iter()
            .filter(|(k, v)| k.ends_with("VISIBLE_DEVICES") && owner.envs.get(*k) != Some(*v))
            .map(|(k, _)| k.as_str())
            .collect();
        if extra_devices.is_empty() && differing_env.is_empty() {
            row(State::Ok).detail(format!(
                "a sidecar's grant ({} device node(s){}) is within its owner's slice",
                sidecar.devices.len(),
                sidecar
                    .envs
                    .iter()
                    .filter(|(k, _)| k.ends_with("VISIBLE_DEVICES"))
                    .map(|(k, v)| format!(", {k}={v}"))
                    .collect::<String>()
            ))
        } else {
            row(State::Unavailable).reason(format!(
                "a sidecar would see more than its owner: devices [{}], variables [{}]",
                extra_devices.join(", "),
                differing_env.join(", ")
            ))
        }
    }
}

/// Copies a directory tree (files and directories, permissions kept).
fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
