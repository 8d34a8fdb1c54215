//! Who a request is: the identity its bearer token proves.

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The group every authenticated caller is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group allowed everything.
pub const MASTERS: &str = "system:masters";
/// The user name of an embedded cluster's admin token (and of the gateway's `--token-file`
/// token, and of the owner-only unix socket).
pub const ADMIN: &str = "admin";

/// An authenticated caller, as Kubernetes' `UserInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The cluster's administrator: in `system:masters`.
    pub fn admin() -> Self {
        UserInfo {
            username: ADMIN.into(),
            uid: String::new(),
            groups: vec![MASTERS.into(), AUTHENTICATED.into()],
            extra: BTreeMap::new(),
        }
    }

    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// The `userInfo` of reviews.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"username": self.username, "groups": self.groups});
        if !self.uid.is_empty() {
            v["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            v["extra"] = json!(self.extra);
        }
        v
    }
}
