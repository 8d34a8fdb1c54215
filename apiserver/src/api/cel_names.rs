//! How CRD rules name schema properties: as they are where CEL allows it, a reserved word as
//! `__word__`, and `.`, `-`, `/` and `__` spelled out (`__dot__`, `__dash__`, `__slash__`,
//! `__underscores__`), as kube-apiserver names them.

use std::borrow::Cow;

/// CEL's reserved words: a property so named is `__name__` in a rule.
const RESERVED: [&str; 21] = [
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// How a rule names property `name` (`None`: it cannot).
pub fn escape(name: &str) -> Option<Cow<'_, str>> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__").into());
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/');
    let first_ok = name
        .chars()
        .next()
        .is_some_and(|c| !c.is_ascii_digit() && allowed(c));
    if !first_ok || !name.chars().all(allowed) {
        return None;
    }
    if !name.contains(['.', '-', '/']) && !name.contains("__") {
        return Some(name.into());
    }
    Some(
        name.replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__")
            .into(),
    )
}

/// The property a rule's field name stands for ([`escape`] undone).
pub fn unescape(name: &str) -> Cow<'_, str> {
    if let Some(word) = name.strip_prefix("__").and_then(|n| n.strip_suffix("__"))
        && RESERVED.contains(&word)
    {
        return word.into();
    }
    if !name.contains("__") {
        return name.into();
    }
    name.replace("__dot__", ".")
        .replace("__dash__", "-")
        .replace("__slash__", "/")
        .replace("__underscores__", "__")
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_and_punctuated_names_are_escaped() {
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(
            escape("a.b-c/d__e").as_deref(),
            Some("a__dot__b__dash__c__slash__d__underscores__e")
        );
        assert_eq!(escape("1abc"), None);
        assert_eq!(
            unescape("a__dot__b__dash__c__slash__d__underscores__e"),
            "a.b-c/d__e"
        );
        assert_eq!(unescape("__namespace__"), "namespace");
    }
}
