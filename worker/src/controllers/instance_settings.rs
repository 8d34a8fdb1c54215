//! The settings an Instance's Pod and its access addresses are rendered with, as one typed
//! snapshot of the Settings Secret (a missing or unreadable value reads as its default).

use std::collections::BTreeMap;

use crate::settings::catalog;

/// The settings the Instance controller reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSettings {
    /// Requests scaled below limits (`instance-general-resources-overcommit`).
    pub overcommit: bool,
    /// The SSH sidecar's image.
    pub ssh_server_image: String,
    /// `container-registry`: the registry the SSH sidecar's image is pulled from.
    pub container_registry: String,
    /// `container-namespace`: the registry namespace of that image.
    pub container_namespace: String,
    /// `instance-access-static-address`: the address Instances are reached at.
    pub access_static_address: String,
    /// `instance-access-wildcard-dns`: the wildcard domain Instances are named under.
    pub access_wildcard_dns: String,
}

impl Default for InstanceSettings {
    fn default() -> Self {
        Self::from_values(&BTreeMap::new())
    }
}

impl InstanceSettings {
    /// The settings from the Secret's values, defaults where absent.
    pub fn from_values(values: &BTreeMap<String, String>) -> Self {
        let text = |name: &str| {
            values
                .get(name)
                .map(|v| v.trim().to_owned())
                .or_else(|| catalog::find(name).map(|d| d.default.to_owned()))
                .unwrap_or_default()
        };
        Self {
            overcommit: text("instance-general-resources-overcommit")
                .parse()
                .unwrap_or(true),
            ssh_server_image: text("instance-ssh-server-image"),
            container_registry: text("container-registry"),
            container_namespace: text("container-namespace"),
            access_static_address: text("instance-access-static-address"),
            access_wildcard_dns: text("instance-access-wildcard-dns"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        let d = InstanceSettings::default();
        assert!(d.overcommit);
        assert_eq!(d.ssh_server_image, "gpustack/ssh-server:v1.3.0");
        let s = InstanceSettings::from_values(&BTreeMap::from([
            (
                "instance-general-resources-overcommit".into(),
                "false".into(),
            ),
            ("instance-access-wildcard-dns".into(), " traefik.me ".into()),
        ]));
        assert!(!s.overcommit);
        assert_eq!(s.access_wildcard_dns, "traefik.me");
    }
}
