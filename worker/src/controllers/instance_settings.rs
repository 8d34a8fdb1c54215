//! The settings an Instance's Pod and its access addresses are rendered with, as one typed
//! snapshot of the Settings Secret (a missing or unreadable value reads as its default).

use std::collections::BTreeMap;

use crate::settings::catalog;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceSettings {
    /// Requests scaled below limits (`instance-general-resources-overcommit`).
    pub overcommit: bool,
    pub ssh_server_image: String,
    pub container_registry: String,
    pub container_namespace: String,
    pub access_static_address: String,
    pub access_wildcard_dns: String,
}

impl Default for InstanceSettings {
    fn default() -> Self {
        Self::from_values(&BTreeMap::new())
    }
}

impl InstanceSettings {
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
