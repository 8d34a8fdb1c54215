//! `Accept` negotiation: which representation a client asked for.

/// The representation to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Representation {
    /// Plain JSON (the object, list or discovery document).
    Json,
    /// A `meta.k8s.io/v1` `Table` (what `kubectl get` asks for).
    Table,
    /// `meta.k8s.io/v1` `PartialObjectMetadata(List)` (kube-rs metadata APIs and watchers).
    Metadata,
}

struct MediaRange<'a> {
    essence: &'a str,
    params: Vec<(&'a str, &'a str)>,
}

fn parse(accept: &str) -> Vec<MediaRange<'_>> {
    accept
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|part| {
            let mut pieces = part.split(';').map(str::trim);
            let essence = pieces.next().unwrap_or("");
            let params = pieces
                .filter_map(|p| p.split_once('='))
                .map(|(k, v)| (k.trim(), v.trim().trim_matches('"')))
                .collect();
            MediaRange { essence, params }
        })
        .collect()
}

fn json_like(essence: &str) -> bool {
    matches!(
        essence,
        "application/json" | "application/*" | "*/*" | "application/yaml"
    )
}

/// For a resource request: the first range we can serve, `None` when nothing is acceptable
/// (406). An empty header means JSON.
pub fn for_resource(accept: &str, table_allowed: bool) -> Option<Representation> {
    let ranges = parse(accept);
    if ranges.is_empty() {
        return Some(Representation::Json);
    }
    for r in ranges {
        if !json_like(r.essence) {
            continue;
        }
        let get = |k: &str| r.params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        match get("as") {
            None => return Some(Representation::Json),
            Some("Table")
                if table_allowed
                    && get("g") == Some("meta.k8s.io")
                    && matches!(get("v"), Some("v1") | Some("v1beta1")) =>
            {
                return Some(Representation::Table);
            }
            Some("PartialObjectMetadata" | "PartialObjectMetadataList")
                if get("g") == Some("meta.k8s.io")
                    && matches!(get("v"), Some("v1") | Some("v1beta1")) =>
            {
                return Some(Representation::Metadata);
            }
            // Anything else is not offered: try the next range.
            Some(_) => continue,
        }
    }
    None
}

/// Whether `accept` allows Kubernetes protobuf objects and nothing JSON-like: the one case a
/// resource is answered in protobuf (clients that list `*/*` or JSON too are answered JSON).
/// Tables and metadata-only forms have no protobuf form here.
pub fn protobuf_only(accept: &str) -> bool {
    let ranges = parse(accept);
    let protobuf = |r: &MediaRange<'_>| {
        r.essence.eq_ignore_ascii_case(crate::protobuf::MEDIA_TYPE)
            && !r.params.iter().any(|(k, _)| *k == "as")
    };
    ranges.iter().any(protobuf) && !ranges.iter().any(|r| json_like(r.essence))
}

/// The form of a discovery document.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// `APIVersions`, `APIGroupList`, `APIGroup`, `APIResourceList`.
    Legacy,
    /// `apidiscovery.k8s.io` `APIGroupDiscoveryList` at this version (`v2` or `v2beta1`).
    Aggregated(&'static str),
}

/// For discovery documents: the first form in `accept` that is served, `None` (406) if none.
/// Only `/api` and `/apis` (`aggregated_allowed`) have the aggregated form.
pub fn for_discovery(accept: &str, aggregated_allowed: bool) -> Option<Discovery> {
    let ranges = parse(accept);
    if ranges.is_empty() {
        return Some(Discovery::Legacy);
    }
    for r in ranges {
        if !json_like(r.essence) {
            continue;
        }
        let get = |k: &str| r.params.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
        match (get("as"), get("g"), get("v")) {
            (None, _, _) => return Some(Discovery::Legacy),
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2"))
                if aggregated_allowed =>
            {
                return Some(Discovery::Aggregated("v2"));
            }
            (Some("APIGroupDiscoveryList"), Some("apidiscovery.k8s.io"), Some("v2beta1"))
                if aggregated_allowed =>
            {
                return Some(Discovery::Aggregated("v2beta1"));
            }
            _ => continue,
        }
    }
    None
}

/// The form of `/openapi/v2`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenApiV2 {
    /// The OpenAPI v2 document as JSON.
    Json,
    /// gnostic's `openapi.v2.Document`.
    Protobuf,
}

