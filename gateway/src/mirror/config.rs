//! Upstreams and how they are reached, and the `--upstreams` file: a YAML list of
//! `{name, kubeconfig, context, token}`, one entry per upstream cluster to mirror. Relative
//! kubeconfig paths are taken from the file's directory, so a file and its kubeconfigs can move
//! together. In `gpustack-api` mode an entry without a kubeconfig is reached through the
//! GPUStack server's proxy with its `token`.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::kinds::MirroredKind;

/// One upstream cluster to mirror.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    /// The cluster name the mirror is served under (a DNS label).
    pub name: String,
    /// How it is reached.
    pub access: Access,
    /// Kinds mirrored besides [`super::kinds::default_kinds`].
    #[serde(default)]
    pub extra_kinds: Vec<MirroredKind>,
    /// Named in the operator's `--upstreams` file, whose kubeconfigs may reference files; a
    /// run-time subscription's may not (see [`super::kubeconfig_policy`]).
    #[serde(default)]
    pub from_operator_file: bool,
    /// What the subscriber asked for, echoed in the status ([`super::request::SubscribeRequest`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_spec: Option<serde_json::Value>,
}

/// How an upstream is reached.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Access {
    /// A kubeconfig and context (`loopback` mode); the default kubeconfig (`KUBECONFIG`,
    /// `~/.kube/config` or in-cluster) when no path is given.
    Kubeconfig {
        /// The kubeconfig file; the default one when `None`.
        path: Option<PathBuf>,
        /// The context to use; the file's current one when `None`.
        context: Option<String>,
    },
    /// A kubeconfig document given inline by a run-time subscription (`kubeconfigData`), used
    /// as a named one is, whatever the connection mode.
    KubeconfigData {
        /// The document, already checked.
        data: InlineKubeconfig,
        /// The context to use; the document's current one when `None`.
        context: Option<String>,
    },
    /// The GPUStack server's per-cluster Kubernetes proxy (`gpustack-api` mode), with the
    /// subscription's token as bearer token. The proxy's certificate is not verified (it is on
    /// localhost, and commonly self-signed).
    GpustackApi {
        /// The proxy's URL for this cluster.
        url: String,
        /// The bearer token; none when `None`.
        token: Option<String>,
    },
}

// By hand, so that a token never reaches a log line through `{:?}`.
impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Access::Kubeconfig { path, context } => f
                .debug_struct("Kubeconfig")
                .field("path", path)
                .field("context", context)
                .finish(),
            Access::KubeconfigData { data, context } => f
                .debug_struct("KubeconfigData")
                .field("data", data)
                .field("context", context)
                .finish(),
            Access::GpustackApi { url, token } => f
                .debug_struct("GpustackApi")
                .field("url", url)
                .field("token", &token.as_ref().map(|_| "REDACTED"))
                .finish(),
        }
    }
}

impl Access {
    /// The credential to strip from error text, if any.
    pub fn secret(&self) -> Option<&str> {
        match self {
            Access::GpustackApi { token, .. } => token.as_deref(),
            Access::Kubeconfig { .. } | Access::KubeconfigData { .. } => None,
        }
    }
}

/// A kubeconfig document held in memory (and in the store, with its subscription). It carries
/// credentials, so its `Debug` shows only its size.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InlineKubeconfig(pub String);

impl std::fmt::Debug for InlineKubeconfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes, not shown>", self.0.len())
    }
}

/// `--worker-conn-mode`: how upstreams without a kubeconfig of their own are reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnMode {
    /// Each upstream's kubeconfig.
    Loopback,
    /// `<base>/v2/clusters/<name>/proxy`, where `base` is `<scheme>://localhost:<port>`.
    GpustackApi {
        /// `<scheme>://localhost:<port>` of the GPUStack server.
        base: String,
    },
}

impl ConnMode {
    /// The mode for `--worker-conn-mode` `mode` with the GPUStack server's scheme and port.
    pub fn from_flags(mode: &str, scheme: &str, port: u16) -> Self {
        if mode == "loopback" {
            ConnMode::Loopback
        } else {
            ConnMode::GpustackApi {
                base: format!("{scheme}://localhost:{port}"),
            }
        }
    }

