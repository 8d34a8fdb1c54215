//! What every CEL expression the API server runs must respect before it is compiled and kept:
//! its length, its nesting (parsed and evaluated by recursion) and its size. Shared by the
//! webhooks' `matchConditions` and CRDs' `x-kubernetes-validations` rules; what an expression
//! may cost is [`super::cel_cost`]'s.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, MapExpr, StructExpr};

/// The longest expression compiled (kube-apiserver's limit on a rule or condition).
pub const MAX_LENGTH: usize = 5 * 1024;
/// The deepest bracket nesting in the source, and the deepest expression tree.
pub const MAX_NESTING: usize = 32;
/// The deepest expression tree a rule may parse to.
pub const MAX_DEPTH: usize = 64;
/// The most nodes one expression may have.
pub const MAX_NODES: usize = 512;

/// Why an expression is refused before it runs.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BoundsError {
    /// The source is longer than [`MAX_LENGTH`] characters.
    #[error("the expression is longer than {MAX_LENGTH} characters")]
    TooLong,
    /// The source or its expression tree nests too deep.
    #[error("the expression nests deeper than {limit}")]
    TooDeep {
        /// The nesting limit that was passed.
        limit: usize,
    },
    /// The expression has more than [`MAX_NODES`] terms.
    #[error("the expression has more than {MAX_NODES} terms")]
    TooLarge,
    /// The expression does not compile.
    #[error("compilation failed: {0}")]
    Compile(String),
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
pub fn children(e: &Expr) -> Vec<&IdedExpr> {
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
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
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

/// Checks the size and depth of a parsed expression, without recursion (so that the later
/// recursive walks, the estimate's and the evaluation's, stay shallow).
fn check_shape(root: &IdedExpr) -> Result<(), BoundsError> {
    let mut stack = vec![(root, 1usize)];
    let mut nodes = 0usize;
    while let Some((e, depth)) = stack.pop() {
        nodes += 1;
        if nodes > MAX_NODES {
            return Err(BoundsError::TooLarge);
        }
        if depth > MAX_DEPTH {
            return Err(BoundsError::TooDeep { limit: MAX_DEPTH });
        }
        for c in children(&e.expr) {
            stack.push((c, depth + 1));
        }
    }
    Ok(())
}

/// Compiles `source` once it is within the bounds.
pub fn compile(source: &str) -> Result<cel::Program, BoundsError> {
    if source.len() > MAX_LENGTH {
        return Err(BoundsError::TooLong);
    }
    if nesting(source) > MAX_NESTING {
        return Err(BoundsError::TooDeep { limit: MAX_NESTING });
    }
    let program = cel::Program::compile(source).map_err(|e| BoundsError::Compile(e.to_string()))?;
    check_shape(program.expression())?;
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds() {
        let long = format!("'{}' == ''", "x".repeat(MAX_LENGTH));
        assert_eq!(compile(&long).err(), Some(BoundsError::TooLong));
        let deep = format!("{}true{}", "(".repeat(40), ")".repeat(40));
        assert_eq!(
            compile(&deep).err(),
            Some(BoundsError::TooDeep { limit: MAX_NESTING })
        );
        // Brackets inside a string do not count.
        assert!(compile(&format!("'{}' != ''", "(".repeat(40))).is_ok());
        let chain = vec!["1"; 100].join(" + ") + " > 0";
        assert_eq!(
            compile(&chain).err(),
            Some(BoundsError::TooDeep { limit: MAX_DEPTH })
        );
        let wide = format!("[{}]", vec!["1"; 600].join(", "));
        assert_eq!(compile(&wide).err(), Some(BoundsError::TooLarge));
        assert!(matches!(compile("self.("), Err(BoundsError::Compile(_))));
        assert!(compile("self.x == oldSelf.x").is_ok());
    }
}
