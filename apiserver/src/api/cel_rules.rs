//! A CRD's `x-kubernetes-validations` rules, as kube-apiserver enforces them: each rule is a
//! CEL expression with `self` bound to the value at the schema node that carries it (per
//! element for a list's items or a map's values) and, on an update, `oldSelf` bound to the
//! value it replaces. A rule that reads `oldSelf` (a transition rule) runs only where an old
//! value exists; any other rule is skipped where the value did not change (ratcheting, as
//! validation.rs does for the schema).
//!
//! What a CRD may carry is checked when it is written ([`super::cel_rules_crd`]). Here,
//! evaluation runs off the async thread and stops at a deadline, in a bounded number of
//! slots; each rule is compiled and estimated again before it runs (a CRD stored before these
//! checks cannot run an unbounded one), and a value larger than costs are estimated for is
//! refused rather than evaluated.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelOptional, CelString,
    CelUInt,
};
use cel::common::value::Val;
use serde_json::{Map, Value};

use super::cel_bounds::{self, BoundsError};
use super::cel_cost::{self, Estimator, Shape};
use super::cel_names::escape;
use super::field_errors::MAX_CAUSES;
use super::field_errors::{FieldError, Problem, invalid};
use super::status::ApiError;
use crate::registry::ResourceDef;

/// How long all rules of one write may take.
pub const RULES_TIME: Duration = Duration::from_secs(1);
/// How much longer the request waits for a rule running when the deadline passed.
const GRACE: Duration = Duration::from_millis(500);
/// The longest message a `messageExpression` may produce.
const MAX_MESSAGE: usize = 5 * 1024;

pub(super) fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

pub(super) fn str_at<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// The rules of a schema node.
pub(super) fn rules_of(schema: &Value) -> &[Value] {
    schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// How many rules `schema` carries, counted up to `limit` (past it, `limit + 1`).
pub(super) fn count_rules(schema: &Value, limit: usize) -> usize {
    let mut stack = vec![schema];
    let mut count = 0;
    while let Some(s) = stack.pop() {
        count += rules_of(s).len();
        if count > limit {
            return limit + 1;
        }
        stack.extend(children(s).map(|(_, c)| c));
    }
    count
}

/// Whether `schema` or any node under it carries a rule.
pub fn has_rules(schema: &Value) -> bool {
    count_rules(schema, 0) > 0
}

/// How a child schema is reached from its parent.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Step<'s> {
    Property(&'s str),
    Items,
    Additional,
}

/// The child schemas of a node.
pub(super) fn children(schema: &Value) -> impl Iterator<Item = (Step<'_>, &Value)> {
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (Step::Property(k.as_str()), v));
    let items = schema
        .get("items")
        .filter(|i| i.is_object())
        .map(|i| (Step::Items, i));
    let additional = schema
        .get("additionalProperties")
        .filter(|a| a.is_object())
        .map(|a| (Step::Additional, a));
    props.chain(items).chain(additional)
}

/// The `reason` a rule's failure is reported with.
pub(super) fn reason(name: Option<&str>) -> Option<Problem> {
    match name {
        None | Some("FieldValueInvalid") => Some(Problem::Invalid),
        Some("FieldValueForbidden") => Some(Problem::Forbidden),
        Some("FieldValueRequired") => Some(Problem::Required),
        Some("FieldValueDuplicate") => Some(Problem::Duplicate),
        Some(_) => None,
    }
}

/// A rule's `fieldPath` resolved against the schema at its node: the path suffix it names
/// (`.a`, `[key]`), or `None` when it names no field there.
pub(super) fn field_path(schema: &Value, path: &str) -> Option<String> {
    let mut out = String::new();
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let (name, after) = if let Some(r) = rest.strip_prefix("['") {
            let end = r.find("']")?;
            (&r[..end], &r[end + 2..])
        } else if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            (&r[..end], &r[end..])
        } else {
            return None;
        };
        if name.is_empty() {
            return None;
        }
        if let Some(p) = node.get("properties").and_then(|p| p.get(name)) {
            out.push('.');
            out.push_str(name);
            node = p;
        } else if let Some(a) = node.get("additionalProperties").filter(|a| a.is_object()) {
            out.push_str(&format!("[{name}]"));
            node = a;
        } else {
            return None;
        }
        rest = after;
    }
    Some(out)
}

