//! Field ownership and server-side apply, after Kubernetes' structured-merge-diff but without
//! schemas. Every write records in `metadata.managedFields` (`FieldsV1`) which fields its manager
//! owns. An update (create, PUT, merge/JSON/strategic patch) takes the fields it changed away
//! from every other manager. An apply owns exactly the fields of its configuration; it is refused
//! with a conflict when it would change a field another manager owns (unless forced, which takes
//! the field over), and it removes the fields it applied before and no longer applies when no one
//! else owns them. Setting a field to the value it already has is no conflict: the field is then
//! shared.
//!
//! Without schemas, shapes are guessed. Lists of objects in built-in kinds are keyed by their
//! strategic-merge key (the one strategic merge uses) and merge item by item (`k:` steps);
//! every other list, and every list of a custom kind, is atomic. Maps and structs look alike, so
//! `.` (ownership of a map itself) is recorded for keyed list items and for maps an update
//! creates, except the top-level `metadata`, `spec` and `status`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::status::ApiError;
use gpustack_kube_rest::resource::Schema;

/// A field path, each step spelled as in `FieldsV1`: `f:name`, `k:{"name":"a"}`.
type Path = Vec<String>;

/// A set of owned fields.
pub type FieldSet = BTreeSet<Path>;

/// Metadata the server owns, never a manager (as Kubernetes strips it before tracking).
const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "selfLink",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
];

/// Top-level fields that are structs in every kind: always there, so never owned as a whole.
const TOP_STRUCTS: &[&str] = &["metadata", "spec", "status"];

/// Whether a write records its fields as applied (server-side apply) or as updated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Server-side apply: the fields are the applied configuration's.
    Apply,
    /// A create, update or non-apply patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Which part of an object an endpoint writes; fields outside it are never owned through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The whole object (a kind without a status subresource).
    All,
    /// The main endpoint of a kind with a status subresource.
    AllButStatus,
    /// The `/status` subresource.
    Status,
}

/// Who writes, and how the written kind is shaped.
#[derive(Clone, Debug)]
pub struct Writer {
    /// The field manager the written fields are recorded under.
    pub manager: String,
    /// The subresource written through (`status`), if any: a managedFields entry records it.
    pub subresource: Option<&'static str>,
    /// The apiVersion the write was made in, recorded with its fields.
    pub api_version: String,
    /// Which lists merge item by item rather than as a whole.
    pub lists: Lists,
    /// The part of the object the endpoint may write.
    pub part: Part,
}

/// How the lists of the written kind merge.
#[derive(Clone, Debug)]
pub enum Lists {
    /// Built-in kinds: lists of objects merge by their strategic-merge key.
    Builtin,
    /// Custom kinds: lists the schema (a CRD's `openAPIV3Schema`) marks
    /// `x-kubernetes-list-type: map` merge by their `x-kubernetes-list-map-keys`; every other
    /// list, and every list of a kind without a schema, is atomic.
    Schema(Option<Schema>),
}

impl Lists {
    /// The keys the items of the list at `fields` (field names from the root, list indices
    /// left out) merge by: every item an object with a distinct value for them. `None`: the
    /// list is atomic.
    fn keys(&self, fields: &[String], items: &[Value]) -> Option<Vec<String>> {
        if !items.iter().all(Value::is_object) {
            return None;
        }
        let keys = match self {
            Lists::Builtin => {
                let refs: Vec<&Value> = items.iter().collect();
                let field = fields.last().map_or("", String::as_str);
                vec![super::strategic::merge_key(field, &refs)?.to_owned()]
            }
            Lists::Schema(schema) => map_list_keys(schema.as_deref()?, fields)?,
        };
        let distinct: BTreeSet<Vec<String>> = items
            .iter()
            .map(|i| keys.iter().map(|k| i[k].to_string()).collect())
            .collect();
        (!keys.is_empty() && distinct.len() == items.len()).then_some(keys)
    }
}

