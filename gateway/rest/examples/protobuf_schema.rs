//! Generates `src/protobuf/schema.rs`, the wire schema of Kubernetes' protobuf messages, from
//! the source of the `k8s-pb` crate (its prost structs: field tags and types) and the JSON
//! names of the same fields from `k8s-openapi`'s source (prost snake-cases the proto names,
//! losing acronyms such as `podIP`; k8s-openapi's serde keys keep them).
//!
//! ```text
//! cargo run -p gpustack-kube-rest --example protobuf_schema > gateway/rest/src/protobuf/schema.rs
//! ```
//!
//! (rustfmt leaves the file as written: one message a line.)
//!
//! Both crates are found through `cargo metadata` (they are dev-dependencies of the toolkit).
//! The table holds the messages reachable from the kinds k8s-pb declares (its `Resource`
//! impls), a few kinds only sent as subresources, their lists and the `meta/v1` envelopes.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::Command;

use syn::{Expr, Fields, GenericArgument, Item, Lit, PathArguments, Type};

/// Kinds k8s-pb has no `Resource` impl for but clients send or read: `module`, message.
const EXTRA_KINDS: &[(&str, &str)] = &[
    ("api.authentication.v1", "TokenRequest"),
    ("api.autoscaling.v1", "Scale"),
    ("api.policy.v1", "Eviction"),
];

/// Messages of `meta/v1` clients exchange besides objects (`apiVersion: v1` on the wire).
const META_KINDS: &[&str] = &["Status", "WatchEvent", "DeleteOptions"];

/// Messages with a JSON form of their own (see `protobuf::decode`), by module and name.
const SPECIAL: &[(&str, &str)] = &[
    ("apimachinery.pkg.apis.meta.v1.Time", "Time"),
    ("apimachinery.pkg.apis.meta.v1.MicroTime", "MicroTime"),
    ("apimachinery.pkg.apis.meta.v1.FieldsV1", "RawJson"),
    ("apimachinery.pkg.runtime.RawExtension", "RawJson"),
    ("apimachinery.pkg.api.resource.Quantity", "Quantity"),
    ("apimachinery.pkg.util.intstr.IntOrString", "IntOrString"),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.Json",
        "RawJson",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrArray",
        "PropsOrArray",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrBool",
        "PropsOrBool",
    ),
    (
        "apiextensions_apiserver.pkg.apis.apiextensions.v1.JsonSchemaPropsOrStringArray",
        "PropsOrStringArray",
    ),
];

