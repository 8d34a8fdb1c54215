//! The worst-case cost of a CEL expression, estimated before it is accepted, as kube-apiserver
//! estimates it: about one unit per node evaluated, a tenth of a unit per character or element
//! a string or list operation walks, and a comprehension's body once per element of the
//! largest list (or map) it may run over. Sizes come from the schema where there is one
//! (`maxItems`, `maxLength`, `maxProperties`), else from the largest request: so a rule over an
//! unbounded list costs about the list's possible length, and a comprehension nested in
//! another its square, which is what refuses it.
//!
//! Unbounded sizes are those of kube-apiserver's 3 MiB request, so that a CRD it accepts is
//! accepted here; objects here may be larger, which the evaluation's deadline covers.

use std::rc::Rc;

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue, operators};
use serde_json::Value;

/// The request size unbounded strings, lists and maps are sized by.
pub const REQUEST_BYTES: u64 = 3 * 1024 * 1024;
/// The most one expression may be estimated to cost (per call).
pub const EXPRESSION_LIMIT: u64 = 10_000_000;
/// The most all rules of one CRD schema may be estimated to cost, each times the most calls
/// it may get (once per element of the lists and maps it sits under).
pub const SCHEMA_LIMIT: u64 = 100_000_000;

/// What the estimate knows of a value: its schema node, its largest size, its elements.
#[derive(Clone, Debug)]
pub struct Shape<'s> {
    /// Its schema node; `None`: any JSON value or a computed one.
    pub schema: Option<&'s Value>,
    /// The most characters (string), elements (list) or entries (map) it may have.
    pub size: u64,
    /// For a computed list: its elements' shape (`None`: unknown).
    elem: Option<Rc<Shape<'s>>>,
}

impl<'s> Shape<'s> {
    /// Any JSON value within a request.
    pub fn any() -> Self {
        Shape {
            schema: None,
            size: REQUEST_BYTES / 2,
            elem: None,
        }
    }

    fn sized(size: u64) -> Self {
        Shape {
            schema: None,
            size,
            elem: None,
        }
    }

    /// The value a schema node describes.
    pub fn of_schema(schema: &'s Value) -> Self {
        Shape {
            schema: Some(schema),
            size: max_size(schema),
            elem: None,
        }
    }

    /// The shape of an element (of a list) or a key (of a map) this value iterates over.
    fn element(&self) -> Shape<'s> {
        if let Some(e) = &self.elem {
            return (**e).clone();
        }
        match self.schema {
            Some(s) if type_of(s) == Some("array") => {
                s.get("items").map_or_else(Shape::any, Shape::of_schema)
            }
            Some(s) if type_of(s) == Some("object") => Shape::sized(longest_key(s)),
            Some(_) => Shape::sized(1),
            None => Shape::sized(self.size),
        }
    }

    /// Whether a rule may select field `name` of this value: any field of a map or of a
    /// value the schema leaves open; an object's only its properties (and a resource's
    /// `apiVersion`, `kind` and `metadata`, which every object has).
    fn may_select(&self, name: &str) -> bool {
        let Some(s) = self.schema else {
            return true;
        };
        let open = |key: &str| s.get(key).is_some_and(|v| v.as_bool() != Some(false));
        if type_of(s) != Some("object")
            || open("x-kubernetes-preserve-unknown-fields")
            || open("x-kubernetes-embedded-resource")
            || open("additionalProperties")
            || matches!(name, "apiVersion" | "kind" | "metadata")
        {
            return true;
        }
        s.get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.contains_key(super::cel_names::unescape(name).as_ref()))
    }

    /// The shape of field or key `name` of this value.
    fn child(&self, name: &str) -> Shape<'s> {
        let Some(s) = self.schema else {
            return Shape::any();
        };
        if let Some(p) = s
            .get("properties")
            .and_then(|p| p.get(super::cel_names::unescape(name).as_ref()))
        {
            return Shape::of_schema(p);
        }
        s.get("additionalProperties")
            .filter(|a| a.is_object())
            .map_or_else(Shape::any, Shape::of_schema)
    }
}

fn type_of(schema: &Value) -> Option<&str> {
    if schema
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true)
    {
        return None;
    }
    schema.get("type").and_then(Value::as_str)
}

fn limit(schema: &Value, key: &str) -> Option<u64> {
    schema.get(key).and_then(Value::as_u64)
}

/// The fewest bytes a value of `schema` takes in JSON.
fn min_bytes(schema: &Value) -> u64 {
    match type_of(schema) {
        Some("string" | "array" | "object") => 2,
        Some("boolean") => 4,
        _ => 1,
    }
}

