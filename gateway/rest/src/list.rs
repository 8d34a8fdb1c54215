//! List responses: `limit`/`continue`, the list's metadata, and the body in the representation
//! asked for (the list kind, `PartialObjectMetadataList` or a `Table`).

use serde_json::{Value, json};

use crate::{
    negotiate::Representation,
    pagination::Continue,
    resource::ResourceDef,
    status::ApiError,
    table::{self, IncludeObject},
};

/// `limit`: 0 (no limit) when unset.
pub fn limit(param: Option<&str>) -> Result<usize, ApiError> {
    match param {
        None | Some("") => Ok(0),
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: \"{l}\""))),
    }
}

/// `continue`: where the page starts, if anywhere.
pub fn continue_from(param: Option<&str>) -> Result<Option<Continue>, ApiError> {
    match param {
        None | Some("") => Ok(None),
        Some(tok) => Continue::decode(tok)
            .map(Some)
            .map_err(ApiError::bad_request),
    }
}

/// A list's `metadata`: its resourceVersion and, when there is more, the `continue` token.
pub fn metadata(rv: u64, next: Option<&Continue>) -> Value {
    let mut meta = json!({ "resourceVersion": rv.to_string() });
    if let Some(c) = next {
        meta["continue"] = json!(c.encode());
    }
    meta
}

/// The whole body of a list of `items` (already at `version`).
pub fn render(
    def: &ResourceDef,
    version: &str,
    representation: Representation,
    include: IncludeObject,
    items: Vec<Value>,
    meta: Value,
) -> Value {
    match representation {
        Representation::Json => json!({
            "kind": def.list_kind,
            "apiVersion": def.api_version(version),
            "metadata": meta,
            "items": items,
        }),
        Representation::Metadata => json!({
            "kind": "PartialObjectMetadataList",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "items": items.iter().map(table::partial_object_metadata).collect::<Vec<_>>(),
        }),
        Representation::Table => table::table(def, &items, include, meta, jiff::Timestamp::now()),
    }
}

/// The text before the items of a JSON list whose items are spliced in as stored text,
/// comma-separated and followed by [`VERBATIM_TAIL`].
pub fn verbatim_head(def: &ResourceDef, version: &str, meta: &Value) -> String {
    format!(
        "{{\"kind\":{},\"apiVersion\":{},\"metadata\":{meta},\"items\":[",
        json!(def.list_kind),
        json!(def.api_version(version)),
    )
}

/// What closes a [`verbatim_head`] list.
pub const VERBATIM_TAIL: &str = "]}";

/// The namespace and name an object is ordered (and continued) by.
pub fn position(obj: &Value) -> (String, String) {
    let at = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    (at("/metadata/namespace"), at("/metadata/name"))
}

/// One page of objects held in memory (a server without a store): `items` ordered by
/// namespace and name, those after `from`, at most `limit` (0: all), and the token of the next
/// page when more remain. `rv` is the version the list is read at.
pub fn page(
    items: Vec<Value>,
    limit: usize,
    from: Option<&Continue>,
    rv: u64,
) -> (Vec<Value>, Option<Continue>) {
    let mut items: Vec<((String, String), Value)> =
        items.into_iter().map(|o| (position(&o), o)).collect();
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let after = from.map(|c| (c.namespace.clone(), c.name.clone()));
    let mut rest = items
        .into_iter()
        .filter(|(pos, _)| after.as_ref().is_none_or(|a| pos > a))
        .peekable();
    let mut out = Vec::new();
    while let Some((pos, obj)) = rest.next() {
        out.push(obj);
        if limit != 0 && out.len() == limit {
            let next = rest.peek().is_some().then_some(Continue {
                rv,
                namespace: pos.0,
                name: pos.1,
            });
            return (out, next);
        }
    }
    (out, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn pages_in_order_until_the_end() {
        let all = vec![obj("b", "x"), obj("a", "z"), obj("a", "y")];
        let (first, next) = page(all.clone(), 2, None, 7);
        assert_eq!(first, vec![obj("a", "y"), obj("a", "z")]);
        let next = next.expect("a third object remains");
        assert_eq!(next.rv, 7);
        let token = metadata(7, Some(&next))["continue"]
            .as_str()
            .unwrap()
            .to_owned();
        let from = continue_from(Some(&token)).unwrap().unwrap();
        let (second, last) = page(all.clone(), 2, Some(&from), 7);
        assert_eq!(second, vec![obj("b", "x")]);
        assert!(last.is_none());
        let (exact, none) = page(all, 3, None, 7);
        assert_eq!(exact.len(), 3);
        assert!(none.is_none(), "no token when the page ends the list");
    }

    #[test]
    fn parameters_and_bodies() {
        assert_eq!(limit(None).unwrap(), 0);
        assert_eq!(limit(Some("5")).unwrap(), 5);
        assert_eq!(limit(Some("x")).unwrap_err().code, 400);
        assert_eq!(continue_from(Some("!!")).unwrap_err().code, 400);
        let def = crate::resource::builtins()
            .into_iter()
            .find(|d| d.plural == "configmaps")
            .unwrap();
        let meta = metadata(3, None);
        let items = vec![obj("a", "y")];
        let body = render(
            &def,
            "v1",
            Representation::Metadata,
            IncludeObject::Metadata,
            items.clone(),
            meta.clone(),
        );
        assert_eq!(body["kind"], "PartialObjectMetadataList");
        let spliced = format!(
            "{}{}{VERBATIM_TAIL}",
            verbatim_head(&def, "v1", &meta),
            items[0]
        );
        let json = render(
            &def,
            "v1",
            Representation::Json,
            IncludeObject::Metadata,
            items,
            meta,
        );
        assert_eq!(serde_json::from_str::<Value>(&spliced).unwrap(), json);
    }
}
