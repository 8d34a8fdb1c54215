//! What an upstream's kubeconfig may ask of the gateway. A subscription names a file on the
//! gateway's host, or carries the document inline (`kubeconfigData`), so it could name any file
//! (and see its first lines quoted in a parse error), run a command (an `exec` credential
//! plugin), or make the gateway read a host file and send it to a server of the subscriber's
//! choosing (`tokenFile`, client keys). So: run-time subscriptions may only name files under the
//! allowed directories; no kubeconfig may run a plugin; a run-time subscription's kubeconfig
//! carries its credentials inline; and errors name the source and the rule, never the content
//! (users are named by position: even their names come from the document).

use std::path::{Path, PathBuf};

use kube::config::Kubeconfig;

/// How an inline kubeconfig (a subscription's `kubeconfigData`) is named in errors.
pub const INLINE_SOURCE: &str = "kubeconfigData";

/// Why a kubeconfig is not used. Messages never quote the document.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KubeconfigRefused {
    /// A path outside the directories subscriptions may name.
    #[error(
        "kubeconfig {path}: outside the directories subscriptions may name ({allowed}; add one with --subscription-kubeconfig-dir)"
    )]
    OutsideAllowedDirs {
        /// The path given.
        path: String,
        /// The allowed directories, for people.
        allowed: String,
    },
    /// The file cannot be read.
    #[error("kubeconfig {path}: not readable ({reason})")]
    Unreadable {
        /// The path given.
        path: String,
        /// The read error.
        reason: String,
    },
    /// The document is not a kubeconfig.
    #[error("{doc}: not a valid kubeconfig (its content is not shown)")]
    Invalid {
        /// Which document (a path, or the inline data).
        doc: String,
    },
    /// A user runs a credential plugin.
    #[error(
        "{doc}: users[{index}] uses an {what}, which the gateway never runs; give a token or client certificate inline"
    )]
    Plugin {
        /// Which document.
        doc: String,
        /// The user's position in `users`.
        index: usize,
        /// The plugin kind (exec or auth provider).
        what: &'static str,
    },
    /// A credential names a file instead of carrying its data.
    #[error(
        "{doc}: {field} names a file; a subscription's kubeconfig must carry it inline ({field}-data or token)"
    )]
    FileReference {
        /// Which document.
        doc: String,
        /// The field naming a file.
        field: &'static str,
    },
}

/// How much a kubeconfig is trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Named in the operator's `--upstreams` file: it may reference files.
    OperatorFile,
    /// Named or given inline by a run-time subscription: only what it holds inline.
    Subscription,
}

/// Reads and checks the kubeconfig at `path` for `origin`.
pub fn load(path: &Path, origin: Origin) -> Result<Kubeconfig, KubeconfigRefused> {
    let text = std::fs::read_to_string(path).map_err(|e| KubeconfigRefused::Unreadable {
        path: path.display().to_string(),
        reason: e.kind().to_string(),
    })?;
    parse(&text, &format!("kubeconfig {}", path.display()), origin)
}

/// Parses and checks the kubeconfig document `text` for `origin`; `source` names it in errors.
pub fn parse(text: &str, source: &str, origin: Origin) -> Result<Kubeconfig, KubeconfigRefused> {
    // The parser's message would quote the document, so it is dropped.
    let config = Kubeconfig::from_yaml(text).map_err(|_| KubeconfigRefused::Invalid {
        doc: source.to_owned(),
    })?;
    check(&config, source, origin)?;
    Ok(config)
}

/// The rules of the module on a parsed kubeconfig.
pub fn check(config: &Kubeconfig, source: &str, origin: Origin) -> Result<(), KubeconfigRefused> {
    for (index, named) in config.auth_infos.iter().enumerate() {
        let Some(info) = &named.auth_info else {
            continue;
        };
        let plugin = if info.exec.is_some() {
            Some("exec credential plugin")
        } else if info.auth_provider.is_some() {
            Some("auth-provider plugin")
        } else {
            None
        };
        if let Some(what) = plugin {
            return Err(KubeconfigRefused::Plugin {
                doc: source.to_owned(),
                index,
                what,
            });
        }
        if origin == Origin::Subscription {
            let files = [
                ("tokenFile", info.token_file.is_some()),
                ("client-certificate", info.client_certificate.is_some()),
                ("client-key", info.client_key.is_some()),
            ];
            if let Some((field, _)) = files.iter().find(|(_, set)| *set) {
                return Err(KubeconfigRefused::FileReference {
                    doc: source.to_owned(),
                    field,
                });
            }
        }
    }
    if origin == Origin::Subscription {
        for named in &config.clusters {
            if named
                .cluster
                .as_ref()
                .is_some_and(|c| c.certificate_authority.is_some())
            {
                return Err(KubeconfigRefused::FileReference {
                    doc: source.to_owned(),
                    field: "certificate-authority",
                });
            }
        }
    }
    Ok(())
}

