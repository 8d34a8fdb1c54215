//! Finding `Result<_, String>` in code: a bare string as an error tells the caller nothing it
//! can match on. `tests/tests/string_errors.rs` holds the library crates to none outside clap's
//! value parsers (clap wants `Result<_, String>` there).

/// Each `Result<..>` in `code` whose error type is `String`, as written (on one line).
pub fn string_errors(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("Result<") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "Result<".len()..];
        rest = after;
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some((args, end)) = generic_args(after) else {
            continue;
        };
        if args.len() >= 2
            && matches!(
                args.last(),
                Some(&("String" | "std::string::String" | "alloc::string::String"))
            )
        {
            let text = format!("Result<{}>", &after[..end]);
            found.push(text.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    found
}

/// The top-level arguments (trimmed, a trailing comma dropped) of a generic list whose `<` has
/// just been read, and where its `>` is; `None` when it never closes. The `>` of `->` (a
/// closure or function type) closes nothing.
fn generic_args(text: &str) -> Option<(Vec<&str>, usize)> {
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut start = 0;
    let mut prev = ' ';
    for (i, c) in text.char_indices() {
        match c {
            '<' | '(' | '[' => depth += 1,
            ')' | ']' => depth = depth.saturating_sub(1),
            '>' if prev == '-' => {}
            '>' if depth == 0 => {
                let last = text[start..i].trim();
                if !last.is_empty() {
                    args.push(last);
                }
                return Some((args, i));
            }
            '>' => depth -= 1,
            ',' if depth == 0 => {
                args.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
        prev = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_errors_are_found_however_written() {
        let code = "fn a() -> Result<(), String> {}\n\
                    fn b() -> Result<Vec<String>, String> {}\n\
                    fn c() -> std::result::Result<\n    Option<u8>,\n    String,\n> {}\n\
                    fn d() -> impl Stream<Item = Result<Bytes, String>> {}\n\
                    fn e() -> Result<Box<dyn Fn(u8) -> u8>, std::string::String> {}\n";
        assert_eq!(
            string_errors(code),
            [
                "Result<(), String>",
                "Result<Vec<String>, String>",
                "Result< Option<u8>, String, >",
                "Result<Bytes, String>",
                "Result<Box<dyn Fn(u8) -> u8>, std::string::String>",
            ]
        );
    }

    #[test]
    fn typed_errors_and_string_values_pass() {
        let code = "fn a() -> Result<String, Error> {}\n\
                    fn b() -> anyhow::Result<String> {}\n\
                    fn c() -> io::Result<Vec<String>> {}\n\
                    fn d() -> Result<(String, String), ParseError> {}\n\
                    fn e() -> MyResult<u8, String> {}\n";
        assert!(string_errors(code).is_empty(), "{:?}", string_errors(code));
    }
}
