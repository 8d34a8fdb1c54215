//! A webhook's `matchConditions`, evaluated as kube-apiserver does: CEL expressions over
//! `object`, `oldObject` and `request` (the `AdmissionRequest` without its objects). All true:
//! the webhook is called; any false: it is skipped; otherwise an error, which the caller
//! settles by the webhook's `failurePolicy`. The `authorizer` variable is not offered.
//!
//! Evaluation is bounded: an expression must be within [`cel_bounds`] and its estimated cost
//! ([`cel_cost`], over objects as large as a request) within the budget. A configuration
//! breaking either is refused when written ([`configuration_problems`]); one stored earlier
//! fails the same way when run. Each evaluation runs off the request's thread under
//! [`EVALUATION_TIME`].

use std::{sync::Arc, time::Duration};

use serde_json::Value;

use crate::api::cel_bounds::{self, BoundsError};
use crate::api::cel_cost::{self, Estimator, Shape};
use crate::api::field_errors::{FieldError, Problem};

/// How long all of one webhook's conditions may take on one request.
pub const EVALUATION_TIME: Duration = Duration::from_millis(500);
/// The most conditions one webhook may have (kube-apiserver's limit).
const MAX_CONDITIONS: usize = 64;

/// Why a condition is refused before it runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The expression is too long, too deep or does not compile.
    #[error(transparent)]
    Bounds(#[from] BoundsError),
    /// The expression uses `authorizer`, which is not offered here.
    #[error("the authorizer variable is not supported by the embedded cluster")]
    Authorizer,
    /// The expression's estimated cost is over the limit.
    #[error("{0}")]
    TooCostly(String),
}

/// Why a condition could not be compiled or evaluated.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    /// The condition was refused before it ran.
    #[error("matchCondition {name:?}: {why}")]
    Refused {
        /// The condition's name.
        name: String,
        /// Why it was refused.
        why: Refusal,
    },
    /// Evaluating the condition failed.
    #[error("matchCondition {name:?}: evaluation failed: {message}")]
    Evaluate {
        /// The condition's name.
        name: String,
        /// What the evaluation reported.
        message: String,
    },
    /// The condition gave something other than a bool.
    #[error("matchCondition {name:?}: the expression evaluated to {got}, not a bool")]
    NotBool {
        /// The condition's name.
        name: String,
        /// What it gave, as text.
        got: String,
    },
    /// The conditions took longer than [`EVALUATION_TIME`] together.
    #[error("matchConditions: evaluation took longer than {EVALUATION_TIME:?}")]
    Timeout,
}