/// The longest property name of an object schema (its keys, when iterated).
fn longest_key(schema: &Value) -> u64 {
    schema
        .get("properties")
        .and_then(Value::as_object)
        .and_then(|p| p.keys().map(|k| k.len() as u64).max())
        .unwrap_or(REQUEST_BYTES)
}

/// The largest size a value of `schema` may have.
pub fn max_size(schema: &Value) -> u64 {
    match type_of(schema) {
        Some("string") => limit(schema, "maxLength").unwrap_or(REQUEST_BYTES - 2),
        Some("array") => limit(schema, "maxItems").unwrap_or_else(|| {
            let item = schema.get("items").map_or(1, min_bytes);
            REQUEST_BYTES / (item + 1)
        }),
        Some("object") => limit(schema, "maxProperties").unwrap_or_else(|| {
            match schema.get("additionalProperties").filter(|a| a.is_object()) {
                // `"":v,` at least.
                Some(a) => REQUEST_BYTES / (min_bytes(a) + 4),
                None => schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .map_or(REQUEST_BYTES / 5, |p| p.len() as u64),
            }
        }),
        Some(_) => 1,
        None => REQUEST_BYTES / 2,
    }
}

/// A tenth of a unit per character or element walked.
fn walk(size: u64) -> u64 {
    size.div_ceil(10)
}

/// Estimates expressions under named variables.
pub struct Estimator<'s> {
    /// Variables in scope, innermost last.
    scope: Vec<(String, Shape<'s>)>,
    /// The shape of what the comprehension being estimated appends to its accumulator.
    appended: Option<Shape<'s>>,
    /// Fields selected that the schema does not have (a type error in kube-apiserver).
    pub undefined: Vec<String>,
}

/// An estimate: its cost and the shape of its result.
type Estimate<'s> = (u64, Shape<'s>);

impl<'s> Estimator<'s> {
    /// An estimator with `vars` in scope, each with the shape of its values.
    pub fn new(vars: Vec<(String, Shape<'s>)>) -> Self {
        Estimator {
            scope: vars,
            appended: None,
            undefined: Vec::new(),
        }
    }

    /// The estimated cost of `e`.
    pub fn cost(&mut self, e: &IdedExpr) -> u64 {
        self.expr(e).0
    }

    fn lookup(&self, name: &str) -> Shape<'s> {
        self.scope
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map_or_else(Shape::any, |(_, s)| s.clone())
    }

