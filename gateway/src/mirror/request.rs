//! Reading a subscription request of `POST /apis/workers`: the query form
//! `?cluster=X[&cluster=Y][&token=T][&force][&gvk=group/version/Kind...][&kubeconfig=PATH][&context=C]`
//! or the same as a JSON body `{clusters, token, force, gvks, kubeconfig, context}`. The body may
//! instead carry the kubeconfig itself, `kubeconfigData` (a YAML document, checked here by the
//! rules of [`kubeconfig_policy`]). Every refusal is one line naming the parameter and what is
//! allowed, and never quotes an inline kubeconfig.

use std::path::PathBuf;

use serde::Deserialize;

use super::{
    Access, ConnMode, Upstream,
    config::{InlineKubeconfig, is_dns_label},
    kinds::{GvkError, MirroredKind, parse_gvk},
    kubeconfig_policy::{self, INLINE_SOURCE, KubeconfigRefused, Origin},
};

/// The largest `kubeconfigData` accepted: a kubeconfig with a few certificates is a few KiB.
pub const MAX_KUBECONFIG_DATA_BYTES: usize = 256 << 10;

/// Why a subscription or unsubscription request was refused: one line naming the parameter
/// and what is allowed, never quoting an inline kubeconfig.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// A query parameter outside `allowed` (a phrase: "are a, b" or "is a").
    #[error("unknown parameter {name:?}: allowed {allowed}")]
    UnknownParameter {
        /// The parameter given.
        name: String,
        /// What is allowed, as a phrase.
        allowed: &'static str,
    },
    /// The JSON body does not have the subscription's shape.
    #[error(
        "the body is not a subscription {{clusters, token, force, gvks, kubeconfig, kubeconfigData, context, clusterSpec}}: {0}"
    )]
    NotASubscription(serde_json::Error),
    /// `clusterSpec` is not a JSON object.
    #[error("clusterSpec: must be an object")]
    ClusterSpecNotObject,
    /// No cluster named; `to` says what the request would have done to it.
    #[error("cluster: required (the name of the upstream cluster to {to})")]
    NoCluster {
        /// What the request would have done.
        to: &'static str,
    },
    /// A cluster name that is not a DNS label; `rule` spells the rule out (or is empty).
    #[error("cluster {name:?}: must be a DNS label{rule}")]
    NotDnsLabel {
        /// The name given.
        name: String,
        /// The rule spelled out, or empty.
        rule: &'static str,
    },
    /// A `gvks` entry is not a group/version/kind.
    #[error(transparent)]
    Gvk(#[from] GvkError),
    /// `kubeconfigData` with parameters it excludes (`kubeconfig`, `token`).
    #[error(
        "kubeconfigData excludes {0}: the inline kubeconfig names the upstream's server and carries its credentials"
    )]
    InlineExcludes(String),
    /// The inline kubeconfig is larger than allowed.
    #[error("kubeconfigData: {bytes} bytes, at most {max} allowed")]
    InlineTooLarge {
        /// The document's size.
        bytes: usize,
        /// The most allowed.
        max: usize,
    },
    /// The inline kubeconfig is one the gateway will not use.
    #[error(transparent)]
    InlineRefused(#[from] KubeconfigRefused),
    /// `context` is not a context of the inline kubeconfig.
    #[error("context {0:?}: not a context of the kubeconfigData")]
    UnknownContext(String),
}

/// A validated subscription request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscribeRequest {
    /// The upstream clusters to subscribe, by name.
    pub clusters: Vec<String>,
    /// The bearer token for the GPUStack server's proxy.
    pub token: Option<String>,
    /// Replace a running subscription with the new settings.
    pub force: bool,
    /// The kinds to mirror; the default set when empty.
    pub gvks: Vec<MirroredKind>,
    /// A kubeconfig file in a directory subscriptions may name.
    pub kubeconfig: Option<PathBuf>,
    /// An inline kubeconfig, already checked (JSON body only).
    pub kubeconfig_data: Option<InlineKubeconfig>,
    /// The kubeconfig context to use.
    pub context: Option<String>,
    /// What the subscriber asked for, echoed in the upstream's status (the worker's `Cluster`
    /// spec: its mode and where its credential is, never the credential).
    pub cluster_spec: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Body {
    #[serde(default)]
    clusters: Vec<String>,
    cluster: Option<String>,
    token: Option<String>,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    gvks: Vec<String>,
    kubeconfig: Option<PathBuf>,
    kubeconfig_data: Option<String>,
    context: Option<String>,
    cluster_spec: Option<serde_json::Value>,
}