/// A compiled rule, with whether it reads `oldSelf`.
pub(super) struct Compiled {
    program: cel::Program,
    pub(super) transition: bool,
}

/// Why a rule is refused before it runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum Refused {
    #[error(transparent)]
    Bounds(#[from] BoundsError),
    #[error("{0}")]
    TooCostly(String),
    #[error("compilation failed: undefined field '{0}'")]
    Undefined(String),
}

/// Compiles `source` and estimates it with `self` (and `oldSelf`) shaped as `schema`: the
/// program and its estimated cost.
pub(super) fn compile(
    source: &str,
    schema: &Value,
    what: &str,
) -> Result<(Compiled, u64), Refused> {
    let program = cel_bounds::compile(source)?;
    let transition = program.references().has_variable("oldSelf");
    let shape = Shape::of_schema(schema);
    let mut estimator = Estimator::new(vec![
        ("self".into(), shape.clone()),
        ("oldSelf".into(), shape),
    ]);
    let cost = estimator.cost(program.expression());
    if let Some(field) = estimator.undefined.pop() {
        return Err(Refused::Undefined(field));
    }
    if cost > cel_cost::EXPRESSION_LIMIT {
        return Err(Refused::TooCostly(cel_cost::over_budget(
            what,
            cost,
            cel_cost::EXPRESSION_LIMIT,
        )));
    }
    Ok((
        Compiled {
            program,
            transition,
        },
        cost,
    ))
}

/// `v` as a CEL value shaped by `schema`, borrowing its strings: numbers typed by the schema,
/// properties under their escaped names, an embedded resource's metadata as kube-apiserver
/// shows it (only `name` and `generateName`).
fn to_val<'a>(schema: Option<&Value>, v: &'a Value, embedded: bool) -> Box<dyn Val + 'a> {
    match v {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => {
            let wanted = schema.and_then(|s| str_at(s, "type"));
            match (wanted, n.as_i64(), n.as_u64()) {
                (Some("number"), _, _) => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
                (_, Some(i), _) => Box::new(CelInt::from(i)),
                (_, None, Some(u)) => Box::new(CelUInt::from(u)),
                _ => Box::new(CelDouble::from(n.as_f64().unwrap_or(0.0))),
            }
        }
        Value::String(s) => Box::new(CelString::from(s.as_str())),
        Value::Array(items) => {
            let item = schema.and_then(|s| s.get("items"));
            Box::new(CelList::from(
                items
                    .iter()
                    .map(|i| to_val(item, i, false))
                    .collect::<Vec<_>>(),
            ))
        }
        Value::Object(m) => object_val(schema, m, embedded),
    }
}

fn object_val<'a>(
    schema: Option<&Value>,
    m: &'a Map<String, Value>,
    embedded: bool,
) -> Box<dyn Val + 'a> {
    let embedded = embedded || schema.is_some_and(|s| flag(s, "x-kubernetes-embedded-resource"));
    let props = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let additional = schema
        .and_then(|s| s.get("additionalProperties"))
        .filter(|a| a.is_object());
    let mut out: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::with_capacity(m.len());
    for (k, v) in m {
        if embedded && k == "metadata" {
            let mut meta: HashMap<CelMapKey<'a>, Box<dyn Val + 'a>> = HashMap::new();
            for key in ["name", "generateName"] {
                if let Some(s) = v.get(key).and_then(Value::as_str) {
                    meta.insert(key.into(), Box::new(CelString::from(s)));
                }
            }
            out.insert("metadata".into(), Box::new(CelMap::from(meta)));
            continue;
        }
        match (props.and_then(|p| p.get(k)), additional) {
            (Some(child), _) => {
                if let Some(name) = escape(k) {
                    let key: CelMapKey<'a> = match name {
                        Cow::Borrowed(_) => k.as_str().into(),
                        Cow::Owned(s) => s.into(),
                    };
                    out.insert(key, to_val(Some(child), v, false));
                }
            }
            (None, Some(a)) => {
                out.insert(k.as_str().into(), to_val(Some(a), v, false));
            }
            // A field the schema keeps without describing it (preserve-unknown-fields).
            (None, None) => {
                out.insert(k.as_str().into(), to_val(None, v, false));
            }
        }
    }
    Box::new(CelMap::from(out))
}