    fn expr(&mut self, e: &IdedExpr) -> Estimate<'s> {
        match &e.expr {
            Expr::Literal(l) => (
                0,
                Shape::sized(match l {
                    LiteralValue::String(s) => s.len() as u64,
                    LiteralValue::Bytes(b) => b.len() as u64,
                    _ => 1,
                }),
            ),
            Expr::Ident(name) => (1, self.lookup(name)),
            Expr::Select(s) => {
                let (cost, operand) = self.expr(&s.operand);
                if !operand.may_select(&s.field) {
                    self.undefined.push(s.field.clone());
                }
                (cost.saturating_add(1), operand.child(&s.field))
            }
            Expr::List(l) => {
                let mut cost = 1u64;
                let mut elem: Option<Shape<'s>> = None;
                for item in &l.elements {
                    let (c, s) = self.expr(item);
                    cost = cost.saturating_add(c);
                    if elem.as_ref().is_none_or(|e| e.size < s.size) {
                        elem = Some(s);
                    }
                }
                let shape = Shape {
                    schema: None,
                    size: l.elements.len() as u64,
                    elem: elem.map(Rc::new),
                };
                (cost, shape)
            }
            Expr::Map(m) => {
                let cost = m.entries.iter().fold(1u64, |acc, entry| match &entry.expr {
                    EntryExpr::MapEntry(me) => acc
                        .saturating_add(self.cost(&me.key))
                        .saturating_add(self.cost(&me.value)),
                    EntryExpr::StructField(f) => acc.saturating_add(self.cost(&f.value)),
                });
                (cost, Shape::sized(m.entries.len() as u64))
            }
            Expr::Struct(s) => {
                let cost = s.entries.iter().fold(1u64, |acc, entry| match &entry.expr {
                    EntryExpr::StructField(f) => acc.saturating_add(self.cost(&f.value)),
                    EntryExpr::MapEntry(me) => acc.saturating_add(self.cost(&me.value)),
                });
                (cost, Shape::sized(1))
            }
            Expr::Comprehension(c) => {
                let (range_cost, range) = self.expr(&c.iter_range);
                let n = range.size;
                let (init_cost, init) = self.expr(&c.accu_init);
                let element = range.element();
                // A list the loop builds (`map`, `filter`) may reach `n` elements; any other
                // accumulator (a bool, a count) keeps its size.
                let builds_list =
                    matches!(&c.accu_init.expr, Expr::List(l) if l.elements.is_empty());
                let accu = if builds_list { Shape::sized(n) } else { init };
                let mut vars = vec![(c.accu_var.clone(), accu.clone())];
                match &c.iter_var2 {
                    // Two variables: index or key, then the value.
                    Some(v2) => {
                        vars.push((c.iter_var.clone(), Shape::sized(1)));
                        vars.push((v2.clone(), element));
                    }
                    None => vars.push((c.iter_var.clone(), element)),
                }
                let depth = self.scope.len();
                self.scope.extend(vars);
                let outer = self.appended.take();
                let body = self
                    .cost(&c.loop_cond)
                    .saturating_add(self.cost(&c.loop_step));
                let appended = std::mem::replace(&mut self.appended, outer);
                // What `map`/`filter` build: a list of up to `n` of what they append.
                self.scope.truncate(depth);
                let accu = if builds_list {
                    Shape {
                        schema: None,
                        size: n,
                        elem: appended.map(Rc::new),
                    }
                } else {
                    accu
                };
                self.scope.push((c.accu_var.clone(), accu));
                let (result_cost, result) = self.expr(&c.result);
                self.scope.truncate(depth);
                let cost = range_cost
                    .saturating_add(init_cost)
                    .saturating_add(n.saturating_mul(body))
                    .saturating_add(result_cost);
                (cost, result)
            }
            Expr::Call(call) => self.call(call),
            Expr::Unspecified => (0, Shape::sized(1)),
        }
    }

    fn call(&mut self, call: &cel::common::ast::CallExpr) -> Estimate<'s> {
        let name = call.func_name.as_str();
        let mut cost = 0u64;
        let target = call.target.as_ref().map(|t| {
            let (c, s) = self.expr(t);
            cost = cost.saturating_add(c);
            s
        });
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let (c, s) = self.expr(a);
            cost = cost.saturating_add(c);
            args.push(s);
        }
        // The receiver first, then the arguments.
        let all: Vec<&Shape<'s>> = target.iter().chain(&args).collect();
        let size = |i: usize| all.get(i).map_or(1, |s| s.size);
        let total: u64 = all.iter().fold(0u64, |a, s| a.saturating_add(s.size));
        let (extra, shape) = match name {
            operators::LOGICAL_AND | operators::LOGICAL_OR | operators::LOGICAL_NOT => {
                (0, Shape::sized(1))
            }
            operators::CONDITIONAL => {
                let larger = args
                    .iter()
                    .skip(1)
                    .max_by_key(|s| s.size)
                    .cloned()
                    .unwrap_or_else(|| Shape::sized(1));
                (0, larger)
            }
            operators::EQUALS
            | operators::NOT_EQUALS
            | operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS => (1 + walk(size(0).min(size(1))), Shape::sized(1)),
            operators::ADD => {
                let appends_to_accumulator = matches!(
                    call.args.first().map(|a| &a.expr),
                    Some(Expr::Ident(n)) if n.starts_with('@') || n == "__result__"
                );
                if appends_to_accumulator {
                    // `map`/`filter` append in place: constant per step.
                    self.appended = all.get(1).and_then(|s| s.elem.as_deref()).cloned();
                    (1, all[0].clone())
                } else {
                    let elem = all.first().and_then(|s| s.elem.clone());
                    (
                        1 + walk(total),
                        Shape {
                            schema: None,
                            size: total,
                            elem,
                        },
                    )
                }
            }
            operators::INDEX | operators::OPT_INDEX => {
                let shape = match call.args.get(1).map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::String(key))) => all[0].child(key),
                    _ => all.first().map_or_else(Shape::any, |s| s.element()),
                };
                (1, shape)
            }
            operators::IN => (1 + size(1), Shape::sized(1)),
            "size" | operators::HAS | "type" | operators::NOT_STRICTLY_FALSE => {
                (1, Shape::sized(1))
            }
            "matches" => (1 + walk(size(0).saturating_mul(size(1))), Shape::sized(1)),
            "contains" | "startsWith" | "endsWith" => (1 + walk(total), Shape::sized(1)),
            "replace" => {
                // Every character may be replaced by the replacement.
                let grown = size(0).saturating_mul(size(2).max(1));
                (1 + walk(total.saturating_add(grown)), Shape::sized(grown))
            }
            "split" => {
                let piece = Shape::sized(size(0));
                (
                    1 + walk(total),
                    Shape {
                        schema: None,
                        size: size(0),
                        elem: Some(Rc::new(piece)),
                    },
                )
            }
            "join" => {
                let each = all.first().map_or(1, |s| s.element().size);
                let joined = size(0).saturating_mul(each.saturating_add(size(1)));
                (1 + walk(joined), Shape::sized(joined))
            }
            // Whole-list functions walk every element.
            "sum" | "min" | "max" | "isSorted" | "indexOf" | "lastIndexOf" | "reverse" | "sort"
            | "distinct" | "flatten" => (1 + total, Shape::sized(size(0))),
            // Conversions and other string functions: linear in what they read.
            _ => (1 + walk(total), Shape::sized(total.max(1))),
        };
        (cost.saturating_add(extra), shape)
    }
}

