//! Impersonation (`kubectl --as`, `--as-group`, `--as-uid`): the `Impersonate-User`,
//! `Impersonate-Group`, `Impersonate-Uid` and `Impersonate-Extra-<key>` headers, as
//! kube-apiserver reads them. The caller must be allowed the `impersonate` verb on each thing it
//! asks to be (a user, each group, the uid, each extra value, or a ServiceAccount); the request
//! then runs as that identity. Never ignored: headers without a user are refused.

use std::collections::BTreeMap;

use axum::http::HeaderMap;

use super::{AUTHENTICATED, UserInfo, rbac::Attributes};

const USER: &str = "impersonate-user";
const GROUP: &str = "impersonate-group";
const UID: &str = "impersonate-uid";
const EXTRA_PREFIX: &str = "impersonate-extra-";

/// What a request asks to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requested {
    /// The user name asked for (`Impersonate-User`).
    pub user: String,
    /// The uid asked for (`Impersonate-Uid`), if any.
    pub uid: Option<String>,
    /// The groups asked for (`Impersonate-Group`).
    pub groups: Vec<String>,
    /// The extra attributes asked for (`Impersonate-Extra-*`), by key.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// A malformed impersonation request.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Malformed {
    /// Groups, a uid or extras were asked for without a user.
    #[error("impersonating groups, a uid or extra values needs Impersonate-User as well")]
    NoUser,
    /// The named header's value is not text.
    #[error("the header {0} is not valid text")]
    NotText(String),
    /// The named header's extra key is not valid percent-encoding.
    #[error("the extra key of {0} is not valid percent-encoding")]
    BadKey(String),
}

/// The impersonation `headers` ask for; `None` when they ask for none.
pub fn requested(headers: &HeaderMap) -> Result<Option<Requested>, Malformed> {
    let text = |name: &str, v: &axum::http::HeaderValue| {
        v.to_str()
            .map(str::to_owned)
            .map_err(|_| Malformed::NotText(name.to_owned()))
    };
    let mut user = None;
    let mut uid = None;
    let mut groups = Vec::new();
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str();
        if name == USER {
            user = Some(text(name, value)?);
        } else if name == UID {
            uid = Some(text(name, value)?);
        } else if name == GROUP {
            groups.push(text(name, value)?);
        } else if let Some(key) = name.strip_prefix(EXTRA_PREFIX) {
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8()
                .map_err(|_| Malformed::BadKey(name.to_owned()))?
                .into_owned();
            extra.entry(key).or_default().push(text(name, value)?);
        }
    }
    match user {
        Some(user) => Ok(Some(Requested {
            user,
            uid,
            groups,
            extra,
        })),
        None if uid.is_some() || !groups.is_empty() || !extra.is_empty() => Err(Malformed::NoUser),
        None => Ok(None),
    }
}

fn resource(verb_on: &str, group: &str, namespace: &str, name: &str) -> Attributes {
    let (resource, subresource) = verb_on.split_once('/').unwrap_or((verb_on, ""));
    Attributes::Resource {
        verb: "impersonate".into(),
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

/// The ServiceAccount (namespace, name) a user name stands for.
fn service_account(user: &str) -> Option<(&str, &str)> {
    user.strip_prefix("system:serviceaccount:")?.split_once(':')
}

/// What the caller must be allowed, one `impersonate` each.
pub fn checks(r: &Requested) -> Vec<Attributes> {
    let mut out = vec![match service_account(&r.user) {
        Some((ns, name)) => resource("serviceaccounts", "", ns, name),
        None => resource("users", "", "", &r.user),
    }];
    out.extend(r.groups.iter().map(|g| resource("groups", "", "", g)));
    if let Some(uid) = &r.uid {
        out.push(resource("uids", "authentication.k8s.io", "", uid));
    }
    for (key, values) in &r.extra {
        for v in values {
            out.push(resource(
                &format!("userextras/{key}"),
                "authentication.k8s.io",
                "",
                v,
            ));
        }
    }
    out
}

/// The identity the request runs as: the user, its groups (a ServiceAccount's own groups
/// added), `system:authenticated` unless anonymous, its uid and extras.
pub fn identity(r: &Requested) -> UserInfo {
    let mut groups = r.groups.clone();
    if let Some((ns, _)) = service_account(&r.user) {
        for g in [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{ns}"),
        ] {
            if !groups.contains(&g) {
                groups.push(g);
            }
        }
    }
    if r.user != "system:anonymous" && !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    UserInfo {
        username: r.user.clone(),
        uid: r.uid.clone().unwrap_or_default(),
        groups,
        extra: r.extra.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn headers_become_a_request() {
        assert_eq!(
            requested(&headers(&[("authorization", "Bearer x")])),
            Ok(None)
        );
        let r = requested(&headers(&[
            ("Impersonate-User", "jane"),
            ("Impersonate-Group", "dev"),
            ("Impersonate-Group", "ops"),
            ("Impersonate-Extra-Acme.com%2Fproject", "a"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(r.user, "jane");
        assert_eq!(r.groups, ["dev", "ops"]);
        assert_eq!(r.extra["acme.com/project"], ["a"]);
        assert_eq!(
            requested(&headers(&[("Impersonate-Group", "dev")])),
            Err(Malformed::NoUser)
        );
    }

    #[test]
    fn each_part_is_checked_and_the_identity_completed() {
        let r = Requested {
            user: "system:serviceaccount:team:bot".into(),
            uid: Some("u1".into()),
            groups: vec!["dev".into()],
            extra: BTreeMap::from([("scopes".into(), vec!["a".into()])]),
        };
        let c = checks(&r);
        assert_eq!(c.len(), 4);
        assert_eq!(c[0], resource("serviceaccounts", "", "team", "bot"));
        assert_eq!(c[1], resource("groups", "", "", "dev"));
        assert_eq!(c[2], resource("uids", "authentication.k8s.io", "", "u1"));
        assert_eq!(
            c[3],
            resource("userextras/scopes", "authentication.k8s.io", "", "a")
        );
        let id = identity(&r);
        assert_eq!(
            id.groups,
            [
                "dev",
                "system:serviceaccounts",
                "system:serviceaccounts:team",
                "system:authenticated"
            ]
        );
        assert_eq!(id.uid, "u1");
    }
}