    /// How `name` is reached through the GPUStack server's proxy; `None` in loopback mode.
    pub fn proxy_url(&self, name: &str) -> Option<String> {
        match self {
            ConnMode::Loopback => None,
            ConnMode::GpustackApi { base } => Some(format!("{base}/v2/clusters/{name}/proxy")),
        }
    }
}

/// One entry of the file, before the connection mode is known.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The upstream's name, a DNS label; the cluster it is served as.
    pub name: String,
    /// Resolved against the file's directory.
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use; the file's current one when `None`.
    pub context: Option<String>,
    /// Bearer token for the GPUStack server's proxy (`gpustack-api` mode).
    pub token: Option<String>,
}

impl Entry {
    /// The upstream this entry names in `mode`: its kubeconfig when it has one, else the
    /// GPUStack server's proxy (a kubeconfig is required in loopback mode).
    pub fn resolve(&self, index: usize, mode: &ConnMode) -> Result<Upstream, UpstreamsError> {
        let access = match (&self.kubeconfig, mode.proxy_url(&self.name)) {
            (Some(path), _) => Access::Kubeconfig {
                path: Some(path.clone()),
                context: self.context.clone(),
            },
            (None, Some(url)) => Access::GpustackApi {
                url,
                token: self.token.clone(),
            },
            (None, None) => {
                return Err(UpstreamsError::NoKubeconfig {
                    index,
                    name: self.name.clone(),
                });
            }
        };
        Ok(Upstream {
            name: self.name.clone(),
            access,
            extra_kinds: Vec::new(),
            from_operator_file: true,
            cluster_spec: None,
        })
    }
}

/// Why an upstreams file was refused. Every message is one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpstreamsError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The read error.
        reason: String,
    },
    /// The file is not a YAML list of entries.
    #[error("not a YAML list of {{name, kubeconfig, context, token}}: {0}")]
    Syntax(String),
    /// A name is not a DNS label.
    #[error(
        "entry {index}: name {name:?} must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
    )]
    BadName {
        /// The entry's position in the list.
        index: usize,
        /// The name given.
        name: String,
    },
    /// A name is listed twice.
    #[error("entry {index}: the name {name:?} is listed twice")]
    Duplicate {
        /// The second entry's position.
        index: usize,
        /// The name given twice.
        name: String,
    },
    /// An entry without a kubeconfig in loopback mode.
    #[error("entry {index} ({name}): kubeconfig is required in loopback mode")]
    NoKubeconfig {
        /// The entry's position in the list.
        index: usize,
        /// The entry's name.
        name: String,
    },
    /// An entry's kubeconfig cannot be read.
    #[error("entry {index} ({name}): kubeconfig {path} is not readable: {reason}")]
    Kubeconfig {
        /// The entry's position in the list.
        index: usize,
        /// The entry's name.
        name: String,
        /// The kubeconfig path given.
        path: String,
        /// The read error.
        reason: String,
    },
}

/// Whether `s` is a DNS label (RFC 1123), what cluster names must be.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Parses and validates the file's text (names, uniqueness), resolving relative kubeconfig
/// paths against `base`. Does not touch the filesystem.
pub fn parse(text: &str, base: &Path) -> Result<Vec<Entry>, UpstreamsError> {
    let entries: Vec<Entry> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_yaml_ng::from_str(text)
            .map_err(|e| UpstreamsError::Syntax(e.to_string().replace('\n', " ")))?
    };
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (index, mut e) in entries.into_iter().enumerate() {
        if !is_dns_label(&e.name) {
            return Err(UpstreamsError::BadName {
                index,
                name: e.name,
            });
        }
        if !seen.insert(e.name.clone()) {
            return Err(UpstreamsError::Duplicate {
                index,
                name: e.name,
            });
        }
        e.kubeconfig = e.kubeconfig.map(|k| base.join(k));
        e.context = e.context.filter(|c| !c.is_empty());
        e.token = e.token.filter(|t| !t.is_empty());
        out.push(e);
    }
    Ok(out)
}