/// Why an estimate is refused, as kube-apiserver words it, with the estimate itself.
pub fn over_budget(what: &str, cost: u64, budget: u64) -> String {
    let factor = cost as f64 / budget as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (estimated cost {cost}, budget {budget}; \
         try simplifying the rule, or adding maxItems, maxProperties, and maxLength where \
         arrays, maps, and strings are declared)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cost_of(expr: &str, schema: &Value) -> u64 {
        let p = super::super::cel_bounds::compile(expr).unwrap();
        Estimator::new(vec![("self".into(), Shape::of_schema(schema))]).cost(p.expression())
    }

    #[test]
    fn sizes_come_from_the_schema_or_the_request() {
        let bounded =
            json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}});
        assert_eq!(max_size(&bounded), 10);
        let unbounded = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(max_size(&unbounded), REQUEST_BYTES / 3);
        assert_eq!(max_size(&json!({"type": "string"})), REQUEST_BYTES - 2);
        let map = json!({"type": "object", "additionalProperties": {"type": "integer"}});
        assert_eq!(max_size(&map), REQUEST_BYTES / 5);
    }

    #[test]
    fn comprehensions_cost_their_range_and_nesting_its_square() {
        let bounded =
            json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}});
        let simple = cost_of("self.all(x, x.size() < 3)", &bounded);
        assert!(simple < 100, "{simple}");
        let unbounded = json!({"type": "array", "items": {"type": "integer"}});
        let linear = cost_of("self.all(x, x > 0)", &unbounded);
        assert!(linear > 1_000_000 && linear < EXPRESSION_LIMIT, "{linear}");
        let nested = cost_of("self.all(x, self.exists(y, x == y))", &unbounded);
        assert!(nested > EXPRESSION_LIMIT * 100, "{nested}");
        let small_nested = cost_of("self.all(x, self.exists(y, x == y))", &bounded);
        assert!(small_nested < 1000, "{small_nested}");
    }

    #[test]
    fn string_work_scales_with_length() {
        let s = json!({"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 100},
            "free": {"type": "string"},
            "names": {"type": "array", "maxItems": 1000, "items": {"type": "string", "maxLength": 64}}
        }});
        assert!(cost_of("self.name.startsWith('a')", &s) < 50);
        assert!(cost_of("self.free.matches('^a+$')", &s) > 1_000_000);
        // What `map` builds keeps its elements' shape.
        let mapped = cost_of("self.names.map(n, n + 'x').all(n, n.endsWith('x'))", &s);
        assert!(mapped < 100_000, "{mapped}");
        let unbounded = cost_of("self.names.map(n, self.free).all(f, f.contains('x'))", &s);
        assert!(unbounded > EXPRESSION_LIMIT, "{unbounded}");
    }

    #[test]
    fn fields_the_schema_lacks_are_found() {
        let s = json!({"type": "object", "properties": {
            "a": {"type": "object", "properties": {"b": {"type": "string"}}},
            "m": {"type": "object", "additionalProperties": {"type": "string"}},
            "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }});
        let undefined = |expr: &str| {
            let p = super::super::cel_bounds::compile(expr).unwrap();
            let mut e = Estimator::new(vec![("self".into(), Shape::of_schema(&s))]);
            e.cost(p.expression());
            e.undefined
        };
        assert!(
            undefined("self.a.b == '' && self.m.anything == '' && self.free.x.y == 1").is_empty()
        );
        assert!(undefined("self.metadata.name == 'x'").is_empty());
        assert_eq!(
            undefined("has(self.a.c) || self.nope == 1"),
            vec!["c", "nope"]
        );
    }

    #[test]
    fn refusals_say_by_how_much() {
        assert_eq!(
            over_budget("estimated rule cost", 42_000_000, EXPRESSION_LIMIT),
            "estimated rule cost exceeds budget by factor of 4.2x (estimated cost 42000000, \
             budget 10000000; try simplifying the rule, or adding maxItems, maxProperties, and \
             maxLength where arrays, maps, and strings are declared)"
        );
    }
}
