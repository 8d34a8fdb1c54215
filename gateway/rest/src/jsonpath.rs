//! The subset of Kubernetes JSONPath that printer columns use: `.a.b`, `[N]`, `[*]` and
//! `[?(@.field=="value")]` filters.

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// Items whose value at the relative path equals the literal.
    Filter(Vec<String>, String),
}

/// Why a JSONPath is outside the subset printer columns use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JsonPathError {
    /// A `[` without its `]`.
    #[error("unclosed '[' in {0}")]
    Unclosed(String),
    /// A filter expression outside the supported `?(@.a.b=="v")` form.
    #[error("unsupported filter {0}")]
    Filter(String),
    /// A bracket segment that is neither an index, `*` nor a filter.
    #[error("unsupported JSONPath segment [{0}]")]
    Segment(String),
    /// A path that does not start at the object.
    #[error("unsupported JSONPath {0}")]
    Path(String),
}

fn parse(path: &str) -> Result<Vec<Step>, JsonPathError> {
    let p = path
        .trim()
        .trim_start_matches('{')
        .trim_end_matches('}')
        .trim();
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let name = &r[..end];
            if !name.is_empty() {
                steps.push(Step::Field(name.to_owned()));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| JsonPathError::Unclosed(path.to_owned()))?;
            // A filter may contain ']' only inside quotes; column paths never do.
            let inner = &r[..end];
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse() {
                steps.push(Step::Index(i));
            } else if let Some(f) = inner.strip_prefix("?(").and_then(|f| f.strip_suffix(')')) {
                let (lhs, rhs) = f
                    .split_once("==")
                    .ok_or_else(|| JsonPathError::Filter(f.to_owned()))?;
                let lhs = lhs
                    .trim()
                    .strip_prefix("@.")
                    .ok_or_else(|| JsonPathError::Filter(f.to_owned()))?;
                let rhs = rhs.trim().trim_matches(|c| c == '\'' || c == '"');
                steps.push(Step::Filter(
                    lhs.split('.').map(String::from).collect(),
                    rhs.to_owned(),
                ));
            } else if let Some(key) = inner.strip_prefix('\'').and_then(|k| k.strip_suffix('\'')) {
                steps.push(Step::Field(key.to_owned()));
            } else {
                return Err(JsonPathError::Segment(inner.to_owned()));
            }
        } else {
            return Err(JsonPathError::Path(path.to_owned()));
        }
    }
    Ok(steps)
}

fn literal_eq(v: &Value, lit: &str) -> bool {
    match v {
        Value::String(s) => s == lit,
        other => lit.parse::<Value>().is_ok_and(|l| l == *other),
    }
}

/// Every value `path` selects in `obj`, in document order.
pub fn find<'a>(obj: &'a Value, path: &str) -> Result<Vec<&'a Value>, JsonPathError> {
    let mut cur = vec![obj];
    for step in parse(path)? {
        let mut next = Vec::new();
        for v in cur {
            match &step {
                Step::Field(f) => next.extend(v.get(f)),
                Step::Index(i) => next.extend(v.get(*i)),
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(o) => next.extend(o.values()),
                    _ => {}
                },
                Step::Filter(rel, lit) => {
                    if let Value::Array(a) = v {
                        next.extend(a.iter().filter(|item| {
                            let mut x = Some(*item);
                            for f in rel {
                                x = x.and_then(|x| x.get(f));
                            }
                            x.is_some_and(|x| literal_eq(x, lit))
                        }));
                    }
                }
            }
        }
        cur = next;
    }
    Ok(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_indexes_and_filters() {
        let o = json!({
            "metadata": {"name": "x"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Resolved", "status": "False"}
            ]},
            "spec": {"groups": [{"n": 1}, {"n": 2}]}
        });
        assert_eq!(find(&o, ".metadata.name").unwrap(), vec![&json!("x")]);
        assert_eq!(
            find(&o, ".status.conditions[?(@.type=='Resolved')].status").unwrap(),
            vec![&json!("False")]
        );
        assert_eq!(
            find(&o, ".status.conditions[?(@.type==\"Ready\")].status").unwrap(),
            vec![&json!("True")]
        );
        assert_eq!(find(&o, ".spec.groups[1].n").unwrap(), vec![&json!(2)]);
        assert_eq!(
            find(&o, ".spec.groups[*].n").unwrap(),
            vec![&json!(1), &json!(2)]
        );
        assert_eq!(find(&o, "{.metadata.name}").unwrap(), vec![&json!("x")]);
        assert!(find(&o, ".status.missing.deeper").unwrap().is_empty());
        assert!(find(&o, ".a[").is_err());
    }
}
