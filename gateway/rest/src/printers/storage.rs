//! PersistentVolumeClaim and PersistentVolume, as kube-apiserver prints them. They are stored
//! for charts and `kubectl apply --prune`; nothing provisions or binds them here.

use jiff::Timestamp;
use serde_json::Value;

use super::format::{items, text};
use super::{AGE, Col, col, wide};

/// The columns `kubectl get` shows for PersistentVolumeClaims, as kube-apiserver prints them.
pub const PERSISTENT_VOLUME_CLAIM: &[Col] = &[
    col("Status", "string", claim_status),
    col("Volume", "string", claim_volume),
    col("Capacity", "string", claim_capacity),
    col("Access Modes", "string", claim_access_modes),
    col("StorageClass", "string", claim_storage_class),
    col("VolumeAttributesClass", "string", volume_attributes_class),
    AGE,
    wide("VolumeMode", "string", volume_mode),
];
/// The columns `kubectl get` shows for PersistentVolumes, as kube-apiserver prints them.
pub const PERSISTENT_VOLUME: &[Col] = &[
    col("Capacity", "string", volume_capacity),
    col("Access Modes", "string", volume_access_modes),
    col("Reclaim Policy", "string", reclaim_policy),
    col("Status", "string", claim_status),
    col("Claim", "string", volume_claim),
    col("StorageClass", "string", claim_storage_class),
    col("VolumeAttributesClass", "string", volume_attributes_class),
    col("Reason", "string", volume_reason),
    AGE,
    wide("VolumeMode", "string", volume_mode),
];

/// Access modes in kubectl's short form (`RWO,ROX`).
fn access_modes(obj: &Value, ptr: &str) -> String {
    let short: Vec<&str> = items(obj, ptr)
        .iter()
        .filter_map(Value::as_str)
        .map(|m| match m {
            "ReadWriteOnce" => "RWO",
            "ReadOnlyMany" => "ROX",
            "ReadWriteMany" => "RWX",
            "ReadWriteOncePod" => "RWOP",
            other => other,
        })
        .collect();
    short.join(",")
}

fn claim_status(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/status/phase").into()
}

fn claim_volume(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/spec/volumeName").into()
}

/// A claim shows its capacity and access modes once it names a volume.
fn bound(obj: &Value) -> bool {
    !text(obj, "/spec/volumeName").is_empty()
}

fn claim_capacity(obj: &Value, _: Timestamp) -> Value {
    let capacity = if bound(obj) {
        text(obj, "/status/capacity/storage")
    } else {
        ""
    };
    capacity.into()
}

fn claim_access_modes(obj: &Value, _: Timestamp) -> Value {
    let modes = if bound(obj) {
        access_modes(obj, "/status/accessModes")
    } else {
        String::new()
    };
    modes.into()
}

fn claim_storage_class(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/spec/storageClassName").into()
}

fn volume_attributes_class(obj: &Value, _: Timestamp) -> Value {
    match text(obj, "/spec/volumeAttributesClassName") {
        "" => "<unset>".into(),
        class => class.into(),
    }
}

fn volume_mode(obj: &Value, _: Timestamp) -> Value {
    match text(obj, "/spec/volumeMode") {
        "" => "<unset>".into(),
        mode => mode.into(),
    }
}

fn volume_capacity(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/spec/capacity/storage").into()
}

fn volume_access_modes(obj: &Value, _: Timestamp) -> Value {
    access_modes(obj, "/spec/accessModes").into()
}

fn reclaim_policy(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/spec/persistentVolumeReclaimPolicy").into()
}

/// `namespace/name` of the claim the volume is bound to.
fn volume_claim(obj: &Value, _: Timestamp) -> Value {
    match obj.pointer("/spec/claimRef") {
        Some(r) if r.is_object() => {
            format!("{}/{}", text(r, "/namespace"), text(r, "/name")).into()
        }
        _ => "".into(),
    }
}

fn volume_reason(obj: &Value, _: Timestamp) -> Value {
    text(obj, "/status/reason").into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claims_and_volumes_as_kubectl_shows_them() {
        let now = Timestamp::UNIX_EPOCH;
        let pending = json!({"spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast"},
            "status": {"phase": "Pending"}});
        assert_eq!(claim_status(&pending, now), "Pending");
        assert_eq!(claim_capacity(&pending, now), "");
        assert_eq!(claim_access_modes(&pending, now), "");
        assert_eq!(claim_storage_class(&pending, now), "fast");
        assert_eq!(volume_attributes_class(&pending, now), "<unset>");
        let bound = json!({"spec": {"volumeName": "pv-1"}, "status": {"phase": "Bound",
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"], "capacity": {"storage": "10Gi"}}});
        assert_eq!(claim_capacity(&bound, now), "10Gi");
        assert_eq!(claim_access_modes(&bound, now), "RWO,ROX");
        let pv = json!({"spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "ns", "name": "data"}},
            "status": {"phase": "Bound"}});
        assert_eq!(volume_capacity(&pv, now), "10Gi");
        assert_eq!(volume_access_modes(&pv, now), "RWX");
        assert_eq!(reclaim_policy(&pv, now), "Retain");
        assert_eq!(volume_claim(&pv, now), "ns/data");
        assert_eq!(volume_claim(&json!({}), now), "");
    }
}