#[derive(Debug, Clone)]
enum Ty {
    Scalar(&'static str),
    Message(String),
    Map(&'static str, Option<String>),
}

#[derive(Debug, Clone)]
struct PbField {
    tag: u32,
    rust: String,
    ty: Ty,
    repeated: bool,
}

#[derive(Debug)]
struct PbMessage {
    module: String,
    name: String,
    fields: Vec<PbField>,
}

fn main() {
    let (pb, openapi) = crate_dirs();
    let mut messages = BTreeMap::new();
    let mut resources = Vec::new();
    read_pb(&pb.join("src"), &[], &mut messages, &mut resources);
    let names = read_openapi_names(&newest_version_dir(&openapi.join("src")));
    // Every key of every struct: names for the fields of messages k8s-openapi has no struct
    // for (inline-only ones such as `VolumeSource`, newer alpha kinds).
    let mut any_key: HashMap<String, String> = HashMap::new();
    for keys in names.values() {
        for (n, json) in keys {
            any_key.entry(n.clone()).or_insert_with(|| json.clone());
        }
    }

    // Kinds: (apiVersion, kind, message, list message).
    let mut versions: HashMap<String, String> = HashMap::new();
    for (module, _, api_version, _) in &resources {
        versions.insert(module.clone(), api_version.clone());
    }
    let mut kinds: Vec<(String, String, String)> = resources
        .iter()
        .map(|(m, name, av, kind)| (av.clone(), kind.clone(), format!("{m}.{name}")))
        .collect();
    for (module, name) in EXTRA_KINDS {
        kinds.push((
            versions[*module].clone(),
            name.to_string(),
            format!("{module}.{name}"),
        ));
    }
    for name in META_KINDS {
        let full = format!("apimachinery.pkg.apis.meta.v1.{name}");
        kinds.push(("v1".into(), name.to_string(), full));
    }
    kinds.sort();
    kinds.dedup();

    // Everything reachable from the kinds and their lists.
    let mut keep = BTreeSet::new();
    let mut queue: VecDeque<String> = VecDeque::new();
    for (_, _, full) in &kinds {
        queue.push_back(full.clone());
        let list = format!("{full}List");
        if messages.contains_key(&list) {
            queue.push_back(list);
        }
    }
    while let Some(m) = queue.pop_front() {
        if !keep.insert(m.clone()) {
            continue;
        }
        let msg: &PbMessage = messages.get(&m).unwrap_or_else(|| panic!("no message {m}"));
        for f in &msg.fields {
            match &f.ty {
                Ty::Message(t) | Ty::Map(_, Some(t)) => queue.push_back(t.clone()),
                _ => {}
            }
        }
    }
    let order: Vec<&String> = keep.iter().collect();
    let index: HashMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), i))
        .collect();

    let mut fallbacks = Vec::new();
    let mut out = String::new();
    out.push_str(HEADER);
    out.push_str("pub(super) static MESSAGES: &[Message] = &[\n");
    for (i, full) in order.iter().enumerate() {
        let msg = &messages[*full];
        let special = SPECIAL
            .iter()
            .find(|(n, _)| n == full)
            .map_or("Plain", |(_, s)| s);
        let json = names.get(&(msg.module.replace('.', "/"), msg.name.to_lowercase()));
        // A Go named slice (`type ExtraValue []string`): a message of one repeated `items`
        // field on the wire, a bare list in JSON (and no struct in k8s-openapi).
        let special = match &msg.fields[..] {
            [f] if special == "Plain" && json.is_none() && f.repeated && f.rust == "items" => {
                "Items"
            }
            _ => special,
        };
        out.push_str(&format!(
            "    // {i}\n    Message {{ name: {full:?}, special: Special::{special}, fields: &["
        ));
        for f in &msg.fields {
            let name = match json {
                Some(keys) => match keys.get(&normalized(&f.rust)) {
                    Some(n) => n.clone(),
                    // Not a key of its own: a Go struct embedded inline (`Volume`'s
                    // `VolumeSource`), whose fields are the parent's keys.
                    None if inlined(f, keys, &messages) => String::new(),
                    None => {
                        fallbacks.push(format!("{full}.{}", f.rust));
                        lower_camel(&f.rust)
                    }
                },
                None => match any_key.get(&normalized(&f.rust)) {
                    Some(n) => n.clone(),
                    None => {
                        if special == "Plain" {
                            fallbacks.push(format!("{full}.{}", f.rust));
                        }
                        lower_camel(&f.rust)
                    }
                },
            };
            let ty = match &f.ty {
                Ty::Scalar(s) => s.to_string(),
                Ty::Message(t) => format!("Msg({})", index[t.as_str()]),
                Ty::Map(v, None) => format!("Map{v}"),
                Ty::Map(_, Some(t)) => format!("MapMsg({})", index[t.as_str()]),
            };
            let ctor = if f.repeated { "many" } else { "one" };
            out.push_str(&format!("{ctor}({}, {name:?}, {ty}), ", f.tag));
        }
        out.push_str("] },\n");
    }
    out.push_str("];\n\n");
    out.push_str("pub(super) static KINDS: &[Kind] = &[\n");
    for (av, kind, full) in &kinds {
        let list = format!("{full}List");
        let list = index
            .get(list.as_str())
            .map_or("None".to_string(), |i| format!("Some({i})"));
        out.push_str(&format!(
            "    Kind {{ api_version: {av:?}, kind: {kind:?}, message: {}, list: {list} }},\n",
            index[full.as_str()]
        ));
    }
    out.push_str("];\n");
    print!("{out}");
    if !fallbacks.is_empty() {
        eprintln!(
            "{} fields not in k8s-openapi, named by lowerCamelCase: {}",
            fallbacks.len(),
            fallbacks.join(", ")
        );
    }
    eprintln!("{} messages, {} kinds", order.len(), kinds.len());
}

const HEADER: &str =
    "//! The wire schema of Kubernetes' protobuf messages, generated from k8s-pb's prost structs
//! with JSON names from k8s-openapi by `cargo run -p gpustack-kube-rest --example
//! protobuf_schema`. Do not edit: regenerate. `agreement_tests.rs` checks it against
//! k8s-pb's types.

use super::table::{Kind, Message, Special, Ty::*, many, one};

