//! `allowPatterns` / `ignorePatterns`: Python `fnmatchcase` semantics as `huggingface_hub` uses
//! them, so the worker and every node pick the same files. `*` crosses `/`, `?` is one
//! character, `[...]`/`[!...]` are classes, and a pattern ending in `/` means "everything under
//! this directory". An ignore wins over an allow; no allow patterns means "allow everything".

/// An artifact's allow and ignore patterns, compiled.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileFilter {
    allow: Vec<Pattern>,
    ignore: Vec<Pattern>,
}

impl FileFilter {
    /// Compiles `allowPatterns` and `ignorePatterns`.
    pub fn new(allow: &[String], ignore: &[String]) -> Self {
        Self {
            allow: allow.iter().map(|p| Pattern::parse(p)).collect(),
            ignore: ignore.iter().map(|p| Pattern::parse(p)).collect(),
        }
    }

    /// Whether the file at `path` (relative to the repository root) is downloaded.
    pub fn keeps(&self, path: &str) -> bool {
        let allowed = self.allow.is_empty() || self.allow.iter().any(|p| p.matches(path));
        allowed && !self.ignore.iter().any(|p| p.matches(path))
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Star,
    One,
    Literal(char),
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches(&self, c: char) -> bool {
        match self {
            Token::Star | Token::One => true,
            Token::Literal(l) => *l == c,
            Token::Class { negated, ranges } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pattern(Vec<Token>);

impl Pattern {
    fn parse(text: &str) -> Self {
        let mut text = text.to_owned();
        if text.ends_with('/') {
            text.push('*');
        }
        let chars: Vec<char> = text.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                    i += 1;
                }
                '?' => {
                    tokens.push(Token::One);
                    i += 1;
                }
                '[' => match parse_class(&chars, i + 1) {
                    Some((token, next)) => {
                        tokens.push(token);
                        i = next;
                    }
                    None => {
                        // Python treats an unclosed `[` as a literal.
                        tokens.push(Token::Literal('['));
                        i += 1;
                    }
                },
                c => {
                    tokens.push(Token::Literal(c));
                    i += 1;
                }
            }
        }
        Self(tokens)
    }

    /// Glob matching with one backtrack point per star (linear in practice).
    fn matches(&self, path: &str) -> bool {
        let text: Vec<char> = path.chars().collect();
        let (mut t, mut p) = (0, 0);
        let mut backtrack: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.0.get(p) {
                Some(Token::Star) => {
                    backtrack = Some((p, t));
                    p += 1;
                }
                Some(tok) if tok.matches(text[t]) => {
                    p += 1;
                    t += 1;
                }
                _ => match backtrack {
                    Some((bp, bt)) => {
                        p = bp + 1;
                        t = bt + 1;
                        backtrack = Some((bp, bt + 1));
                    }
                    None => return false,
                },
            }
        }
        self.0[p..].iter().all(|tok| *tok == Token::Star)
    }
}

/// A class starting after `[` at `start`: `!` negates, a `]` right at the start is literal,
/// `a-z` is a range. Returns the token and the index after the closing `]`.
fn parse_class(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start;
    let negated = chars.get(i) == Some(&'!');
    if negated {
        i += 1;
    }
    let first = i;
    let mut ranges = Vec::new();
    while i < chars.len() {
        let c = chars[i];
        if c == ']' && i > first {
            return Some((Token::Class { negated, ranges }, i + 1));
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            ranges.push((c, chars[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(allow: &[&str], ignore: &[&str]) -> FileFilter {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        FileFilter::new(&own(allow), &own(ignore))
    }

    #[test]
    fn fnmatchcase_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("*.json", "config.json", true),
            ("*.json", "sub/config.json", true), // `*` crosses `/`
            ("*.json", "config.jsonl", false),
            ("sub/", "sub/a.txt", true),
            ("sub/", "sub", false),
            ("sub/", "subx/a.txt", false),
            (
                "model-?????-of-*.safetensors",
                "model-00001-of-00002.safetensors",
                true,
            ),
            ("[ab].txt", "a.txt", true),
            ("[!ab].txt", "a.txt", false),
            ("[!ab].txt", "c.txt", true),
            ("[a-c]x", "bx", true),
            ("[]]", "]", true),
            ("[abc", "[abc", true),           // unclosed class is literal
            ("*.JSON", "config.json", false), // case-sensitive
            ("**", "", true),
            ("a*b*c", "aXbYbZc", true),
            ("a*b*c", "aXbYbZ", false),
        ];
        for (pattern, path, want) in cases {
            assert_eq!(
                Pattern::parse(pattern).matches(path),
                *want,
                "{pattern} vs {path}"
            );
        }
    }

    #[test]
    fn ignore_wins_and_empty_allow_keeps_all() {
        let f = filter(&[], &[]);
        assert!(f.keeps("anything"));
        let f = filter(&["*.safetensors", "*.json"], &["original/"]);
        assert!(f.keeps("model.safetensors"));
        assert!(!f.keeps("original/model.safetensors"));
        assert!(!f.keeps("README.md"));
        let f = filter(&["*"], &["*.bin"]);
        assert!(!f.keeps("pytorch_model.bin"));
    }
}