/// The schema's name for the type at a node (what an `Invalid value` shows).
fn type_name(schema: &Value) -> Value {
    Value::from(str_at(schema, "type").unwrap_or(""))
}

/// A path step under `path`.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// How a field error names the root.
fn shown(path: &str) -> String {
    if path.is_empty() {
        "<nil>".into()
    } else {
        path.to_owned()
    }
}

/// The identity of a map list's item: its key fields' values.
fn list_key(item: &Value, keys: &[&str]) -> String {
    let values: Vec<&Value> = keys
        .iter()
        .map(|k| item.get(*k).unwrap_or(&Value::Null))
        .collect();
    serde_json::to_string(&values).unwrap_or_default()
}

/// One evaluation of a custom resource's rules.
struct Evaluation<'s, 'c, 'a> {
    root: &'c cel::Context<'c, 'a>,
    /// Rules compiled so far (by source), or why they cannot run.
    compiled: HashMap<&'s str, Result<Arc<Compiled>, Refused>>,
    deadline: Instant,
    /// Failures found so far, shared so that a request answered at its deadline still names
    /// those the walk had found (bounded by [`MAX_CAUSES`]).
    found: Arc<Mutex<Vec<FieldError>>>,
    count: usize,
    stopped: bool,
}

impl<'s, 'c, 'a> Evaluation<'s, 'c, 'a> {
    fn compiled(&mut self, source: &'s str, schema: &Value) -> Result<Arc<Compiled>, Refused> {
        self.compiled
            .entry(source)
            .or_insert_with(|| {
                compile(source, schema, "estimated rule cost").map(|(c, _)| Arc::new(c))
            })
            .clone()
    }

    /// Out of time, or enough failures to answer with.
    fn done(&self) -> bool {
        self.stopped || self.count >= MAX_CAUSES
    }

    fn push(&mut self, e: FieldError) {
        if self.count < MAX_CAUSES {
            self.count += 1;
            found(&self.found).push(e);
        }
    }

    fn node(
        &mut self,
        schema: &'s Value,
        v: &'a Value,
        old: Option<&'a Value>,
        path: &str,
        root: bool,
    ) {
        if self.done() || v.is_null() {
            return;
        }
        let rules = rules_of(schema);
        if !rules.is_empty() {
            self.rules(schema, rules, v, old, path, root);
        }
        match v {
            Value::Object(m) => {
                let embedded = root || flag(schema, "x-kubernetes-embedded-resource");
                let props = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties").filter(|a| a.is_object());
                for (k, child) in m {
                    if embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
                        continue;
                    }
                    let (s, p) = match (props.and_then(|p| p.get(k)), additional) {
                        (Some(s), _) => (s, join(path, k)),
                        (None, Some(a)) => (a, format!("{path}[{k}]")),
                        (None, None) => continue,
                    };
                    if has_rules(s) {
                        self.node(s, child, old.and_then(|o| o.get(k)), &p, false);
                    }
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema
                    .get("items")
                    .filter(|i| i.is_object() && has_rules(i))
                else {
                    return;
                };
                let keys: Vec<&str> = schema
                    .get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let is_map =
                    str_at(schema, "x-kubernetes-list-type") == Some("map") && !keys.is_empty();
                // Old items by key, so that correlating stays linear.
                let old_items: HashMap<String, &'a Value> =
                    match (is_map, old.and_then(Value::as_array)) {
                        (true, Some(o)) => o.iter().map(|i| (list_key(i, &keys), i)).collect(),
                        _ => HashMap::new(),
                    };
                for (i, item) in items.iter().enumerate() {
                    // Millions of items must not each format a path once the walk is over.
                    if self.done() {
                        return;
                    }
                    let old_item = if is_map {
                        old_items.get(&list_key(item, &keys)).copied()
                    } else {
                        None
                    };
                    self.node(item_schema, item, old_item, &format!("{path}[{i}]"), false);
                }
            }
            _ => {}
        }
    }