/// Whether a query flag is on: present without a value, or `true`/`1`.
fn flag_on(v: &str) -> bool {
    matches!(v, "" | "true" | "True" | "1")
}

impl SubscribeRequest {
    /// From the query's (key, value) pairs, in order.
    pub fn from_query(pairs: &[(String, String)]) -> Result<Self, RequestError> {
        let mut clusters = Vec::new();
        let mut gvks = Vec::new();
        let mut req = SubscribeRequest::default();
        for (k, v) in pairs {
            match k.as_str() {
                "cluster" => clusters.push(v.clone()),
                "gvk" => gvks.push(v.clone()),
                "token" => req.token = Some(v.clone()),
                "force" => req.force = flag_on(v),
                "kubeconfig" => req.kubeconfig = Some(PathBuf::from(v)),
                "context" => req.context = Some(v.clone()),
                other => {
                    return Err(RequestError::UnknownParameter {
                        name: other.to_owned(),
                        allowed: "are cluster, token, force, gvk, kubeconfig, context",
                    });
                }
            }
        }
        req.finish(clusters, gvks)
    }

    /// From a JSON body.
    pub fn from_json(body: &[u8]) -> Result<Self, RequestError> {
        let b: Body = serde_json::from_slice(body).map_err(RequestError::NotASubscription)?;
        if let Some(spec) = &b.cluster_spec
            && !spec.is_object()
        {
            return Err(RequestError::ClusterSpecNotObject);
        }
        let mut clusters = b.clusters;
        clusters.extend(b.cluster);
        let req = SubscribeRequest {
            token: b.token,
            force: b.force,
            kubeconfig: b.kubeconfig,
            kubeconfig_data: b.kubeconfig_data.map(InlineKubeconfig),
            context: b.context,
            cluster_spec: b.cluster_spec,
            ..Default::default()
        };
        req.finish(clusters, b.gvks)
    }

    fn finish(mut self, clusters: Vec<String>, gvks: Vec<String>) -> Result<Self, RequestError> {
        if clusters.is_empty() {
            return Err(RequestError::NoCluster { to: "subscribe to" });
        }
        if let Some(bad) = clusters.iter().find(|c| !is_dns_label(c)) {
            return Err(RequestError::NotDnsLabel {
                name: bad.clone(),
                rule: ": lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters",
            });
        }
        self.gvks = gvks
            .iter()
            .map(|g| parse_gvk(g))
            .collect::<Result<_, _>>()?;
        self.token = self.token.filter(|t| !t.is_empty());
        self.context = self.context.filter(|c| !c.is_empty());
        self.kubeconfig = self.kubeconfig.filter(|k| !k.as_os_str().is_empty());
        self.kubeconfig_data = self.kubeconfig_data.filter(|d| !d.0.is_empty());
        if let Some(data) = &self.kubeconfig_data {
            self.check_inline(data)?;
        }
        let mut seen = std::collections::HashSet::new();
        clusters.into_iter().for_each(|c| {
            if seen.insert(c.clone()) {
                self.clusters.push(c);
            }
        });
        Ok(self)
    }