/// The `x-kubernetes-list-map-keys` of the list at `fields` in an OpenAPI v3 schema, when it is
/// a `map` list.
fn map_list_keys(schema: &Value, fields: &[String]) -> Option<Vec<String>> {
    let mut node = schema;
    for f in fields {
        if let Some(items) = node.get("items") {
            node = items;
        }
        node = node.get("properties")?.get(f)?;
    }
    if node.get("x-kubernetes-list-type")?.as_str()? != "map" {
        return None;
    }
    let keys = node.get("x-kubernetes-list-map-keys")?.as_array()?;
    keys.iter().map(|k| k.as_str().map(str::to_owned)).collect()
}

/// A field an apply would change that another manager owns.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    /// The owner, as Kubernetes names it in messages (`"kubectl-edit" using v1`).
    pub manager: String,
    /// The field, as `.spec.containers[name="app"].image`.
    pub field: String,
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: Option<String>,
    time: Option<String>,
    fields: FieldSet,
}

impl Entry {
    fn new(w: &Writer, op: Operation, fields: FieldSet, time: Option<String>) -> Self {
        Entry {
            manager: w.manager.clone(),
            operation: op.as_str().into(),
            api_version: w.api_version.clone(),
            subresource: w.subresource.map(Into::into),
            time,
            fields,
        }
    }

    fn parse(v: &Value) -> Self {
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        Entry {
            manager: text("manager").unwrap_or_default(),
            operation: text("operation").unwrap_or_default(),
            api_version: text("apiVersion").unwrap_or_default(),
            subresource: text("subresource").filter(|s| !s.is_empty()),
            time: text("time"),
            fields: v.get("fieldsV1").map(decode).unwrap_or_default(),
        }
    }

    fn to_json(&self) -> Value {
        let mut e = json!({
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
        });
        if let Some(t) = &self.time {
            e["time"] = json!(t);
        }
        e["fieldsType"] = json!("FieldsV1");
        e["fieldsV1"] = encode(&self.fields);
        if let Some(s) = &self.subresource {
            e["subresource"] = json!(s);
        }
        e
    }

    /// Whether this is `w`'s entry for `op`. Updates are told apart by API version too; an
    /// applier keeps one entry whatever version it applies through.
    fn belongs_to(&self, w: &Writer, op: Operation) -> bool {
        self.manager == w.manager
            && self.operation == op.as_str()
            && self.subresource.as_deref() == w.subresource
            && (op == Operation::Apply || self.api_version == w.api_version)
    }

    /// The manager as Kubernetes' conflict messages name it.
    fn describe(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(" with subresource {sub:?}"));
        }
        if self.operation == Operation::Update.as_str() {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// A `FieldsV1` tree being built: `.` marks a node owned itself.
#[derive(Default)]
struct Trie {
    member: bool,
    children: BTreeMap<String, Trie>,
}

impl Trie {
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.to_json());
        }
        Value::Object(m)
    }
}

/// The `FieldsV1` form of `set`.
fn encode(set: &FieldSet) -> Value {
    let mut root = Trie::default();
    for path in set {
        let mut node = &mut root;
        for step in path {
            node = node.children.entry(step.clone()).or_default();
        }
        node.member = true;
    }
    root.to_json()
}

/// The set a `FieldsV1` value names: its empty nodes and those with a `.`.
fn decode(fields: &Value) -> FieldSet {
    fn walk(m: &Map<String, Value>, path: &mut Path, out: &mut FieldSet) {
        if m.is_empty() && !path.is_empty() {
            out.insert(path.clone());
        }
        for (k, child) in m {
            if k == "." {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
                continue;
            }
            path.push(k.clone());
            match child.as_object() {
                Some(c) => walk(c, path, out),
                None => {
                    out.insert(path.clone());
                }
            }
            path.pop();
        }
    }
    let mut out = FieldSet::new();
    if let Some(m) = fields.as_object() {
        walk(m, &mut Vec::new(), &mut out);
    }
    out
}

/// A path as Kubernetes prints it: `.spec.containers[name="app"].image`.
fn display(path: &Path) -> String {
    let step = |s: &String| {
        if let Some(f) = s.strip_prefix("f:") {
            format!(".{f}")
        } else if let Some(key) = item_key(s) {
            let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!("[{}]", parts.join(","))
        } else if let Some(v) = s.strip_prefix("v:") {
            format!("[={v}]")
        } else if let Some(i) = s.strip_prefix("i:") {
            format!("[{i}]")
        } else {
            s.clone()
        }
    };
    path.iter().map(step).collect()
}

