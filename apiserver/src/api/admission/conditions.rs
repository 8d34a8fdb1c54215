//! A webhook's `matchConditions`, evaluated as kube-apiserver does: CEL expressions over
//! `object`, `oldObject` and `request` (the `AdmissionRequest` without its objects). All true:
//! the webhook is called; any false: it is skipped; otherwise an error, which the caller
//! settles by the webhook's `failurePolicy`. The `authorizer` variable is not offered.
//!
//! Evaluation is bounded: an expression's length, its nesting (parsed and evaluated by
//! recursion), its size and its comprehensions (nested ones would make the cost grow with the
//! square of a list's length) are checked when the configuration is read, and each evaluation
//! runs off the request's thread under [`EVALUATION_TIME`].

use std::{sync::Arc, time::Duration};

use serde_json::Value;

/// The longest expression compiled.
pub const MAX_LENGTH: usize = 5 * 1024;
/// The deepest bracket nesting in the source, and the deepest expression tree.
const MAX_NESTING: usize = 32;
const MAX_DEPTH: usize = 64;
/// The most nodes one expression may have.
const MAX_NODES: usize = 512;
/// How long all of one webhook's conditions may take on one request.
pub const EVALUATION_TIME: Duration = Duration::from_millis(500);

/// Why a condition could not be compiled or evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    #[error("matchCondition {name:?}: the expression is longer than {MAX_LENGTH} characters")]
    TooLong { name: String },
    #[error("matchCondition {name:?}: the expression nests deeper than {limit}")]
    TooDeep { name: String, limit: usize },
    #[error("matchCondition {name:?}: the expression has more than {MAX_NODES} terms")]
    TooLarge { name: String },
    #[error(
        "matchCondition {name:?}: nested comprehensions (all, exists, map, filter within another) are not supported"
    )]
    NestedComprehension { name: String },
    #[error(
        "matchCondition {name:?}: the authorizer variable is not supported by the embedded cluster"
    )]
    Authorizer { name: String },
    #[error("matchCondition {name:?}: compilation failed: {message}")]
    Compile { name: String, message: String },
    #[error("matchCondition {name:?}: evaluation failed: {message}")]
    Evaluate { name: String, message: String },
    #[error("matchCondition {name:?}: the expression evaluated to {got}, not a bool")]
    NotBool { name: String, got: String },
    #[error("matchConditions: evaluation took longer than {EVALUATION_TIME:?}")]
    Timeout,
}

/// One compiled condition.
pub struct Condition {
    pub name: String,
    program: Result<cel::Program, ConditionError>,
}

impl std::fmt::Debug for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condition")
            .field("name", &self.name)
            .field("compiled", &self.program.is_ok())
            .finish()
    }
}