    /// The rules of `kubeconfigData`: alone (it names the server and carries the credentials),
    /// bounded, and acceptable to [`kubeconfig_policy`] as a subscription's kubeconfig.
    fn check_inline(&self, data: &InlineKubeconfig) -> Result<(), RequestError> {
        let others: Vec<&str> = [
            ("kubeconfig", self.kubeconfig.is_some()),
            ("token", self.token.is_some()),
        ]
        .iter()
        .filter(|(_, given)| *given)
        .map(|(name, _)| *name)
        .collect();
        if !others.is_empty() {
            return Err(RequestError::InlineExcludes(others.join(" and ")));
        }
        if data.0.len() > MAX_KUBECONFIG_DATA_BYTES {
            return Err(RequestError::InlineTooLarge {
                bytes: data.0.len(),
                max: MAX_KUBECONFIG_DATA_BYTES,
            });
        }
        let config = kubeconfig_policy::parse(&data.0, INLINE_SOURCE, Origin::Subscription)?;
        match &self.context {
            Some(c) if !config.contexts.iter().any(|n| &n.name == c) => {
                Err(RequestError::UnknownContext(c.clone()))
            }
            _ => Ok(()),
        }
    }

    /// The upstreams this request subscribes to in `mode`: with a kubeconfig (inline or named),
    /// through it, in either mode; else through the GPUStack server's proxy with the token
    /// (`gpustack-api`), or the gateway's default kubeconfig (`loopback`, one kubeconfig for
    /// every cluster, as the reference does).
    pub fn upstreams(&self, mode: &ConnMode) -> Vec<Upstream> {
        self.clusters
            .iter()
            .map(|name| {
                let access = match (
                    &self.kubeconfig_data,
                    &self.kubeconfig,
                    mode.proxy_url(name),
                ) {
                    (Some(data), _, _) => Access::KubeconfigData {
                        data: data.clone(),
                        context: self.context.clone(),
                    },
                    (None, None, Some(url)) => Access::GpustackApi {
                        url,
                        token: self.token.clone(),
                    },
                    (None, path, _) => Access::Kubeconfig {
                        path: path.clone(),
                        context: self.context.clone(),
                    },
                };
                Upstream {
                    name: name.clone(),
                    access,
                    extra_kinds: self.gvks.clone(),
                    from_operator_file: false,
                    cluster_spec: self.cluster_spec.clone(),
                }
            })
            .collect()
    }
}