/// Reads, parses and validates the file at `path`, and checks that every kubeconfig named is
/// readable.
pub fn load(path: &Path) -> Result<Vec<Entry>, UpstreamsError> {
    let text = std::fs::read_to_string(path).map_err(|e| UpstreamsError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let entries = parse(&text, base)?;
    for (index, e) in entries.iter().enumerate() {
        let Some(kubeconfig) = &e.kubeconfig else {
            continue;
        };
        if let Err(err) = std::fs::read(kubeconfig) {
            return Err(UpstreamsError::Kubeconfig {
                index,
                name: e.name.clone(),
                path: kubeconfig.display().to_string(),
                reason: err.to_string(),
            });
        }
    }
    Ok(entries)
}

/// The upstreams `entries` name in `mode`.
pub fn resolve_all(entries: &[Entry], mode: &ConnMode) -> Result<Vec<Upstream>, UpstreamsError> {
    entries
        .iter()
        .enumerate()
        .map(|(i, e)| e.resolve(i, mode))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loopback(path: &str, context: Option<&str>) -> Access {
        Access::Kubeconfig {
            path: Some(path.into()),
            context: context.map(str::to_owned),
        }
    }

    #[test]
    fn parses_entries_and_resolves_relative_kubeconfigs() {
        let text = "- name: east\n  kubeconfig: east.kubeconfig\n  context: admin\n- {name: west, kubeconfig: /abs/w}\n";
        let entries = parse(text, Path::new("/etc/gw")).unwrap();
        let got = resolve_all(&entries, &ConnMode::Loopback).unwrap();
        assert_eq!(got[0].name, "east");
        assert_eq!(
            got[0].access,
            loopback("/etc/gw/east.kubeconfig", Some("admin"))
        );
        assert_eq!(got[1].access, loopback("/abs/w", None));
        assert_eq!(parse("", Path::new(".")).unwrap(), vec![]);
    }

    #[test]
    fn gpustack_api_mode_reaches_entries_without_kubeconfig_through_the_proxy() {
        let mode = ConnMode::from_flags("gpustack-api", "http", 30080);
        let entries = parse(
            "- {name: a, token: t0k}\n- {name: b, kubeconfig: /k}\n",
            Path::new("."),
        )
        .unwrap();
        let got = resolve_all(&entries, &mode).unwrap();
        assert_eq!(
            got[0].access,
            Access::GpustackApi {
                url: "http://localhost:30080/v2/clusters/a/proxy".into(),
                token: Some("t0k".into()),
            }
        );
        assert_eq!(got[1].access, loopback("/k", None));
        assert!(
            !format!("{:?}", got[0]).contains("t0k"),
            "Debug hides the token"
        );
        assert!(matches!(
            resolve_all(&entries, &ConnMode::Loopback),
            Err(UpstreamsError::NoKubeconfig { index: 0, .. })
        ));
    }

    #[test]
    fn refuses_bad_names_duplicates_and_garbage() {
        let base = Path::new(".");
        assert!(matches!(
            parse("- {name: East, kubeconfig: k}", base),
            Err(UpstreamsError::BadName { index: 0, .. })
        ));
        assert!(matches!(
            parse(
                "- {name: a, kubeconfig: k}\n- {name: a, kubeconfig: k}",
                base
            ),
            Err(UpstreamsError::Duplicate { index: 1, .. })
        ));
        assert!(matches!(
            parse("- {name: a, kubeconfig: k, password: x}", base),
            Err(UpstreamsError::Syntax(_))
        ));
        assert!(matches!(
            parse("name: a", base),
            Err(UpstreamsError::Syntax(_))
        ));
        for e in [
            parse("name: a", base).unwrap_err(),
            parse("- {name: x_y, kubeconfig: k}", base).unwrap_err(),
        ] {
            assert_eq!(e.to_string().lines().count(), 1, "{e}");
        }
    }

    #[test]
    fn load_requires_readable_kubeconfigs() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("upstreams.yaml");
        std::fs::write(&file, "- {name: a, kubeconfig: missing.kubeconfig}\n").unwrap();
        let err = load(&file).unwrap_err();
        assert!(matches!(err, UpstreamsError::Kubeconfig { .. }), "{err}");
        std::fs::write(dir.path().join("missing.kubeconfig"), "x").unwrap();
        assert_eq!(load(&file).unwrap().len(), 1);
        assert!(matches!(
            load(&dir.path().join("nope.yaml")),
            Err(UpstreamsError::Read { .. })
        ));
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns_label("a-1"));
        for bad in ["", "-a", "a-", "A", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
    }
}
