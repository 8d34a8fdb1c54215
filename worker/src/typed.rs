//! Typed objects from JSON values, decoded through their text.
//!
//! kube's typed calls decode each kind from text, so that decoder is compiled into this crate
//! for every kind it reads. `serde_json::from_value` compiles a second decoder per kind, from a
//! `Value`, with every nested type's code: Pod's and Service's were about 150,000 lines of LLVM
//! IR, 7% of the crate (issue 41's build time). Going through text costs a serialisation per
//! call: microseconds for the objects decoded here (an object under review, a rendered Pod).

use serde::{Serialize, de::DeserializeOwned};

/// `value` (a `serde_json::Value`, a `DynamicObject`) as a `T`, decoded from its text.
pub fn from_json<T: DeserializeOwned>(value: &impl Serialize) -> serde_json::Result<T> {
    serde_json::from_str(&serde_json::to_string(value)?)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::from_json;

    #[test]
    fn a_value_decodes_as_from_value_would() {
        let v = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}});
        let through_text: Pod = from_json(&v).unwrap();
        let direct: Pod = serde_json::from_value(v).unwrap();
        assert_eq!(through_text, direct);
        assert_eq!(through_text.spec.unwrap().containers[0].name, "c");
    }

    #[test]
    fn a_value_of_the_wrong_shape_is_refused() {
        let err = from_json::<Pod>(&json!({"spec": {"containers": "none"}})).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
    }
}