/// The deepest bracket nesting of `source` (outside string literals, roughly: quotes toggle).
fn nesting(source: &str) -> usize {
    let (mut depth, mut max, mut quote) = (0usize, 0usize, None::<char>);
    let mut escaped = false;
    for c in source.chars() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                c if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' => quote = Some(c),
            '(' | '[' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// The children of an expression node.
fn children(e: &cel::common::ast::Expr) -> Vec<&cel::common::ast::IdedExpr> {
    use cel::common::ast::{EntryExpr, Expr};
    match e {
        Expr::Call(c) => c.target.iter().map(|t| &**t).chain(&c.args).collect(),
        Expr::Comprehension(c) => vec![
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ],
        Expr::List(l) => l.elements.iter().collect(),
        Expr::Map(cel::common::ast::MapExpr { entries })
        | Expr::Struct(cel::common::ast::StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|e| match &e.expr {
                EntryExpr::MapEntry(m) => vec![&m.key, &m.value],
                EntryExpr::StructField(f) => vec![&f.value],
            })
            .collect(),
        Expr::Select(s) => vec![&*s.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}

/// Checks the size, depth and comprehensions of a parsed expression, without recursion.
fn check_shape(name: &str, root: &cel::common::ast::IdedExpr) -> Result<(), ConditionError> {
    let mut stack = vec![(root, 1usize, 0usize)];
    let mut nodes = 0usize;
    while let Some((e, depth, comprehensions)) = stack.pop() {
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(ConditionError::TooLarge { name: name.into() });
        }
        if depth > MAX_DEPTH {
            return Err(ConditionError::TooDeep {
                name: name.into(),
                limit: MAX_DEPTH,
            });
        }
        let inside = comprehensions
            + usize::from(matches!(e.expr, cel::common::ast::Expr::Comprehension(_)));
        if inside > 1 {
            return Err(ConditionError::NestedComprehension { name: name.into() });
        }
        for c in children(&e.expr) {
            stack.push((c, depth + 1, inside));
        }
    }
    Ok(())
}

/// Compiles condition `name`; a bad one is kept as its error, which every evaluation returns
/// (the configuration is stored whatever it holds, as kube-apiserver's validation would have
/// refused it, so the failure policy decides).
pub fn compile(name: &str, expression: &str) -> Condition {
    let program = (|| {
        if expression.len() > MAX_LENGTH {
            return Err(ConditionError::TooLong { name: name.into() });
        }
        if nesting(expression) > MAX_NESTING {
            return Err(ConditionError::TooDeep {
                name: name.into(),
                limit: MAX_NESTING,
            });
        }
        let program = cel::Program::compile(expression).map_err(|e| ConditionError::Compile {
            name: name.into(),
            message: e.to_string(),
        })?;
        if program.references().has_variable("authorizer") {
            return Err(ConditionError::Authorizer { name: name.into() });
        }
        check_shape(name, program.expression())?;
        Ok(program)
    })();
    Condition {
        name: name.to_owned(),
        program,
    }
}

/// The conditions of a webhook entry (`matchConditions`).
pub fn of_webhook(w: &Value) -> Vec<Condition> {
    w.get("matchConditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|c| {
            compile(
                c.get("name").and_then(Value::as_str).unwrap_or_default(),
                c.get("expression")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// What the conditions decide for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// All true (or there are none): call the webhook.
    Call,
    /// This condition was false: skip the webhook.
    Skip(String),
}

/// Evaluates `conditions` in order, synchronously: the first false skips (even after an
/// error, as in kube-apiserver); an error is returned only when none is false.
pub fn evaluate(
    conditions: &[Condition],
    object: &Value,
    old: &Value,
    request: &Value,
) -> Result<Outcome, ConditionError> {
    if conditions.is_empty() {
        return Ok(Outcome::Call);
    }
    let mut ctx = cel::Context::default();
    for (name, v) in [("object", object), ("oldObject", old), ("request", request)] {
        if let Err(e) = ctx.add_variable(name, v) {
            return Err(ConditionError::Evaluate {
                name: name.into(),
                message: e.to_string(),
            });
        }
    }
    let mut first_error = None;
    for c in conditions {
        let result = match &c.program {
            Err(e) => Err(e.clone()),
            Ok(p) => match p.execute(&ctx) {
                Ok(cel::Value::Bool(b)) => Ok(b),
                Ok(other) => Err(ConditionError::NotBool {
                    name: c.name.clone(),
                    got: format!("{other:?}"),
                }),
                Err(e) => Err(ConditionError::Evaluate {
                    name: c.name.clone(),
                    message: e.to_string(),
                }),
            },
        };
        match result {
            Ok(true) => {}
            Ok(false) => return Ok(Outcome::Skip(c.name.clone())),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    first_error.map_or(Ok(Outcome::Call), Err)
}

/// [`evaluate`] on a blocking thread, under [`EVALUATION_TIME`].
pub async fn evaluate_bounded(
    conditions: Arc<Vec<Condition>>,
    object: Value,
    old: Value,
    request: Value,
) -> Result<Outcome, ConditionError> {
    if conditions.is_empty() {
        return Ok(Outcome::Call);
    }
    let task = tokio::task::spawn_blocking(move || evaluate(&conditions, &object, &old, &request));
    match tokio::time::timeout(EVALUATION_TIME, task).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(ConditionError::Evaluate {
            name: String::new(),
            message: e.to_string(),
        }),
        Err(_) => Err(ConditionError::Timeout),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(exprs: &[&str], object: Value) -> Result<Outcome, ConditionError> {
        let cs: Vec<Condition> = exprs
            .iter()
            .enumerate()
            .map(|(i, e)| compile(&format!("c{i}"), e))
            .collect();
        evaluate(&cs, &object, &Value::Null, &json!({"operation": "CREATE"}))
    }

    #[test]
    fn all_true_calls_any_false_skips() {
        let wl = json!({"spec": {"queueName": "gpustack-fnv64-00ff"}});
        let queue =
            "has(object.spec.queueName) && object.spec.queueName.startsWith('gpustack-fnv64-')";
        assert_eq!(run(&[queue], wl.clone()), Ok(Outcome::Call));
        assert_eq!(
            run(&[queue, "request.operation == 'CREATE'"], wl),
            Ok(Outcome::Call)
        );
        let other = json!({"spec": {"queueName": "team-a"}});
        assert_eq!(run(&[queue], other), Ok(Outcome::Skip("c0".into())));
        assert_eq!(
            run(&[queue], json!({"spec": {}})),
            Ok(Outcome::Skip("c0".into()))
        );
        assert_eq!(run(&[], json!({})), Ok(Outcome::Call));
        assert_eq!(
            run(&["oldObject == null"], json!({})),
            Ok(Outcome::Call),
            "a CREATE has no old object"
        );
    }

    #[test]
    fn errors_unless_something_is_false() {
        // A missing field is an evaluation error; a later false still skips.
        let missing = "object.spec.nothing == 'x'";
        assert!(matches!(
            run(&[missing], json!({"spec": {}})),
            Err(ConditionError::Evaluate { .. })
        ));
        assert_eq!(
            run(&[missing, "false"], json!({"spec": {}})),
            Ok(Outcome::Skip("c1".into()))
        );
        assert!(matches!(
            run(&["'text'"], json!({})),
            Err(ConditionError::NotBool { .. })
        ));
        assert!(matches!(
            run(&["object.("], json!({})),
            Err(ConditionError::Compile { .. })
        ));
    }

    #[test]
    fn bounds_and_unsupported_variables() {
        let e = run(
            &["authorizer.group('').resource('pods').check('get').allowed()"],
            json!({}),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "matchCondition \"c0\": the authorizer variable is not supported by the embedded cluster"
        );
        let long = format!("'{}' == ''", "x".repeat(MAX_LENGTH));
        assert!(matches!(
            run(&[&long], json!({})),
            Err(ConditionError::TooLong { .. })
        ));
        let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        assert!(matches!(
            run(&[&deep], json!({})),
            Err(ConditionError::TooDeep { .. })
        ));
        // Brackets inside a string do not count.
        let quoted = format!("'{}' != ''", "(".repeat(40));
        assert_eq!(run(&[&quoted], json!({})), Ok(Outcome::Call));
        let chain = vec!["1"; 100].join(" + ") + " > 0";
        assert!(matches!(
            run(&[&chain], json!({})),
            Err(ConditionError::TooDeep { .. })
        ));
        let nested = "object.a.all(x, object.a.exists(y, x == y))";
        assert!(matches!(
            run(&[nested], json!({"a": [1, 2]})),
            Err(ConditionError::NestedComprehension { .. })
        ));
        assert_eq!(
            run(&["object.a.all(x, x > 0)"], json!({"a": [1, 2]})),
            Ok(Outcome::Call)
        );
    }

    #[tokio::test]
    async fn bounded_evaluation_runs_off_the_request_thread() {
        let cs = Arc::new(vec![compile("q", "object.spec.queueName == 'a'")]);
        let r = evaluate_bounded(
            cs,
            json!({"spec": {"queueName": "b"}}),
            Value::Null,
            json!({}),
        )
        .await;
        assert_eq!(r, Ok(Outcome::Skip("q".into())));
    }
}
