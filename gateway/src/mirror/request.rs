//! Reading a subscription request of `POST /apis/workers`: the query form
//! `?cluster=X[&cluster=Y][&token=T][&force][&gvk=group/version/Kind...][&kubeconfig=PATH][&context=C]`
//! or the same as a JSON body `{clusters, token, force, gvks, kubeconfig, context}`. Every
//! refusal is one line naming the parameter and what is allowed.

use std::path::PathBuf;

use serde::Deserialize;

use super::{
    Access, ConnMode, Upstream,
    config::is_dns_label,
    kinds::{MirroredKind, parse_gvk},
};

/// A validated subscription request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubscribeRequest {
    pub clusters: Vec<String>,
    pub token: Option<String>,
    pub force: bool,
    pub gvks: Vec<MirroredKind>,
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
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
    context: Option<String>,
}

/// Whether a query flag is on: present without a value, or `true`/`1`.
fn flag_on(v: &str) -> bool {
    matches!(v, "" | "true" | "True" | "1")
}

impl SubscribeRequest {
    /// From the query's (key, value) pairs, in order.
    pub fn from_query(pairs: &[(String, String)]) -> Result<Self, String> {
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
                    return Err(format!(
                        "unknown parameter {other:?}: allowed are cluster, token, force, gvk, kubeconfig, context"
                    ));
                }
            }
        }
        req.finish(clusters, gvks)
    }

    /// From a JSON body.
    pub fn from_json(body: &[u8]) -> Result<Self, String> {
        let b: Body = serde_json::from_slice(body)
            .map_err(|e| format!("the body is not a subscription {{clusters, token, force, gvks, kubeconfig, context}}: {e}"))?;
        let mut clusters = b.clusters;
        clusters.extend(b.cluster);
        let req = SubscribeRequest {
            token: b.token,
            force: b.force,
            kubeconfig: b.kubeconfig,
            context: b.context,
            ..Default::default()
        };
        req.finish(clusters, b.gvks)
    }

    fn finish(mut self, clusters: Vec<String>, gvks: Vec<String>) -> Result<Self, String> {
        if clusters.is_empty() {
            return Err(
                "cluster: required (the name of the upstream cluster to subscribe to)".into(),
            );
        }
        if let Some(bad) = clusters.iter().find(|c| !is_dns_label(c)) {
            return Err(format!(
                "cluster {bad:?}: must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters"
            ));
        }
        self.gvks = gvks
            .iter()
            .map(|g| parse_gvk(g))
            .collect::<Result<_, _>>()?;
        self.token = self.token.filter(|t| !t.is_empty());
        self.context = self.context.filter(|c| !c.is_empty());
        self.kubeconfig = self.kubeconfig.filter(|k| !k.as_os_str().is_empty());
        let mut seen = std::collections::HashSet::new();
        clusters.into_iter().for_each(|c| {
            if seen.insert(c.clone()) {
                self.clusters.push(c);
            }
        });
        Ok(self)
    }

    /// The upstreams this request subscribes to in `mode`: with a kubeconfig, through it; else
    /// through the GPUStack server's proxy with the token (`gpustack-api`), or the gateway's
    /// default kubeconfig (`loopback`, one kubeconfig for every cluster, as the reference does).
    pub fn upstreams(&self, mode: &ConnMode) -> Vec<Upstream> {
        self.clusters
            .iter()
            .map(|name| {
                let access = match (&self.kubeconfig, mode.proxy_url(name)) {
                    (None, Some(url)) => Access::GpustackApi {
                        url,
                        token: self.token.clone(),
                    },
                    (path, _) => Access::Kubeconfig {
                        path: path.clone(),
                        context: self.context.clone(),
                    },
                };
                Upstream {
                    name: name.clone(),
                    access,
                    extra_kinds: self.gvks.clone(),
                    from_operator_file: false,
                }
            })
            .collect()
    }
}

/// The clusters named by `DELETE /apis/workers?cluster=X[&cluster=Y]`.
pub fn unsubscribe_clusters(pairs: &[(String, String)]) -> Result<Vec<String>, String> {
    let mut clusters = Vec::new();
    for (k, v) in pairs {
        match k.as_str() {
            "cluster" if is_dns_label(v) => clusters.push(v.clone()),
            "cluster" => return Err(format!("cluster {v:?}: must be a DNS label")),
            other => return Err(format!("unknown parameter {other:?}: allowed is cluster")),
        }
    }
    if clusters.is_empty() {
        return Err("cluster: required (the name of the upstream cluster to unsubscribe)".into());
    }
    Ok(clusters)
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let e = SubscribeRequest::from_query(&q(pairs)).unwrap_err();
            assert!(e.contains(expected), "{pairs:?}: {e}");
            assert_eq!(e.lines().count(), 1);
        }
        let e = SubscribeRequest::from_json(b"{\"clusters\": 3}").unwrap_err();
        assert!(e.contains("not a subscription"), "{e}");
        assert!(
            unsubscribe_clusters(&q(&[]))
                .unwrap_err()
                .contains("required")
        );
        assert_eq!(
            unsubscribe_clusters(&q(&[("cluster", "a")])).unwrap(),
            ["a"]
        );
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
