//! The `--upstreams` file: a YAML list of `{name, kubeconfig, context}`, one entry per upstream
//! cluster to mirror. Relative kubeconfig paths are taken from the file's directory, so a file
//! and its kubeconfigs can move together.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
};

use serde::Deserialize;

/// One upstream cluster to mirror.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The cluster name the mirror is served under (a DNS label).
    pub name: String,
    /// The kubeconfig that reaches it (loopback mode).
    pub kubeconfig: PathBuf,
    /// The kubeconfig context to use; its current context when absent.
    pub context: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: String,
    kubeconfig: Option<PathBuf>,
    context: Option<String>,
}

/// Why an upstreams file was refused. Every message is one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UpstreamsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("not a YAML list of {{name, kubeconfig, context}}: {0}")]
    Syntax(String),
    #[error(
        "entry {index}: name {name:?} must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
    )]
    BadName { index: usize, name: String },
    #[error("entry {index}: the name {name:?} is listed twice")]
    Duplicate { index: usize, name: String },
    #[error("entry {index} ({name}): kubeconfig is required in loopback mode")]
    NoKubeconfig { index: usize, name: String },
    #[error("entry {index} ({name}): kubeconfig {path} is not readable: {reason}")]
    Kubeconfig {
        index: usize,
        name: String,
        path: String,
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

/// Parses and validates the file's text (names, uniqueness, a kubeconfig per entry), resolving
/// relative kubeconfig paths against `base`. Does not touch the filesystem.
pub fn parse(text: &str, base: &Path) -> Result<Vec<Upstream>, UpstreamsError> {
    let entries: Vec<Entry> = if text.trim().is_empty() {
        Vec::new()
    } else {
        serde_yaml_ng::from_str(text)
            .map_err(|e| UpstreamsError::Syntax(e.to_string().replace('\n', " ")))?
    };
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (index, e) in entries.into_iter().enumerate() {
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
        let Some(kubeconfig) = e.kubeconfig else {
            return Err(UpstreamsError::NoKubeconfig {
                index,
                name: e.name,
            });
        };
        out.push(Upstream {
            name: e.name,
            kubeconfig: base.join(kubeconfig),
            context: e.context.filter(|c| !c.is_empty()),
        });
    }
    Ok(out)
}

/// Reads, parses and validates the file at `path`, and checks that every kubeconfig is readable.
pub fn load(path: &Path) -> Result<Vec<Upstream>, UpstreamsError> {
    let text = std::fs::read_to_string(path).map_err(|e| UpstreamsError::Read {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let upstreams = parse(&text, base)?;
    for (index, u) in upstreams.iter().enumerate() {
        if let Err(e) = std::fs::read(&u.kubeconfig) {
            return Err(UpstreamsError::Kubeconfig {
                index,
                name: u.name.clone(),
                path: u.kubeconfig.display().to_string(),
                reason: e.to_string(),
            });
        }
    }
    Ok(upstreams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_resolves_relative_kubeconfigs() {
        let text = "- name: east\n  kubeconfig: east.kubeconfig\n  context: admin\n- {name: west, kubeconfig: /abs/w}\n";
        let got = parse(text, Path::new("/etc/gw")).unwrap();
        assert_eq!(
            got,
            vec![
                Upstream {
                    name: "east".into(),
                    kubeconfig: "/etc/gw/east.kubeconfig".into(),
                    context: Some("admin".into()),
                },
                Upstream {
                    name: "west".into(),
                    kubeconfig: "/abs/w".into(),
                    context: None,
                },
            ]
        );
        assert_eq!(parse("", Path::new(".")).unwrap(), vec![]);
    }

    #[test]
    fn refuses_bad_names_duplicates_missing_kubeconfigs_and_garbage() {
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
            parse("- {name: a}", base),
            Err(UpstreamsError::NoKubeconfig { .. })
        ));
        assert!(matches!(
            parse("- {name: a, kubeconfig: k, token: x}", base),
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
