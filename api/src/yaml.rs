//! Kubernetes-style YAML for the API types: two-space indents, sequences indented under their
//! key, keys in declaration order, and strings quoted only where a YAML reader would take them
//! for something else (`"7.2"`, `"0000:04:00.0"`, `"true"`).
//!
//! Emitting is done here rather than by a YAML library so that the output of the one-shot
//! commands and the committed CRD manifests have one stable, reviewed shape.

use serde::Serialize;
use serde_json::Value;

/// Renders any serializable value as a YAML document (no `---`, trailing newline).
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    Ok(render(&serde_json::to_value(value)?))
}

/// Renders a JSON value as a YAML document.
pub fn render(value: &Value) -> String {
    render_with_indent(value, 2)
}

/// Renders any serializable value with `step` spaces per nesting level (`preflight` prints with
/// four, as the reference's YAML encoder is set up there).
pub fn to_string_with_indent<T: Serialize + ?Sized>(
    value: &T,
    step: usize,
) -> Result<String, serde_json::Error> {
    Ok(render_with_indent(&serde_json::to_value(value)?, step))
}

/// Renders a JSON value with `step` spaces per nesting level. A sequence item's mapping still
/// continues two columns in, after its `- `.
pub fn render_with_indent(value: &Value, step: usize) -> String {
    let w = Writer { step };
    let mut out = String::new();
    match value {
        Value::Object(map) if !map.is_empty() => w.write_map(map, 0, false, &mut out),
        Value::Array(items) if !items.is_empty() => w.write_seq(items, 0, false, &mut out),
        scalar => {
            w.write_inline(scalar, 0, &mut out);
            out.push('\n');
        }
    }
    out
}

/// The one layout setting: how far a nested block is indented.
#[derive(Clone, Copy)]
struct Writer {
    step: usize,
}

fn pad(indent: usize, out: &mut String) {
    out.extend(std::iter::repeat_n(' ', indent));
}

impl Writer {
    /// Writes a non-empty mapping. With `continues_line` the first key goes where the cursor is
    /// (after a `- `), the rest at `indent`.
    fn write_map(
        self,
        map: &serde_json::Map<String, Value>,
        indent: usize,
        continues_line: bool,
        out: &mut String,
    ) {
        for (i, (key, value)) in map.iter().enumerate() {
            if i > 0 || !continues_line {
                pad(indent, out);
            }
            self.write_string(key, indent, out);
            out.push(':');
            match value {
                Value::Object(m) if !m.is_empty() => {
                    out.push('\n');
                    self.write_map(m, indent + self.step, false, out);
                }
                Value::Array(items) if !items.is_empty() => {
                    out.push('\n');
                    self.write_seq(items, indent + self.step, false, out);
                }
                scalar => {
                    out.push(' ');
                    self.write_inline(scalar, indent + self.step, out);
                    out.push('\n');
                }
            }
        }
    }

    /// Writes a non-empty sequence, one `- ` item per line at `indent`.
    fn write_seq(self, items: &[Value], indent: usize, continues_line: bool, out: &mut String) {
        for (i, item) in items.iter().enumerate() {
            if i > 0 || !continues_line {
                pad(indent, out);
            }
            out.push_str("- ");
            match item {
                Value::Object(m) if !m.is_empty() => self.write_map(m, indent + 2, true, out),
                Value::Array(inner) if !inner.is_empty() => {
                    self.write_seq(inner, indent + 2, true, out)
                }
                scalar => {
                    self.write_inline(scalar, indent + 2, out);
                    out.push('\n');
                }
            }
        }
    }

    /// Writes a scalar or an empty collection at the cursor. `indent` is where a block string's
    /// lines go.
    fn write_inline(self, value: &Value, indent: usize, out: &mut String) {
        match value {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(&n.to_string()),
            Value::String(s) => self.write_string(s, indent, out),
            Value::Array(_) => out.push_str("[]"),
            Value::Object(_) => out.push_str("{}"),
        }
    }

    fn write_string(self, s: &str, indent: usize, out: &mut String) {
        if is_block_candidate(s) {
            // A literal block keeps multi-line text (logs, evidence) readable.
            out.push('|');
            match s.len() - s.trim_end_matches('\n').len() {
                0 => out.push('-'),
                1 => {}
                _ => out.push('+'),
            }
            for line in s.trim_end_matches('\n').split('\n') {
                out.push('\n');
                if !line.is_empty() {
                    pad(indent, out);
                    out.push_str(line);
                }
            }
            out.extend(std::iter::repeat_n(
                '\n',
                (s.len() - s.trim_end_matches('\n').len()).saturating_sub(1),
            ));
        } else if needs_quotes(s) {
            write_double_quoted(s, out);
        } else {
            out.push_str(s);
        }
    }
}

fn is_block_candidate(s: &str) -> bool {
    s.contains('\n')
        && !s.starts_with([' ', '\n'])
        && s.split('\n')
            .all(|l| !l.ends_with(' ') && !l.ends_with('\t'))
        && !s.chars().any(|c| c.is_control() && c != '\n')
}