/// The clusters named by `DELETE /apis/workers?cluster=X[&cluster=Y]`.
pub fn unsubscribe_clusters(pairs: &[(String, String)]) -> Result<Vec<String>, RequestError> {
    let mut clusters = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "cluster" if is_dns_label(v) => clusters.push(v.clone()),
            "cluster" => {
                return Err(RequestError::NotDnsLabel {
                    name: v.clone(),
                    rule: "",
                });
            }
            other => {
                return Err(RequestError::UnknownParameter {
                    name: other.to_owned(),
                    allowed: "is cluster",
                });
            }
        }
    }
    if clusters.is_empty() {
        return Err(RequestError::NoCluster { to: "unsubscribe" });
    }
    Ok(clusters)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mirror::kubeconfig_policy::INLINE_EXAMPLE;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn query_and_json_forms_mean_the_same() {
        let from_query = SubscribeRequest::from_query(&q(&[
            ("cluster", "east"),
            ("token", "t"),
            ("force", ""),
            ("gvk", "worker.gpustack.ai/v1/Instance"),
        ]))
        .unwrap();
        let from_json = SubscribeRequest::from_json(
            br#"{"clusters":["east"],"token":"t","force":true,"gvks":["worker.gpustack.ai/v1/Instance"]}"#,
        )
        .unwrap();
        assert_eq!(from_query, from_json);
        assert!(from_query.force);
        assert_eq!(from_query.gvks[0].kind, "Instance");
    }

    #[test]
    fn bad_requests_say_which_parameter() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[], "cluster: required"),
            (&[("cluster", "East")], "DNS label"),
            (&[("cluster", "a"), ("gvk", "nope")], "group/version/Kind"),
            (
                &[("cluster", "a"), ("mode", "x")],
                "unknown parameter \"mode\"",
            ),
        ];
        for (pairs, expected) in cases {
            let e = SubscribeRequest::from_query(&q(pairs))
                .unwrap_err()
                .to_string();
            assert!(e.contains(expected), "{pairs:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
        let e = SubscribeRequest::from_json(b"{\"clusters\": 3}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a subscription"), "{e}");
        assert!(
            unsubscribe_clusters(&q(&[]))
                .unwrap_err()
                .to_string()
                .contains("required")
        );
        assert_eq!(
            unsubscribe_clusters(&q(&[("cluster", "a")])).unwrap(),
            ["a"]
        );
    }

    /// A JSON body subscribing `east` with `data` inline and the `extra` fields.
    fn inline_body(data: &str, extra: &str) -> Vec<u8> {
        let data = serde_json::to_string(data).unwrap();
        format!(r#"{{"clusters":["east"],"kubeconfigData":{data}{extra}}}"#).into_bytes()
    }

    #[test]
    fn inline_kubeconfigs_are_used_in_either_mode_and_never_shown() {
        let req =
            SubscribeRequest::from_json(&inline_body(INLINE_EXAMPLE, r#","context":"x""#)).unwrap();
        let api = ConnMode::from_flags("gpustack-api", "https", 443);
        for mode in [ConnMode::Loopback, api] {
            let access = &req.upstreams(&mode)[0].access;
            assert_eq!(
                *access,
                Access::KubeconfigData {
                    data: InlineKubeconfig(INLINE_EXAMPLE.into()),
                    context: Some("x".into()),
                }
            );
            assert!(!format!("{access:?}").contains("secret"), "{access:?}");
        }
        assert!(!format!("{req:?}").contains("secret"));
        // Empty is as if absent.
        let req = SubscribeRequest::from_json(&inline_body("", r#","token":"t""#)).unwrap();
        assert_eq!(req.kubeconfig_data, None);
    }

    #[test]
    fn inline_kubeconfigs_are_refused_by_rule_without_being_quoted() {
        let exec = INLINE_EXAMPLE.replace(
            "user: {token: secret-token}",
            "user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: secret-token}}",
        );
        let file = INLINE_EXAMPLE.replace("token: secret-token", "tokenFile: /etc/secret");
        let huge = format!(
            "{INLINE_EXAMPLE}# {}\n",
            "x".repeat(MAX_KUBECONFIG_DATA_BYTES)
        );
        let cases = [
            (
                inline_body(INLINE_EXAMPLE, r#","kubeconfig":"/k""#),
                "kubeconfigData excludes kubeconfig:",
            ),
            (
                inline_body(INLINE_EXAMPLE, r#","token":"t""#),
                "kubeconfigData excludes token:",
            ),
            (
                inline_body(INLINE_EXAMPLE, r#","token":"t","kubeconfig":"/k""#),
                "kubeconfigData excludes kubeconfig and token:",
            ),
            (inline_body(&huge, ""), "at most 262144 allowed"),
            (
                inline_body(&exec, ""),
                "kubeconfigData: users[0] uses an exec credential plugin",
            ),
            (
                inline_body(&file, ""),
                "kubeconfigData: tokenFile names a file",
            ),
            (
                inline_body("secret-token: [", ""),
                "kubeconfigData: not a valid kubeconfig",
            ),
            (
                inline_body(INLINE_EXAMPLE, r#","context":"nope""#),
                "context \"nope\": not a context of the kubeconfigData",
            ),
        ];
        for (body, expected) in cases {
            let e = SubscribeRequest::from_json(&body).unwrap_err().to_string();
            assert!(e.contains(expected), "{expected}: {e}");
            assert!(!e.contains("secret"), "{e}");
            assert_eq!(e.lines().count(), 1, "{e}");
        }
        // The query form has no inline kubeconfig.
        let e = SubscribeRequest::from_query(&q(&[("cluster", "a"), ("kubeconfigData", "x")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown parameter"), "{e}");
    }

    #[test]
    fn upstreams_follow_the_connection_mode() {
        let req =
            SubscribeRequest::from_query(&q(&[("cluster", "east"), ("token", "s3")])).unwrap();
        let api = ConnMode::from_flags("gpustack-api", "https", 443);
        assert_eq!(
            req.upstreams(&api)[0].access,
            Access::GpustackApi {
                url: "https://localhost:443/v2/clusters/east/proxy".into(),
                token: Some("s3".into()),
            }
        );
        assert_eq!(
            req.upstreams(&ConnMode::Loopback)[0].access,
            Access::Kubeconfig {
                path: None,
                context: None
            }
        );
    }
}
