//! Which message a kind is: the generated schema's kinds by `apiVersion` and `kind`, and the
//! magic that opens every envelope.

use super::schema::KINDS;
use super::table::Kind;

/// What every `runtime.Unknown` envelope starts with.
pub const MAGIC: &[u8] = b"k8s\0";

/// The message of `kind` in `api_version`: an object's, or a list's (`DeploymentList`).
/// `DeleteOptions` is registered in every group version, as client-go's scheme registers it:
/// a typed client's delete sends it under the resource's own (`apps/v1 DeleteOptions`).
pub fn message_of(api_version: &str, kind: &str) -> Option<u16> {
    let api_version = if kind == "DeleteOptions" {
        "v1"
    } else {
        api_version
    };
    KINDS.iter().find_map(|k: &Kind| {
        if k.api_version != api_version {
            return None;
        }
        if k.kind == kind {
            return Some(k.message);
        }
        kind.strip_suffix("List")
            .filter(|base| *base == k.kind)
            .and(k.list)
    })
}