    fn rules(
        &mut self,
        schema: &'s Value,
        rules: &'s [Value],
        v: &'a Value,
        old: Option<&'a Value>,
        path: &str,
        root: bool,
    ) {
        let root_ctx = self.root;
        let mut scope: Option<cel::Context<'c, 'a>> = None;
        // Costs were estimated for values within a kube-apiserver request; a larger one could
        // cost more per call than the estimate allowed, and a call cannot be stopped midway.
        let mut too_large: Option<bool> = None;
        for rule in rules {
            let source = str_at(rule, "rule").unwrap_or_default();
            let compiled = match self.compiled(source, schema) {
                Ok(c) => c,
                Err(e) => {
                    self.push(FieldError {
                        problem: Problem::Invalid,
                        field: shown(path),
                        value: Some(type_name(schema)),
                        detail: format!("rule cannot run: {e}: {}", source.trim()),
                    });
                    continue;
                }
            };
            // With `optionalOldSelf`, a transition rule runs on creation too, its oldSelf
            // an empty optional.
            let optional = flag(rule, "optionalOldSelf");
            if compiled.transition && old.is_none() && !optional {
                continue;
            }
            if !compiled.transition && old == Some(v) {
                continue;
            }
            let too_large = *too_large.get_or_insert_with(|| {
                [Some(v), old].into_iter().flatten().any(|x| {
                    gpustack_kube_rest::schema::json_size(x, cel_cost::REQUEST_BYTES as usize)
                        .is_none()
                })
            });
            if too_large {
                self.push(FieldError {
                    problem: Problem::Invalid,
                    field: shown(path),
                    value: Some(type_name(schema)),
                    detail: format!(
                        "call cost exceeds limit for rule: {} (the value is larger than the {} bytes rules are estimated for)",
                        rule_text(rule),
                        cel_cost::REQUEST_BYTES
                    ),
                });
                continue;
            }
            if Instant::now() >= self.deadline {
                self.push(FieldError {
                    problem: Problem::Invalid,
                    field: shown(path),
                    value: Some(type_name(schema)),
                    detail: format!(
                        "validation rules ran out of their {RULES_TIME:?}; no further rules were evaluated"
                    ),
                });
                self.stopped = true;
                return;
            }
            let scope = scope.get_or_insert_with(|| {
                let mut c = root_ctx.new_inner_scope();
                c.add_variable_as_val("self", to_val(Some(schema), v, root));
                if let Some(o) = old {
                    c.add_variable_as_val("oldSelf", to_val(Some(schema), o, root));
                }
                c
            });
            // An optional rule sees oldSelf as an optional, in a scope of its own.
            let optional_scope;
            let scope: &cel::Context<'_, 'a> = if optional {
                let mut c = scope.new_inner_scope();
                let wrapped = match old {
                    Some(o) => CelOptional::of(to_val(Some(schema), o, root)),
                    None => CelOptional::none(),
                };
                c.add_variable_as_val("oldSelf", Box::new(wrapped));
                optional_scope = c;
                &optional_scope
            } else {
                scope
            };
            let failure = match compiled.program.execute(scope) {
                Ok(cel::Value::Bool(true)) => continue,
                Ok(cel::Value::Bool(false)) => None,
                Ok(other) => Some(format!("rule evaluated to {other:?}, not a bool")),
                Err(e) => Some(e.to_string()),
            };
            let errored = failure.is_some();
            let message = match failure {
                Some(error) => format!("{error} evaluating rule: {}", rule_text(rule)),
                None => self
                    .message(rule, schema, scope)
                    .unwrap_or_else(|| default_message(rule)),
            };
            // An evaluation error is always an invalid value.
            let problem = if errored {
                Problem::Invalid
            } else {
                failure_reason(rule)
            };
            let suffix = str_at(rule, "fieldPath")
                .and_then(|p| field_path(schema, p))
                .unwrap_or_default();
            let field = shown(&format!("{path}{suffix}"));
            let (value, detail) = match problem {
                Problem::Duplicate => (Some(type_name(schema)), String::new()),
                Problem::Required | Problem::Forbidden => (None, message),
                _ => (Some(type_name(schema)), message),
            };
            self.push(FieldError {
                problem,
                field,
                value,
                detail,
            });
        }
    }