/// The key fields of a `k:` step.
fn item_key(step: &str) -> Option<Map<String, Value>> {
    serde_json::from_str(step.strip_prefix("k:")?).ok()
}

fn item_matches(item: &Value, key: &Map<String, Value>) -> bool {
    key.iter().all(|(k, v)| item.get(k) == Some(v))
}

/// The `k:` step naming `item` of a list keyed by `keys`.
fn item_step(keys: &[String], item: &Value) -> String {
    let m: Map<String, Value> = keys
        .iter()
        .map(|k| (k.clone(), item.get(k).cloned().unwrap_or(Value::Null)))
        .collect();
    format!("k:{}", Value::Object(m))
}

/// The field names of a path, list items left out: where in a schema the path points.
fn field_names(path: &Path) -> Vec<String> {
    path.iter()
        .filter_map(|s| s.strip_prefix("f:").map(str::to_owned))
        .collect()
}

/// What sits at an owned path: a value, or a node whose children are owned on their own.
#[derive(Debug, PartialEq)]
enum Node<'a> {
    Leaf(&'a Value),
    Inner,
}

/// Collects the ownable paths of an object.
struct Walker<'a> {
    lists: &'a Lists,
    /// Whether non-empty maps are ownable nodes too (for updates; an applied configuration owns
    /// only what it sets).
    maps: bool,
    path: Path,
    out: BTreeMap<Path, Node<'a>>,
}

impl<'a> Walker<'a> {
    fn map(&mut self, m: &'a Map<String, Value>) {
        for (k, v) in m {
            if self.server_owned(k) {
                continue;
            }
            self.path.push(format!("f:{k}"));
            self.value(k, v);
            self.path.pop();
        }
    }

    fn server_owned(&self, k: &str) -> bool {
        match self.path.as_slice() {
            [] => matches!(k, "apiVersion" | "kind"),
            [m] if m == "f:metadata" => SERVER_METADATA.contains(&k),
            _ => false,
        }
    }

    fn value(&mut self, field: &str, v: &'a Value) {
        // An empty list is a value of its own (as an empty map is), whatever its items merge by.
        let keys = match v {
            Value::Array(items) if !items.is_empty() => {
                self.lists.keys(&field_names(&self.path), items)
            }
            _ => None,
        };
        match v {
            Value::Object(m) if !m.is_empty() => {
                let top_struct = self.path.len() == 1 && TOP_STRUCTS.contains(&field);
                if self.maps && !top_struct {
                    self.out.insert(self.path.clone(), Node::Inner);
                }
                self.map(m);
            }
            Value::Array(items) => match keys {
                Some(keys) => {
                    for item in items {
                        self.path.push(item_step(&keys, item));
                        self.out.insert(self.path.clone(), Node::Inner);
                        if let Value::Object(m) = item {
                            self.map(m);
                        }
                        self.path.pop();
                    }
                }
                None => {
                    self.out.insert(self.path.clone(), Node::Leaf(v));
                }
            },
            _ => {
                self.out.insert(self.path.clone(), Node::Leaf(v));
            }
        }
    }
}

fn atoms<'a>(obj: &'a Value, lists: &'a Lists, maps: bool) -> BTreeMap<Path, Node<'a>> {
    let mut w = Walker {
        lists,
        maps,
        path: Vec::new(),
        out: BTreeMap::new(),
    };
    if let Value::Object(m) = obj {
        w.map(m);
    }
    w.out
}

fn in_part(path: &Path, part: Part) -> bool {
    let status = path.first().is_some_and(|s| s == "f:status");
    match part {
        Part::All => true,
        Part::AllButStatus => !status,
        Part::Status => status,
    }
}

/// The fields an applied configuration sets, as far as `w`'s endpoint writes them.
pub fn applied_fields(config: &Value, w: &Writer) -> FieldSet {
    atoms(config, &w.lists, false)
        .into_keys()
        .filter(|p| in_part(p, w.part))
        .collect()
}