/// For `/openapi/v2`: the first form in `accept` that is served, `None` (406) if none. kubectl
/// asks for protobuf only; wildcards and an empty header get JSON.
pub fn for_openapi_v2(accept: &str) -> Option<OpenApiV2> {
    use super::openapi_proto::{MEDIA_TYPE, MEDIA_TYPE_LEGACY};
    let ranges = parse(accept);
    if ranges.is_empty() {
        return Some(OpenApiV2::Json);
    }
    ranges.iter().find_map(|r| match r.essence {
        e if e.eq_ignore_ascii_case(MEDIA_TYPE) || e.eq_ignore_ascii_case(MEDIA_TYPE_LEGACY) => {
            Some(OpenApiV2::Protobuf)
        }
        "application/json" | "application/*" | "*/*" => Some(OpenApiV2::Json),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KUBECTL_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    const AGGREGATED_ONLY: &str =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    const KUBE_RS_AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
    const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

    #[test]
    fn discovery_forms() {
        use Discovery::*;
        assert_eq!(for_discovery("", true), Some(Legacy));
        assert_eq!(for_discovery("application/json", true), Some(Legacy));
        assert_eq!(for_discovery("*/*", true), Some(Legacy));
        assert_eq!(for_discovery("application/json, */*", true), Some(Legacy));
        // kubectl and kube-rs list v2, v2beta1 and then plain JSON: v2 they get.
        assert_eq!(
            for_discovery(KUBECTL_DISCOVERY, true),
            Some(Aggregated("v2"))
        );
        assert_eq!(for_discovery(AGGREGATED_ONLY, true), Some(Aggregated("v2")));
        assert_eq!(
            for_discovery(KUBE_RS_AGGREGATED, true),
            Some(Aggregated("v2"))
        );
        assert_eq!(
            for_discovery(
                "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList",
                true
            ),
            Some(Aggregated("v2beta1"))
        );
        // Where there is no aggregated form (group and version documents): legacy, or 406.
        assert_eq!(for_discovery(KUBECTL_DISCOVERY, false), Some(Legacy));
        assert_eq!(for_discovery(AGGREGATED_ONLY, false), None);
        assert_eq!(
            for_discovery(
                "application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList",
                true
            ),
            None
        );
        assert_eq!(
            for_discovery("application/vnd.kubernetes.protobuf", true),
            None
        );
    }

    #[test]
    fn openapi_v2_forms() {
        use super::OpenApiV2::*;
        let pb = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let old = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";
        assert_eq!(for_openapi_v2(""), Some(Json));
        assert_eq!(for_openapi_v2("application/json"), Some(Json));
        assert_eq!(for_openapi_v2("*/*"), Some(Json));
        assert_eq!(for_openapi_v2(pb), Some(Protobuf));
        assert_eq!(for_openapi_v2(old), Some(Protobuf));
        assert_eq!(
            for_openapi_v2(&format!("{pb}, application/json")),
            Some(Protobuf)
        );
        assert_eq!(
            for_openapi_v2(&format!("application/json;q=0.9, {old}")),
            Some(Json)
        );
        assert_eq!(for_openapi_v2("application/vnd.kubernetes.protobuf"), None);
    }

    #[test]
    fn protobuf_is_chosen_only_when_nothing_else_is_acceptable() {
        let pb = "application/vnd.kubernetes.protobuf";
        assert!(protobuf_only(pb));
        assert!(protobuf_only(&format!("{pb};q=1, text/html")));
        // What kubectl's typed clients send: JSON is acceptable, so JSON it is.
        assert!(!protobuf_only(&format!("{pb}, */*")));
        assert!(!protobuf_only(&format!("{pb},application/json")));
        assert!(!protobuf_only(&format!("{pb};as=Table;v=v1;g=meta.k8s.io")));
        assert!(!protobuf_only(""));
        assert!(!protobuf_only("application/json"));
    }

    #[test]
    fn resource_forms() {
        assert_eq!(for_resource("", true), Some(Representation::Json));
        assert_eq!(
            for_resource("application/json", true),
            Some(Representation::Json)
        );
        assert_eq!(
            for_resource(KUBECTL_TABLE, true),
            Some(Representation::Table)
        );
        assert_eq!(
            for_resource(KUBECTL_TABLE, false),
            Some(Representation::Json)
        );
        assert_eq!(
            for_resource("application/json;as=Table;v=v1;g=meta.k8s.io", true),
            Some(Representation::Table)
        );
        assert_eq!(
            for_resource(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
                true
            ),
            Some(Representation::Metadata)
        );
        assert_eq!(
            for_resource(
                "application/json;as=PartialObjectMetadata;g=other.io;v=v1",
                true
            ),
            None
        );
        assert_eq!(
            for_resource(
                "application/json;as=Other;g=meta.k8s.io;v=v1,application/json",
                true
            ),
            Some(Representation::Json)
        );
        assert_eq!(
            for_resource(
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
                true
            ),
            Some(Representation::Metadata)
        );
        assert_eq!(
            for_resource("application/vnd.kubernetes.protobuf,application/json", true),
            Some(Representation::Json)
        );
        assert_eq!(for_resource("text/html", true), None);
    }
}