    /// A rule's `messageExpression`, when it evaluates to a usable message.
    fn message(
        &mut self,
        rule: &'s Value,
        schema: &'s Value,
        scope: &cel::Context<'_, 'a>,
    ) -> Option<String> {
        let source = str_at(rule, "messageExpression")?;
        let compiled = self.compiled(source, schema).ok()?;
        match compiled.program.execute(scope) {
            Ok(cel::Value::String(s))
                if !s.trim().is_empty() && !s.contains(['\n', '\r']) && s.len() <= MAX_MESSAGE =>
            {
                Some(s.to_string())
            }
            _ => None,
        }
    }
}

fn rule_text(rule: &Value) -> String {
    match str_at(rule, "message")
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        Some(m) => m.to_owned(),
        None => str_at(rule, "rule").unwrap_or_default().trim().to_owned(),
    }
}

fn default_message(rule: &Value) -> String {
    match str_at(rule, "message")
        .map(str::trim)
        .filter(|m| !m.is_empty())
    {
        Some(m) => m.to_owned(),
        None => format!("failed rule: {}", rule_text(rule)),
    }
}

fn failure_reason(rule: &Value) -> Problem {
    reason(str_at(rule, "reason")).unwrap_or(Problem::Invalid)
}

/// Every rule of `schema` that `obj` fails (`old`: the object an update replaces), evaluated
/// until `deadline`.
pub fn evaluate(
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    deadline: Instant,
) -> Vec<FieldError> {
    let sink = Arc::default();
    evaluate_into(schema, obj, old, deadline, &sink);
    std::mem::take(&mut *found(&sink))
}

/// [`evaluate`], adding each failure to `sink` as it is found.
fn evaluate_into(
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    deadline: Instant,
    sink: &Arc<Mutex<Vec<FieldError>>>,
) {
    let root = cel::Context::default();
    let mut e = Evaluation {
        root: &root,
        compiled: HashMap::new(),
        deadline,
        found: sink.clone(),
        count: 0,
        stopped: false,
    };
    e.node(schema, obj, old, "", true);
}

/// The failures in `sink`; a walk that panicked leaves what it had found.
fn found(sink: &Mutex<Vec<FieldError>>) -> std::sync::MutexGuard<'_, Vec<FieldError>> {
    sink.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The rule evaluations that may run at once, each on a blocking thread. A write answered at
/// its deadline keeps its slot until its last call ends (a call cannot be stopped midway), so
/// that slow writes cannot pile up busy threads; owned by the API state.
#[derive(Clone)]
pub struct Slots(Arc<tokio::sync::Semaphore>);

impl Slots {
    fn new(slots: usize) -> Self {
        Slots(Arc::new(tokio::sync::Semaphore::new(slots)))
    }
}

impl Default for Slots {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Slots::new(cores.max(2))
    }
}