";

/// A name as both crates' spellings of it agree: `pod_ip`, `podIP`; `non_resource_ur_ls`,
/// `nonResourceURLs`; `x_kubernetes_list_type`, `x-kubernetes-list-type`; `ref`, `$ref`.
fn normalized(name: &str) -> String {
    name.chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect()
}

/// Whether message field `f` is embedded inline: every field of its type is a key of the parent.
fn inlined(
    f: &PbField,
    keys: &HashMap<String, String>,
    messages: &BTreeMap<String, PbMessage>,
) -> bool {
    let (Ty::Message(t), false) = (&f.ty, f.repeated) else {
        return false;
    };
    let inner = &messages[t];
    inner
        .fields
        .iter()
        .all(|g| keys.contains_key(&normalized(&g.rust)) || inlined(g, keys, messages))
}

fn lower_camel(snake: &str) -> String {
    let mut out = String::new();
    let mut up = false;
    for c in snake.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// k8s-pb's and k8s-openapi's source directories, from `cargo metadata`.
fn crate_dirs() -> (PathBuf, PathBuf) {
    let host = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc runs");
    let host = String::from_utf8_lossy(&host.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
        .expect("rustc names its host");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let dir = |name: &str| -> PathBuf {
        let pkg = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("{name} is not a dependency"));
        Path::new(pkg["manifest_path"].as_str().expect("a manifest path"))
            .parent()
            .expect("a directory")
            .to_owned()
    };
    (dir("k8s-pb"), dir("k8s-openapi"))
}

/// Collects the prost messages and `Resource` impls of `dir` (module `module`) and below.
fn read_pb(
    dir: &Path,
    module: &[String],
    messages: &mut BTreeMap<String, PbMessage>,
    resources: &mut Vec<(String, String, String, String)>,
) {
    let file = if module.is_empty() {
        dir.join("lib.rs")
    } else {
        dir.join("mod.rs")
    };
    let text = std::fs::read_to_string(&file).expect("a k8s-pb module");
    let ast = syn::parse_file(&text).expect("k8s-pb parses");
    let here = module.join(".");
    for item in ast.items {
        match item {
            Item::Mod(m) if m.content.is_none() => {
                let mut sub = module.to_vec();
                sub.push(m.ident.to_string());
                read_pb(&dir.join(m.ident.to_string()), &sub, messages, resources);
            }
            Item::Struct(s) => {
                let Fields::Named(named) = &s.fields else {
                    continue;
                };
                let mut fields = Vec::new();
                for f in &named.named {
                    let Some(attr) = f.attrs.iter().find(|a| a.path().is_ident("prost")) else {
                        continue;
                    };
                    let rust = f.ident.as_ref().expect("named").to_string();
                    let rust = rust.trim_start_matches("r#").to_owned();
                    fields.push(field(attr, rust, &f.ty, module));
                }
                let name = s.ident.to_string();
                messages.insert(
                    format!("{here}.{name}"),
                    PbMessage {
                        module: here.clone(),
                        name,
                        fields,
                    },
                );
            }
            Item::Impl(i) => {
                let Some((_, trait_path, _)) = &i.trait_ else {
                    continue;
                };
                if trait_path.segments.last().map(|s| s.ident.to_string())
                    != Some("Resource".into())
                {
                    continue;
                }
                let Type::Path(self_ty) = &*i.self_ty else {
                    continue;
                };
                let name = self_ty
                    .path
                    .segments
                    .last()
                    .expect("a type")
                    .ident
                    .to_string();
                let mut consts = HashMap::new();
                for it in &i.items {
                    if let syn::ImplItem::Const(c) = it
                        && let Expr::Lit(l) = &c.expr
                        && let Lit::Str(s) = &l.lit
                    {
                        consts.insert(c.ident.to_string(), s.value());
                    }
                }
                resources.push((
                    here.clone(),
                    name,
                    consts["API_VERSION"].clone(),
                    consts["KIND"].clone(),
                ));
            }
            _ => {}
        }
    }
}

/// One field from its `#[prost(...)]` attribute and Rust type.
fn field(attr: &syn::Attribute, rust: String, ty: &Type, module: &[String]) -> PbField {
    let mut words = Vec::new();
    let mut tag = None;
    let mut map = None;
    attr.parse_nested_meta(|m| {
        let key = m
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        if m.input.peek(syn::Token![=]) {
            let v: syn::LitStr = m.value()?.parse()?;
            match key.as_str() {
                "tag" => tag = Some(v.value().parse::<u32>().expect("a numeric tag")),
                "btree_map" | "map" => map = Some(v.value()),
                // `bytes = "vec"`: the Rust representation of a bytes field.
                "bytes" => words.push(key),
                _ => {}
            }
        } else {
            words.push(key);
        }
        Ok(())
    })
    .expect("a prost attribute");
    let repeated = words.iter().any(|w| w == "repeated");
    let scalar = |w: &str| -> Option<&'static str> {
        Some(match w {
            "string" => "Str",
            "bytes" => "Bytes",
            "bool" => "Bool",
            "int32" => "I32",
            "int64" => "I64",
            "double" => "F64",
            _ => return None,
        })
    };
    let ty = if let Some(map) = map {
        let (k, v) = map.split_once(',').expect("key, value");
        assert_eq!(k.trim(), "string", "map keys are strings");
        match v.trim() {
            "string" => Ty::Map("Str", None),
            "bytes" => Ty::Map("Bytes", None),
            "message" => Ty::Map("Msg", Some(resolve(innermost(ty), module))),
            other => panic!("map of {other}"),
        }
    } else if words.iter().any(|w| w == "message") {
        Ty::Message(resolve(innermost(ty), module))
    } else {
        let s = words
            .iter()
            .find_map(|w| scalar(w))
            .unwrap_or_else(|| panic!("unknown prost type in {words:?}"));
        Ty::Scalar(s)
    };
    PbField {
        tag: tag.expect("a tag"),
        rust,
        ty,
        repeated,
    }
}