/// What a write did to an object's fields.
#[derive(Debug, Default, PartialEq)]
struct Comparison {
    /// Set or changed (added or modified).
    changed: FieldSet,
    removed: FieldSet,
}

impl Comparison {
    fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }
}

fn compare(old: &Value, new: &Value, w: &Writer) -> Comparison {
    let before = atoms(old, &w.lists, true);
    let after = atoms(new, &w.lists, true);
    let changed = after
        .iter()
        .filter(|(p, n)| before.get(*p) != Some(*n) && in_part(p, w.part))
        .map(|(p, _)| p.clone())
        .collect();
    let removed = before
        .keys()
        .filter(|p| !after.contains_key(*p) && in_part(p, w.part))
        .cloned()
        .collect();
    Comparison { changed, removed }
}

fn entries_of(obj: &Value) -> Vec<Entry> {
    obj.pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .map(|a| a.iter().map(Entry::parse).collect())
        .unwrap_or_default()
}

/// The entries an update starts from. Through the main endpoint a client may rewrite
/// managedFields (kubectl does, moving client-side apply ownership to server-side apply);
/// an empty or missing list leaves them as they are, so that clients unaware of them do not
/// wipe them.
fn base_entries(current: &Value, new: &Value, w: &Writer) -> Vec<Entry> {
    let requested = new
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .is_some_and(|a| !a.is_empty());
    if requested && w.subresource.is_none() {
        entries_of(new)
    } else {
        entries_of(current)
    }
}

/// Writes `entries` (those still owning something) in Kubernetes' order: appliers first, then
/// by time, manager, version and subresource.
fn set_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        let key = |e: &Entry| {
            (
                e.operation.clone(),
                e.time.clone().unwrap_or_default(),
                e.manager.clone(),
                e.api_version.clone(),
                e.subresource.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    let Some(meta) = obj["metadata"].as_object_mut() else {
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        let list = entries.iter().map(Entry::to_json).collect();
        meta.insert("managedFields".into(), Value::Array(list));
    }
}

/// Records the ownership an update (or a create, with `current` `{}`) takes: the fields it set
/// or changed become `w`'s, and nobody else's; fields it removed are nobody's.
pub fn own_updated(current: &Value, new: &mut Value, w: &Writer, now: jiff::Timestamp) {
    let cmp = compare(current, new, w);
    let mut entries = base_entries(current, new, w);
    for e in &mut entries {
        for p in cmp.changed.iter().chain(&cmp.removed) {
            e.fields.remove(p);
        }
    }
    // Like Kubernetes, an update that changed nothing leaves its manager's entry (and time) alone.
    if !cmp.changed.is_empty() {
        let time = Some(super::objects::rfc3339(now));
        match entries
            .iter_mut()
            .find(|e| e.belongs_to(w, Operation::Update))
        {
            Some(mine) => {
                mine.fields.extend(cmp.changed);
                mine.time = time;
            }
            None => entries.push(Entry::new(w, Operation::Update, cmp.changed, time)),
        }
    }
    set_entries(new, entries);
}

/// Whether `path`, or anything inside it, is in `set`.
fn owned_within(set: &FieldSet, path: &Path) -> bool {
    set.range(path.clone()..)
        .next()
        .is_some_and(|q| q.starts_with(path))
}

/// Whether `path` is a key field of a list item (which names the item, so stays with it).
fn is_item_key(path: &Path) -> bool {
    let [.., item, field] = path.as_slice() else {
        return false;
    };
    match (item_key(item), field.strip_prefix("f:")) {
        (Some(key), Some(f)) => key.contains_key(f),
        _ => false,
    }
}

fn child_mut<'a>(v: &'a mut Value, step: &str) -> Option<&'a mut Value> {
    if let Some(f) = step.strip_prefix("f:") {
        return v.get_mut(f);
    }
    let key = item_key(step)?;
    v.as_array_mut()?.iter_mut().find(|i| item_matches(i, &key))
}