/// `obj` when it passes its custom kind's rules, else the 422 (429 when no slot frees up
/// within [`RULES_TIME`]); the rules run on a blocking thread, under [`RULES_TIME`].
pub async fn check(
    slots: &Slots,
    def: &ResourceDef,
    obj: Value,
    old: Option<Arc<Value>>,
) -> Result<Value, ApiError> {
    let Some(schema) = def.schema.clone().filter(|_| def.custom) else {
        return Ok(obj);
    };
    if !has_rules(&schema) {
        return Ok(obj);
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Ok(Ok(slot)) = tokio::time::timeout(RULES_TIME, slots.0.clone().acquire_owned()).await
    else {
        return Err(ApiError::new(
            429,
            "TooManyRequests",
            "too many validation rule evaluations in progress, please try again later",
        ));
    };
    let deadline = Instant::now() + RULES_TIME;
    let (kind, object_name) = (def.kind.clone(), name.clone());
    let sink: Arc<Mutex<Vec<FieldError>>> = Arc::default();
    let task = tokio::task::spawn_blocking({
        let sink = sink.clone();
        move || {
            let _slot = slot;
            evaluate_into(&schema, &obj, old.as_deref(), deadline, &sink);
            // A call cannot be stopped midway: say when one held its slot well past the deadline.
            let over = Instant::now().saturating_duration_since(deadline);
            if over > GRACE {
                tracing::warn!(kind = %kind, name = %object_name, over = ?over,
                    "validation rules ran past their deadline");
            }
            obj
        }
    });
    let errors = match tokio::time::timeout(RULES_TIME + GRACE, task).await {
        Ok(Ok(obj)) => {
            let errors = std::mem::take(&mut *found(&sink));
            if errors.is_empty() {
                return Ok(obj);
            }
            errors
        }
        Ok(Err(e)) => return Err(ApiError::internal(format!("validation rules: {e}"))),
        // Answered at the deadline with what the walk has found so far; it goes on alone
        // until its current call ends.
        Err(_) => {
            let mut errors = found(&sink).clone();
            errors.truncate(MAX_CAUSES - 1);
            errors.push(FieldError {
                problem: Problem::Invalid,
                field: shown(""),
                value: Some("object".into()),
                detail: format!("validation rules ran out of their {RULES_TIME:?}"),
            });
            errors
        }
    };
    Err(invalid(&def.kind, &def.group, &name, &errors))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::cel_rules_crd::crd_problems;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object",
              "x-kubernetes-validations": [
                {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                {"rule": "self.replicas == oldSelf.replicas || self.replicas > oldSelf.replicas",
                 "messageExpression": "'replicas may only grow, not to ' + string(self.replicas)",
                 "fieldPath": ".replicas"},
                {"rule": "!has(self.forbidden)", "reason": "FieldValueForbidden"}
              ],
              "properties": {
                "min": {"type": "integer"}, "max": {"type": "integer"},
                "replicas": {"type": "integer"},
                "forbidden": {"type": "string"},
                "ratio": {"type": "number", "x-kubernetes-validations": [{"rule": "self < 1.0"}]},
                "namespace": {"type": "string"},
                "x-y": {"type": "string"},
                "names": {"type": "array", "maxItems": 10,
                  "items": {"type": "string", "maxLength": 10,
                    "x-kubernetes-validations": [{"rule": "self.startsWith('n')"}]}},
                "limits": {"type": "object", "additionalProperties": {"type": "integer",
                    "x-kubernetes-validations": [{"rule": "self >= 0", "reason": "FieldValueDuplicate"}]}},
                "port": {"x-kubernetes-int-or-string": true,
                    "x-kubernetes-validations": [{"rule": "type(self) == int ? self > 0 : self != ''"}]}
              }
            }
        },
        "x-kubernetes-validations": [{"rule": "self.metadata.name.size() < 10"}]})
    }

    /// An object whose spec has `min`, `max` and `replicas` unless `spec` sets them.
    fn obj(spec: Value) -> Value {
        let mut full = json!({"min": 1, "max": 2, "replicas": 1});
        full.as_object_mut()
            .unwrap()
            .extend(spec.as_object().unwrap().clone());
        json!({"apiVersion": "e.com/v1", "kind": "W", "metadata": {"name": "w", "uid": "x"}, "spec": full})
    }

    fn messages(spec: Value, old: Option<Value>) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        evaluate(&schema(), &obj(spec), old.map(obj).as_ref(), deadline)
            .iter()
            .map(FieldError::message)
            .collect()
    }

    #[test]
    fn passing_objects_pass() {
        let ok = json!({"min": 1, "max": 2, "replicas": 3, "ratio": 0.5, "names": ["n1"],
                        "limits": {"a": 1}, "port": 80});
        assert_eq!(messages(ok.clone(), None), Vec::<String>::new());
        assert_eq!(
            messages(json!({"port": "http"}), None),
            Vec::<String>::new()
        );
        let grown = json!({"min": 1, "max": 2, "replicas": 4});
        assert_eq!(messages(grown, Some(ok)), Vec::<String>::new());
    }

    #[test]
    fn failures_are_worded_as_kubernetes_words_them() {
        assert_eq!(
            messages(json!({"min": 3, "max": 2}), None),
            vec![r#"spec: Invalid value: "object": min must not exceed max"#]
        );
        assert_eq!(
            messages(json!({"forbidden": "x"}), None),
            vec!["spec: Forbidden: failed rule: !has(self.forbidden)"]
        );
        assert_eq!(
            messages(json!({"ratio": 1.5}), None),
            vec![r#"spec.ratio: Invalid value: "number": failed rule: self < 1.0"#]
        );
        assert_eq!(
            messages(json!({"names": ["n1", "x2"]}), None),
            vec![r#"spec.names[1]: Invalid value: "string": failed rule: self.startsWith('n')"#]
        );
        assert_eq!(
            messages(json!({"limits": {"a": -1}}), None),
            vec![r#"spec.limits[a]: Duplicate value: "integer""#]
        );
        assert_eq!(
            messages(json!({"port": 0}), None),
            vec![
                r#"spec.port: Invalid value: "": failed rule: type(self) == int ? self > 0 : self != ''"#
            ]
        );
        // A missing field is an evaluation error, reported as such.
        let mut no_max = obj(json!({}));
        no_max["spec"].as_object_mut().unwrap().remove("max");
        let missing: Vec<String> = evaluate(
            &schema(),
            &no_max,
            None,
            Instant::now() + Duration::from_secs(5),
        )
        .iter()
        .map(FieldError::message)
        .collect();
        assert_eq!(missing.len(), 1, "{missing:?}");
        assert!(
            missing[0].starts_with(r#"spec: Invalid value: "object": "#)
                && missing[0].ends_with("evaluating rule: min must not exceed max"),
            "{missing:?}"
        );
    }

    #[test]
    fn transition_rules_need_an_old_value_and_say_what_message_expression_says() {
        let old = json!({"min": 1, "max": 2, "replicas": 5});
        assert_eq!(
            messages(json!({"min": 1, "max": 2, "replicas": 3}), Some(old)),
            vec![r#"spec.replicas: Invalid value: "object": replicas may only grow, not to 3"#]
        );
        // Unchanged values are not validated again (ratcheting); the root rule sees the name.
        let bad = json!({"min": 3, "max": 2});
        assert_eq!(messages(bad.clone(), Some(bad)), Vec::<String>::new());
        let mut long = obj(json!({}));
        long["metadata"]["name"] = json!("much-too-long");
        let got = evaluate(
            &schema(),
            &long,
            None,
            Instant::now() + Duration::from_secs(5),
        );
        assert_eq!(
            got[0].message(),
            r#"<nil>: Invalid value: "object": failed rule: self.metadata.name.size() < 10"#
        );
    }

    #[test]
    fn escaped_names_reach_their_properties() {
        let s = json!({"type": "object", "properties": {"v": {"type": "object",
            "x-kubernetes-validations": [{"rule": "self.__namespace__ == 'a' && self.x__dash__y == 'b'"}],
            "properties": {"namespace": {"type": "string"}, "x-y": {"type": "string"}}}}});
        let deadline = Instant::now() + Duration::from_secs(5);
        let good = json!({"v": {"namespace": "a", "x-y": "b"}});
        assert!(evaluate(&s, &good, None, deadline).is_empty());
        let bad = json!({"v": {"namespace": "a", "x-y": "c"}});
        let got = evaluate(&s, &bad, None, deadline);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].field, "v");
    }

    #[test]
    fn optional_old_self_runs_on_creation_too() {
        let s = json!({"type": "object", "properties": {"v": {"type": "string",
            "x-kubernetes-validations": [{"rule": "oldSelf.hasValue() ? self == oldSelf.value() : self == 'first'",
                "optionalOldSelf": true, "message": "v is set once, to first"}]}}});
        let deadline = Instant::now() + Duration::from_secs(5);
        let first = json!({"v": "first"});
        assert!(evaluate(&s, &first, None, deadline).is_empty());
        let got = evaluate(&s, &json!({"v": "other"}), None, deadline);
        assert_eq!(
            got[0].message(),
            r#"v: Invalid value: "string": v is set once, to first"#
        );
        let got = evaluate(&s, &json!({"v": "other"}), Some(&first), deadline);
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(crd_problems(&crd(s), None).is_empty());
    }

    #[test]
    fn values_larger_than_estimated_for_are_not_evaluated() {
        let s = json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "integer"},
            "x-kubernetes-validations": [{"rule": "self.all(x, x < 1000)"}]}}});
        let items = vec![json!(1); cel_cost::REQUEST_BYTES as usize / 2 + 1];
        let started = Instant::now();
        let got = evaluate(
            &s,
            &json!({"items": items}),
            None,
            started + Duration::from_secs(30),
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(
            got[0].message(),
            "items: Invalid value: \"array\": call cost exceeds limit for rule: self.all(x, x < 1000) \
             (the value is larger than the 3145728 bytes rules are estimated for)"
        );
    }

    #[test]
    fn the_deadline_stops_evaluation() {
        let past = Instant::now();
        let got = evaluate(&schema(), &obj(json!({"min": 3, "max": 2})), None, past);
        assert_eq!(got.len(), 1);
        assert!(got[0].detail.contains("ran out"), "{got:?}");
    }

    fn custom(schema: Value) -> ResourceDef {
        let crd = json!({"metadata": {"name": "widgets.e.com"}, "spec": {"group": "e.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": schema}}]}});
        crate::registry::from_crd(&crd).unwrap()
    }

    #[tokio::test]
    async fn writes_wait_for_a_slot_then_are_told_to_retry() {
        let def = custom(schema());
        let slots = Slots::new(1);
        let bad = obj(json!({"min": 3, "max": 2}));
        let e = check(&slots, &def, bad.clone(), None).await.unwrap_err();
        assert_eq!(e.to_status()["code"], 422);
        assert_eq!(
            e.to_status()["details"]["causes"][0]["message"],
            "Invalid value: \"object\": min must not exceed max"
        );
        // A write still running (past its deadline, say) holds its slot.
        let held = slots.0.clone().acquire_owned().await.unwrap();
        let started = Instant::now();
        let e = check(&slots, &def, bad, None).await.unwrap_err();
        assert_eq!(e.to_status()["code"], 429);
        assert!(started.elapsed() >= RULES_TIME);
        drop(held);
        // Kinds without rules never wait.
        let plain = custom(json!({"type": "object"}));
        check(&slots, &plain, obj(json!({})), None).await.unwrap();
    }

    fn crd(schema: Value) -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}})
    }

    #[test]
    fn a_crd_with_good_rules_is_accepted() {
        assert!(crd_problems(&crd(schema()), None).is_empty());
    }

    #[test]
    fn evaluation_of_a_large_list_is_linear() {
        let s = json!({"type": "object", "properties": {"items": {"type": "array",
            "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= 0"}]},
            "x-kubernetes-validations": [{"rule": "self.all(x, x < 1000000)"}]}}});
        let items: Vec<Value> = (0..200_000).map(Value::from).collect();
        let started = Instant::now();
        let got = evaluate(
            &s,
            &json!({"items": items}),
            None,
            Instant::now() + Duration::from_secs(30),
        );
        let took = started.elapsed();
        assert!(got.is_empty(), "{got:?}");
        eprintln!("200k items, two rules: {took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }
}