/// Whether a run-time subscription may name `path`: it must resolve (links followed) to a file
/// under one of `allowed`.
pub fn check_location(path: &Path, allowed: &[PathBuf]) -> Result<PathBuf, KubeconfigRefused> {
    let listed = || {
        allowed
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let outside = || KubeconfigRefused::OutsideAllowedDirs {
        path: path.display().to_string(),
        allowed: listed(),
    };
    // Not resolvable (missing, unreadable directory): said the same way as outside, so that
    // the answer does not tell which host paths exist.
    let real = path.canonicalize().map_err(|_| outside())?;
    let inside = allowed.iter().any(|dir| {
        dir.canonicalize()
            .is_ok_and(|dir| real.starts_with(&dir) && real != dir)
    });
    if inside { Ok(real) } else { Err(outside()) }
}

/// A kubeconfig that passes every rule (credentials inline), for tests to vary.
#[cfg(test)]
pub(crate) const INLINE_EXAMPLE: &str = "apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: 'https://127.0.0.1:1', certificate-authority-data: 'AAAA'}
users:
- name: u
  user: {token: secret-token}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_credentials_pass_plugins_and_file_references_do_not() {
        let ok = Kubeconfig::from_yaml(INLINE_EXAMPLE).unwrap();
        assert_eq!(check(&ok, "k", Origin::Subscription), Ok(()));
        let exec = INLINE_EXAMPLE.replace(
            "user: {token: secret-token}",
            "user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, id]}}",
        );
        let exec = Kubeconfig::from_yaml(&exec).unwrap();
        for origin in [Origin::OperatorFile, Origin::Subscription] {
            let err = check(&exec, "k", origin).unwrap_err().to_string();
            assert!(err.contains("exec credential plugin"), "{err}");
        }
        let file = INLINE_EXAMPLE.replace(
            "user: {token: secret-token}",
            "user: {tokenFile: /etc/shadow}",
        );
        let file = Kubeconfig::from_yaml(&file).unwrap();
        assert_eq!(check(&file, "k", Origin::OperatorFile), Ok(()));
        let err = check(&file, "k", Origin::Subscription).unwrap_err();
        assert!(err.to_string().contains("tokenFile names a file"), "{err}");
        let ca = INLINE_EXAMPLE.replace(
            "certificate-authority-data: 'AAAA'",
            "certificate-authority: /x/ca.key",
        );
        let ca = Kubeconfig::from_yaml(&ca).unwrap();
        assert!(check(&ca, "k", Origin::Subscription).is_err());
    }

    #[test]
    fn parse_errors_never_quote_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = dir.path().join("ca.key");
        std::fs::write(&key, "-----BEGIN PRIVATE KEY-----\nMIIsecretbytes\n").unwrap();
        let err = load(&key, Origin::Subscription).unwrap_err().to_string();
        assert!(err.contains("not a valid kubeconfig"), "{err}");
        assert!(!err.contains("secret") && !err.contains("PRIVATE"), "{err}");
    }

    #[test]
    fn inline_documents_follow_the_same_rules_and_are_never_quoted() {
        assert!(parse(INLINE_EXAMPLE, INLINE_SOURCE, Origin::Subscription).is_ok());
        let exec = INLINE_EXAMPLE.replace(
            "user: {token: secret-token}",
            "user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: [-c, echo secret-arg]}}",
        );
        let err = parse(&exec, INLINE_SOURCE, Origin::Subscription)
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("kubeconfigData: users[0] uses an exec credential plugin"),
            "{err}"
        );
        assert!(!err.contains("secret") && !err.contains("/bin/sh"), "{err}");
        let garbage = "-----BEGIN PRIVATE KEY-----\nMIIsecretbytes\n";
        let err = parse(garbage, INLINE_SOURCE, Origin::Subscription)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "kubeconfigData: not a valid kubeconfig (its content is not shown)"
        );
    }

    #[test]
    fn only_files_under_the_allowed_directories() {
        let dir = tempfile::tempdir().unwrap();
        let allowed = dir.path().join("data");
        std::fs::create_dir(&allowed).unwrap();
        let inside = allowed.join("east.kubeconfig");
        std::fs::write(&inside, INLINE_EXAMPLE).unwrap();
        let outside = dir.path().join("other.kubeconfig");
        std::fs::write(&outside, INLINE_EXAMPLE).unwrap();
        let link = allowed.join("link.kubeconfig");
        std::os::unix::fs::symlink(&outside, &link).unwrap();
        let dirs = [allowed.clone()];
        assert!(check_location(&inside, &dirs).is_ok());
        for refused in [
            outside.clone(),
            link,
            allowed.join("../other.kubeconfig"),
            allowed.join("missing"),
            PathBuf::from("/etc/passwd"),
        ] {
            let err = check_location(&refused, &dirs).unwrap_err().to_string();
            assert!(
                err.contains("outside the directories"),
                "{refused:?}: {err}"
            );
        }
    }
}