fn remove(doc: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = doc;
    for step in parents {
        match child_mut(cur, step) {
            Some(next) => cur = next,
            None => return,
        }
    }
    match cur {
        Value::Object(m) => {
            if let Some(f) = last.strip_prefix("f:") {
                m.remove(f);
            }
        }
        Value::Array(items) => {
            if let Some(key) = item_key(last) {
                items.retain(|i| !item_matches(i, &key));
            }
        }
        _ => {}
    }
}

/// `live` with `config` merged in: maps recursively, keyed lists item by item, anything else
/// replaced.
fn merge(live: &Value, config: &Value, fields: &mut Vec<String>, lists: &Lists) -> Value {
    match (live, config) {
        (Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (k, cv) in c {
                let merged = match l.get(k) {
                    Some(lv) => {
                        fields.push(k.clone());
                        let merged = merge(lv, cv, fields, lists);
                        fields.pop();
                        merged
                    }
                    None => cv.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(c)) => {
            match (lists.keys(fields, l), lists.keys(fields, c)) {
                (Some(a), Some(b)) if a == b => merge_items(l, c, &a, fields, lists),
                _ => config.clone(),
            }
        }
        _ => config.clone(),
    }
}

/// Keyed items: live ones in their order (merged with their configured selves), then new ones.
fn merge_items(
    live: &[Value],
    config: &[Value],
    keys: &[String],
    fields: &mut Vec<String>,
    lists: &Lists,
) -> Value {
    let find = |list: &[Value], item: &Value| {
        list.iter()
            .position(|x| keys.iter().all(|k| x[k] == item[k]))
    };
    let mut out: Vec<Value> = live
        .iter()
        .map(|l| match find(config, l) {
            Some(i) => merge(l, &config[i], fields, lists),
            None => l.clone(),
        })
        .collect();
    out.extend(config.iter().filter(|c| find(live, c).is_none()).cloned());
    Value::Array(out)
}

/// `current` with `config` applied by `w`, before ownership is settled ([`own_applied`]): the
/// configuration merged in, and the fields `w` applied before but no longer applies removed
/// unless another manager owns them.
pub fn merge_applied(current: &Value, config: &Value, w: &Writer) -> Value {
    let applied = applied_fields(config, w);
    let mut kept = applied.clone();
    let mut last = FieldSet::new();
    for e in entries_of(current) {
        if e.belongs_to(w, Operation::Apply) {
            last = e.fields;
        } else {
            kept.extend(e.fields);
        }
    }
    let mut doc = merge(current, config, &mut Vec::new(), &w.lists);
    for path in last.difference(&applied) {
        if !owned_within(&kept, path) && !is_item_key(path) {
            remove(&mut doc, path);
        }
    }
    doc
}

/// Settles ownership after `w` applied `config`, turning `current` into `new`: `w` owns the
/// configuration's fields; a field another manager owns that the apply changed is a conflict,
/// or with `force` no longer theirs. The entry's time moves only when something changed, so
/// re-applying the same configuration is a no-op.
pub fn own_applied(
    current: &Value,
    new: &mut Value,
    config: &Value,
    w: &Writer,
    force: bool,
    now: jiff::Timestamp,
) -> Result<(), Vec<Conflict>> {
    let cmp = compare(current, new, w);
    let applied = applied_fields(config, w);
    let mut entries = entries_of(current);
    let previous = entries
        .iter()
        .position(|e| e.belongs_to(w, Operation::Apply))
        .map(|i| entries.remove(i));
    let mut conflicts = Vec::new();
    for e in &mut entries {
        let clash: Vec<Path> = e.fields.intersection(&cmp.changed).cloned().collect();
        if !force {
            conflicts.extend(clash.iter().map(|p| Conflict {
                manager: e.describe(),
                field: display(p),
            }));
        }
        for p in clash.iter().chain(&cmp.removed) {
            e.fields.remove(p);
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        return Err(conflicts);
    }
    let time = match previous {
        Some(p) if cmp.is_empty() && p.fields == applied => p.time,
        _ => Some(super::objects::rfc3339(now)),
    };
    entries.push(Entry::new(w, Operation::Apply, applied, time));
    set_entries(new, entries);
    Ok(())
}

/// The 409 an apply with conflicts answers, worded as Kubernetes words it (kubectl recognises
/// it and suggests `--force-conflicts`).
pub fn conflict_error(conflicts: Vec<Conflict>) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with {}", c.manager),
                "field": c.field,
            })
        })
        .collect();
    let message = match conflicts.as_slice() {
        [one] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            one.manager, one.field
        ),
        all => {
            let mut lines = Vec::new();
            let mut owner: Option<&str> = None;
            for c in all {
                if owner != Some(c.manager.as_str()) {
                    lines.push(format!("conflicts with {}:", c.manager));
                    owner = Some(c.manager.as_str());
                }
                lines.push(format!("- {}", c.field));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                all.len(),
                lines.join("\n")
            )
        }
    };
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(json!({ "causes": causes })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    fn later() -> jiff::Timestamp {
        "2027-01-01T00:00:00Z".parse().unwrap()
    }

    fn writer(manager: &str) -> Writer {
        Writer {
            manager: manager.into(),
            subresource: None,
            api_version: "v1".into(),
            lists: Lists::Builtin,
            part: Part::All,
        }
    }

    fn path(steps: &[&str]) -> Path {
        steps.iter().map(|s| s.to_string()).collect()
    }

    /// `current` after `manager` applied `config`.
    fn apply(
        current: &Value,
        config: Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, Vec<Conflict>> {
        let w = writer(manager);
        let mut new = merge_applied(current, &config, &w);
        own_applied(current, &mut new, &config, &w, force, now())?;
        Ok(new)
    }

    /// `current` after `manager` updated it to `new` (as a PUT or patch would).
    fn update(current: &Value, mut new: Value, manager: &str) -> Value {
        own_updated(current, &mut new, &writer(manager), now());
        new
    }

    fn fields_of(obj: &Value, manager: &str) -> Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["manager"] == manager)
            .map(|e| e["fieldsV1"].clone())
            .unwrap_or(Value::Null)
    }

    fn managers(obj: &Value) -> Vec<String> {
        obj["metadata"]["managedFields"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|e| e["manager"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    #[test]
    fn applied_fields_are_leaves_and_keyed_items() {
        let config = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "d", "labels": {"a": "1"}},
            "spec": {"args": ["x"], "empty": {}, "containers": [{"name": "app", "image": "i"}]}});
        let f = applied_fields(&config, &writer("m"));
        assert_eq!(
            encode(&f),
            json!({
                "f:metadata": {"f:labels": {"f:a": {}}},
                "f:spec": {
                    "f:args": {},
                    "f:containers": {"k:{\"name\":\"app\"}": {".": {}, "f:image": {}, "f:name": {}}},
                    "f:empty": {},
                },
            })
        );
        assert_eq!(decode(&encode(&f)), f);
        // Custom kinds' lists are atomic; /status owns only status.
        let mut w = writer("m");
        w.lists = Lists::Schema(None);
        w.part = Part::Status;
        let f = applied_fields(
            &json!({"spec": {"x": 1}, "status": {"list": [{"name": "a"}]}}),
            &w,
        );
        assert_eq!(encode(&f), json!({"f:status": {"f:list": {}}}));
    }

    #[test]
    fn paths_print_as_kubernetes_prints_them() {
        assert_eq!(
            display(&path(&[
                "f:spec",
                "f:containers",
                "k:{\"name\":\"app\"}",
                "f:image"
            ])),
            ".spec.containers[name=\"app\"].image"
        );
        assert_eq!(
            display(&path(&["f:spec", "f:ports", "k:{\"port\":80}"])),
            ".spec.ports[port=80]"
        );
    }

    #[test]
    fn updates_own_what_they_change_and_mark_new_maps() {
        let created = update(&json!({}), cm(json!({"a": "1"})), "creator");
        assert_eq!(
            fields_of(&created, "creator"),
            json!({"f:data": {".": {}, "f:a": {}}})
        );
        let entry = &created["metadata"]["managedFields"][0];
        assert_eq!(entry["operation"], "Update");
        assert_eq!(entry["apiVersion"], "v1");
        assert_eq!(entry["fieldsType"], "FieldsV1");
        assert_eq!(entry["time"], "2026-01-01T00:00:00Z");
        // Another manager changes a and adds b: both are its own, a no longer the creator's.
        let mut new = created.clone();
        new["data"] = json!({"a": "2", "b": "1"});
        let edited = update(&created, new, "editor");
        assert_eq!(fields_of(&edited, "creator"), json!({"f:data": {}}));
        assert_eq!(
            fields_of(&edited, "editor"),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        // An update that changes nothing records nothing.
        assert_eq!(update(&edited, edited.clone(), "third"), edited);
    }

    #[test]
    fn clients_may_rewrite_or_clear_managed_fields() {
        let created = update(&json!({}), cm(json!({"a": "1"})), "creator");
        let mut cleared = created.clone();
        cleared["metadata"]["managedFields"] = json!([{}]);
        let cleared = update(&created, cleared, "x");
        assert!(cleared["metadata"].get("managedFields").is_none());
        // An empty list keeps what there was.
        let mut kept = created.clone();
        kept["metadata"]["managedFields"] = json!([]);
        assert_eq!(managers(&update(&created, kept, "x")), ["creator"]);
    }

    #[test]
    fn appliers_conflict_on_changes_and_share_equal_values() {
        let one = apply(&json!({}), cm(json!({"a": "1", "b": "1"})), "one", false).unwrap();
        let err = apply(&one, cm(json!({"a": "2", "b": "2"})), "two", false).unwrap_err();
        assert_eq!(
            err,
            [
                Conflict {
                    manager: "\"one\"".into(),
                    field: ".data.a".into()
                },
                Conflict {
                    manager: "\"one\"".into(),
                    field: ".data.b".into()
                },
            ]
        );
        let e = conflict_error(err);
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 2 conflicts: conflicts with \"one\":\n- .data.a\n- .data.b"
        );
        assert_eq!(
            e.details.unwrap()["causes"][0],
            json!({"reason": "FieldManagerConflict", "message": "conflict with \"one\"", "field": ".data.a"})
        );
        // The same value is shared ownership, no conflict.
        let shared = apply(&one, cm(json!({"a": "1"})), "two", false).unwrap();
        assert_eq!(
            fields_of(&shared, "one"),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        assert_eq!(fields_of(&shared, "two"), json!({"f:data": {"f:a": {}}}));
        // Shared: when one stops applying a, it stays (two owns it).
        let after = apply(&shared, cm(json!({"b": "1"})), "one", false).unwrap();
        assert_eq!(after["data"], json!({"a": "1", "b": "1"}));
    }

    #[test]
    fn force_takes_fields_over() {
        let one = apply(&json!({}), cm(json!({"a": "1", "b": "1"})), "one", false).unwrap();
        let forced = apply(&one, cm(json!({"a": "2"})), "two", true).unwrap();
        assert_eq!(forced["data"], json!({"a": "2", "b": "1"}));
        assert_eq!(fields_of(&forced, "one"), json!({"f:data": {"f:b": {}}}));
        assert_eq!(fields_of(&forced, "two"), json!({"f:data": {"f:a": {}}}));
        // Forcing away everything a manager owned drops its entry.
        let all = apply(&forced, cm(json!({"a": "3", "b": "3"})), "two", true).unwrap();
        assert_eq!(managers(&all), ["two"]);
    }

    #[test]
    fn updates_then_applies_conflict_naming_the_version() {
        let created = update(&json!({}), cm(json!({"a": "1"})), "kubectl-edit");
        let err = apply(&created, cm(json!({"a": "2"})), "kubectl", false).unwrap_err();
        let e = conflict_error(err);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using v1: .data.a"
        );
        let mut w = writer("ctrl");
        w.subresource = Some("status");
        let entry = Entry::new(&w, Operation::Update, FieldSet::new(), None);
        assert_eq!(
            entry.describe(),
            "\"ctrl\" with subresource \"status\" using v1"
        );
    }

    #[test]
    fn omitted_fields_go_unless_someone_else_owns_them() {
        let obj = json!({"metadata": {"name": "a"}, "spec": {"other": 1}});
        let one = apply(&obj, json!({"spec": {"x": 1, "y": 2}}), "m", false).unwrap();
        assert_eq!(one["spec"], json!({"other": 1, "x": 1, "y": 2}));
        let two = apply(&one, json!({"spec": {"x": 3}}), "m", false).unwrap();
        assert_eq!(two["spec"], json!({"other": 1, "x": 3}));
        let three = apply(&two, json!({"spec": {"z": 1}}), "n", false).unwrap();
        assert_eq!(three["spec"], json!({"other": 1, "x": 3, "z": 1}));
        assert_eq!(managers(&three), ["m", "n"]);
        // A field an updater took over stays when its applier stops applying it.
        let mut edited = three.clone();
        edited["spec"]["x"] = json!(4);
        let edited = update(&three, edited, "editor");
        let four = apply(&edited, json!({"spec": {}}), "m", false).unwrap();
        assert_eq!(four["spec"], json!({"other": 1, "x": 4, "z": 1}));
    }

    #[test]
    fn keyed_items_merge_and_prune_one_by_one() {
        let pod = |containers: Value| json!({"spec": {"containers": containers}});
        let one = apply(
            &json!({}),
            pod(json!([{"name": "app", "image": "a:1"}, {"name": "side", "image": "s:1"}])),
            "one",
            false,
        )
        .unwrap();
        // Another applier adds its own container; the first one's stay.
        let two = apply(
            &one,
            pod(json!([{"name": "extra", "image": "e:1"}])),
            "two",
            false,
        )
        .unwrap();
        let names = |o: &Value| -> Vec<String> {
            o["spec"]["containers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["name"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(names(&two), ["app", "side", "extra"]);
        // The first applier drops "side": it goes, the others stay.
        let three = apply(
            &two,
            pod(json!([{"name": "app", "image": "a:1"}])),
            "one",
            false,
        )
        .unwrap();
        assert_eq!(names(&three), ["app", "extra"]);
        // Changing another's container image conflicts, on that field only.
        let err = apply(
            &three,
            pod(json!([{"name": "app", "image": "a:2"}])),
            "two",
            false,
        )
        .unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(err[0].field, ".spec.containers[name=\"app\"].image");
    }

    #[test]
    fn reapplying_the_same_configuration_changes_nothing() {
        let w = writer("m");
        let config = json!({"spec": {"x": 1}});
        let obj = json!({"metadata": {"name": "a"}});
        let mut one = merge_applied(&obj, &config, &w);
        own_applied(&obj, &mut one, &config, &w, false, now()).unwrap();
        let mut two = merge_applied(&one, &config, &w);
        own_applied(&one, &mut two, &config, &w, false, later()).unwrap();
        assert_eq!(one, two);
    }

    #[test]
    fn custom_map_lists_merge_by_their_schema_keys() {
        // `ports` keyed by two fields; `tags` atomic (no list type).
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "properties": {"port": {"type": "integer"}}}},
            "tags": {"type": "array", "items": {"type": "object"}},
        }}}});
        let mut w = writer("a");
        w.lists = Lists::Schema(Some(schema.into()));
        let live = json!({"spec": {
            "ports": [{"port": 80, "protocol": "TCP", "n": 1}, {"port": 80, "protocol": "UDP"}],
            "tags": [{"t": 1}, {"t": 2}],
        }});
        let config = json!({"spec": {
            "ports": [{"port": 80, "protocol": "UDP", "n": 2}],
            "tags": [{"t": 3}],
        }});
        let merged = merge_applied(&live, &config, &w);
        assert_eq!(
            merged["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "n": 1}, {"port": 80, "protocol": "UDP", "n": 2}])
        );
        assert_eq!(merged["spec"]["tags"], json!([{"t": 3}]));
        let fields = encode(&applied_fields(&config, &w));
        assert_eq!(
            fields,
            json!({"f:spec": {
                "f:ports": {"k:{\"port\":80,\"protocol\":\"UDP\"}": {".": {}, "f:n": {}, "f:port": {}, "f:protocol": {}}},
                "f:tags": {},
            }})
        );
    }
}