/// One compiled condition.
pub struct Condition {
    /// The condition's name, as a denial names it.
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

/// Compiles `expression` and estimates its cost over objects as large as a request.
fn checked(expression: &str) -> Result<cel::Program, Refusal> {
    let program = cel_bounds::compile(expression)?;
    if program.references().has_variable("authorizer") {
        return Err(Refusal::Authorizer);
    }
    let cost = Estimator::new(
        ["object", "oldObject", "request"]
            .into_iter()
            .map(|v| (v.to_owned(), Shape::any()))
            .collect(),
    )
    .cost(program.expression());
    if cost > cel_cost::EXPRESSION_LIMIT {
        return Err(Refusal::TooCostly(cel_cost::over_budget(
            "estimated expression cost",
            cost,
            cel_cost::EXPRESSION_LIMIT,
        )));
    }
    Ok(program)
}

/// Compiles condition `name`; a bad one is kept as its error, which every evaluation returns
/// (a configuration stored before it was checked on write: the failure policy decides).
pub fn compile(name: &str, expression: &str) -> Condition {
    Condition {
        name: name.to_owned(),
        program: checked(expression).map_err(|why| ConditionError::Refused {
            name: name.into(),
            why,
        }),
    }
}

/// Every way the `matchConditions` of a Validating- or MutatingWebhookConfiguration are
/// refused, at `webhooks[i].matchConditions[j]...`, as kube-apiserver refuses them on write.
pub fn configuration_problems(config: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let webhooks = config.get("webhooks").and_then(Value::as_array);
    for (i, w) in webhooks.into_iter().flatten().enumerate() {
        let Some(conditions) = w.get("matchConditions").and_then(Value::as_array) else {
            continue;
        };
        let at = format!("webhooks[{i}].matchConditions");
        if conditions.len() > MAX_CONDITIONS {
            errors.push(FieldError {
                problem: Problem::TooMany,
                field: at.clone(),
                value: Some(conditions.len().into()),
                detail: format!("must have at most {MAX_CONDITIONS} items"),
            });
            continue;
        }
        let mut seen = std::collections::HashSet::new();
        for (j, c) in conditions.iter().enumerate() {
            let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                errors.push(FieldError {
                    problem: Problem::Required,
                    field: format!("{at}[{j}].name"),
                    value: None,
                    detail: String::new(),
                });
            } else if !seen.insert(name) {
                errors.push(FieldError {
                    problem: Problem::Duplicate,
                    field: format!("{at}[{j}].name"),
                    value: Some(name.into()),
                    detail: String::new(),
                });
            }
            let field = format!("{at}[{j}].expression");
            let expression = c
                .get("expression")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if expression.trim().is_empty() {
                errors.push(FieldError {
                    problem: Problem::Required,
                    field,
                    value: None,
                    detail: String::new(),
                });
                continue;
            }
            let why = match checked(expression) {
                Ok(_) => continue,
                Err(why) => why,
            };
            let (problem, value) = match why {
                Refusal::TooCostly(_) => (Problem::Forbidden, None),
                _ => (Problem::Invalid, Some(expression.into())),
            };
            let detail = why.to_string();
            errors.push(FieldError {
                problem,
                field,
                value,
                detail,
            });
        }
    }
    errors
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
            Err(ConditionError::Refused {
                why: Refusal::Bounds(BoundsError::Compile(_)),
                ..
            })
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
        let long = format!("'{}' == ''", "x".repeat(cel_bounds::MAX_LENGTH));
        assert!(matches!(
            run(&[&long], json!({})),
            Err(ConditionError::Refused {
                why: Refusal::Bounds(BoundsError::TooLong),
                ..
            })
        ));
        let nested = "object.a.all(x, object.a.exists(y, x == y))";
        let e = run(&[nested], json!({"a": [1, 2]})).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("matchCondition \"c0\": estimated expression cost exceeds budget by factor of more than 100x (estimated cost "),
            "{e}"
        );
        assert_eq!(
            run(&["object.a.all(x, x > 0)"], json!({"a": [1, 2]})),
            Ok(Outcome::Call)
        );
    }

    #[test]
    fn configurations_are_refused_at_the_condition() {
        let config = json!({"webhooks": [
            {"name": "ok", "matchConditions": [{"name": "a", "expression": "true"}]},
            {"name": "bad", "matchConditions": [
                {"name": "costly", "expression": "object.a.all(x, object.a.exists(y, x == y))"},
                {"name": "broken", "expression": "object.("},
                {"name": "authz", "expression": "authorizer.requestResource.check('get').allowed()"},
                {"name": "authz", "expression": ""}
            ]}
        ]});
        let got: Vec<String> = configuration_problems(&config)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(got.len(), 5, "{got:#?}");
        assert!(got[0].starts_with("webhooks[1].matchConditions[0].expression: Forbidden: estimated expression cost exceeds budget by factor of more than 100x (estimated cost "), "{got:#?}");
        assert!(got[1].starts_with("webhooks[1].matchConditions[1].expression: Invalid value: \"object.(\": compilation failed: "), "{got:#?}");
        assert_eq!(
            got[2],
            "webhooks[1].matchConditions[2].expression: Invalid value: \"authorizer.requestResource.check('get').allowed()\": the authorizer variable is not supported by the embedded cluster"
        );
        assert_eq!(
            got[3],
            "webhooks[1].matchConditions[3].name: Duplicate value: \"authz\""
        );
        assert_eq!(
            got[4],
            "webhooks[1].matchConditions[3].expression: Required value"
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