/// The message type inside `Option<…>`, `Vec<…>`, `Box<…>` or a map's value.
fn innermost(ty: &Type) -> &syn::Path {
    let Type::Path(p) = ty else {
        panic!("a path type")
    };
    let last = p.path.segments.last().expect("a segment");
    match &last.arguments {
        PathArguments::AngleBracketed(args) => {
            let inner = args
                .args
                .iter()
                .rev()
                .find_map(|a| match a {
                    GenericArgument::Type(t) => Some(t),
                    _ => None,
                })
                .expect("a type argument");
            innermost(inner)
        }
        _ => &p.path,
    }
}

/// `super::…::Name` seen from `module`, as `module.Name`.
fn resolve(path: &syn::Path, module: &[String]) -> String {
    let mut at: Vec<String> = module.to_vec();
    let segs: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let mut rest = &segs[..];
    if rest.first().map(String::as_str) == Some("crate") {
        at.clear();
        rest = &rest[1..];
    }
    while rest.first().map(String::as_str) == Some("super") {
        at.pop();
        rest = &rest[1..];
    }
    at.extend(rest.iter().cloned());
    at.join(".")
}

/// The newest `v1_NN` tree of k8s-openapi (a superset of the field names of older ones).
fn newest_version_dir(src: &Path) -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir(src)
        .expect("k8s-openapi's src")
        .filter_map(|e| {
            let e = e.ok()?;
            let minor = e.file_name().to_str()?.strip_prefix("v1_")?.parse().ok()?;
            Some((minor, e.path()))
        })
        .collect();
    versions.sort();
    versions.pop().expect("a version tree").1
}

/// (module path, lowercased struct) → normalized JSON key → JSON key, from k8s-openapi's
/// deserializers (`"podIP" => Field::Key_pod_ip,`).
fn read_openapi_names(root: &Path) -> HashMap<(String, String), HashMap<String, String>> {
    let mut out = HashMap::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("a directory").flatten() {
            let path = e.path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            let Some(name) = text.lines().find_map(|l| {
                l.strip_prefix("pub struct ")
                    .and_then(|r| r.split([' ', '<', '{']).next())
                    .map(str::to_owned)
            }) else {
                continue;
            };
            let module = path
                .parent()
                .expect("a parent")
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .into_owned();
            let mut keys = HashMap::new();
            for l in text.lines() {
                let l = l.trim();
                if let Some((json, _)) = l.split_once(" => Field::Key_")
                    && let Some(json) = json.strip_prefix('"').and_then(|j| j.strip_suffix('"'))
                {
                    keys.insert(normalized(json), json.to_owned());
                }
            }
            out.insert((module, name.to_lowercase()), keys);
        }
    }
    out
}