fn write_double_quoted(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Whether a plain scalar would be misread: as another type (YAML 1.1 or 1.2), or as syntax.
fn needs_quotes(s: &str) -> bool {
    if s.is_empty() || s != s.trim() {
        return true;
    }
    // `-x` is a plain word; `- x`, `--`, `-3` and every other indicator start are syntax.
    let dash_word = s.starts_with('-') && s.len() > 1 && !s[1..].starts_with([' ', '-']);
    let indicator = s.starts_with([
        '-', '?', ':', ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@',
        '`',
    ]);
    if indicator && !dash_word {
        return true;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') || s.chars().any(char::is_control) {
        return true;
    }
    is_reserved_word(s) || looks_numeric(s)
}

fn is_reserved_word(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "y" | "n" | "null" | "~"
    )
}

/// Integers and floats in any notation YAML 1.1 or 1.2 reads, including base-60 (`1:20`).
fn looks_numeric(s: &str) -> bool {
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    if body.is_empty() {
        return false;
    }
    let lower = body.to_ascii_lowercase();
    if matches!(lower.as_str(), ".inf" | ".nan") {
        return true;
    }
    let digits_with_underscores =
        |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '_');
    for (prefix, radix) in [("0x", 16), ("0o", 8), ("0b", 2)] {
        if let Some(rest) = lower.strip_prefix(prefix) {
            return !rest.is_empty() && rest.chars().all(|c| c == '_' || c.is_digit(radix));
        }
    }
    if digits_with_underscores(body) {
        return true;
    }
    // Base 60: digits, then one or more `:`-separated groups, optionally a fraction.
    if body.contains(':') {
        let (whole, _) = body.split_once('.').unwrap_or((body, ""));
        let mut parts = whole.split(':');
        let first_ok = parts.next().is_some_and(digits_with_underscores);
        return first_ok
            && parts
                .all(|p| !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_digit()))
            && body
                .split_once('.')
                .is_none_or(|(_, frac)| frac.chars().all(|c| c.is_ascii_digit() || c == '_'));
    }
    // Decimal floats: digits with one dot and an optional exponent.
    let (mantissa, exponent) = match lower.split_once('e') {
        Some((m, e)) => (m, Some(e)),
        None => (lower.as_str(), None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() || digits_with_underscores(int))
                && (frac.is_empty() || digits_with_underscores(frac))
                && !(int.is_empty() && frac.is_empty())
        }
        None => exponent.is_some() && digits_with_underscores(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quotes_only_what_would_be_misread() {
        for s in [
            "7.2",
            "0",
            "0000:04:00.0",
            "true",
            "No",
            "null",
            "",
            " x",
            "1e5",
            "0x1F",
            ".5",
            "-3",
            "a: b",
            "#x",
            "- x",
            "12:30",
        ] {
            assert!(needs_quotes(s), "{s:?} must be quoted");
        }
        for s in [
            "0-13",
            "6.16.13",
            "gfx1101",
            "GC 11.0.0",
            "GPU-5c88007d760374f3",
            "2026-08-29T08:01:43.565038175+08:00",
            "amd.com/gpu",
            "-x",
            "1g.10gb",
        ] {
            assert!(!needs_quotes(s), "{s:?} must stay plain");
        }
    }

    #[test]
    fn nests_sequences_under_keys() {
        let v = json!([{"id": "a", "list": [1, 2], "map": {"k": "v"}, "empty": [], "none": {}}]);
        assert_eq!(
            render(&v),
            "- id: a\n  list:\n    - 1\n    - 2\n  map:\n    k: v\n  empty: []\n  none: {}\n"
        );
        assert_eq!(render(&json!([])), "[]\n");
        assert_eq!(render(&json!([[1, 2], 3])), "- - 1\n  - 2\n- 3\n");
    }

    #[test]
    fn multi_line_text_is_a_literal_block() {
        let v = json!({"evidence": "begin\n  maps\nend\n", "detail": "x\ny"});
        assert_eq!(
            render(&v),
            "evidence: |\n  begin\n    maps\n  end\ndetail: |-\n  x\n  y\n"
        );
    }

    #[test]
    fn four_space_indent_nests_by_four_and_items_continue_after_the_dash() {
        let v = json!({"accelerators": [{"manufacturer": "amd", "detection": {"state": "ok"},
            "checks": [{"capability": "x", "evidence": "a\nb\n"}]}]});
        assert_eq!(
            render_with_indent(&v, 4),
            "accelerators:\n    - manufacturer: amd\n      detection:\n          state: ok\n      checks:\n          - capability: x\n            evidence: |\n                a\n                b\n"
        );
    }

    #[test]
    fn output_reads_back_as_the_same_value() {
        let v = json!({
            "a": ["7.2", "0000:04:00.0", "yes", "x\ny\n", "tab\there", "q\"uote", "back\\slash"],
            "n": -1.5, "b": false, "z": null, "nested": [{"k": [{"deep": "1:2"}]}]
        });
        let back: Value = serde_yaml_ng::from_str(&render(&v)).unwrap();
        assert_eq!(back, v);
    }
}
