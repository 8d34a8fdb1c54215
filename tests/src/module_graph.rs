//! A crate's module graph, read from its sources' `use` trees and inline `crate::`/`super::`
//! paths (test modules left out), and the import cycles in it: a module that imports (directly
//! or through others) a module that imports it cannot be read, tested or moved on its own.
//! `tests/tests/module_graph.rs` holds every library crate of the workspace to none.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use crate::sources::{code, rust_files};

/// `crate::a::b` for `src/a/b.rs` or `src/a/b/mod.rs`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    std::iter::once("crate".to_owned())
        .chain(parts)
        .collect::<Vec<_>>()
        .join("::")
}

/// The full paths of a `use` tree (`a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`).
pub fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
    let tree = tree.trim();
    let join = |p: &str, s: &str| {
        if p.is_empty() {
            s.to_owned()
        } else if s == "self" {
            p.to_owned()
        } else {
            format!("{p}::{s}")
        }
    };
    match tree.find('{') {
        None => {
            let item = tree.split(" as ").next().unwrap_or("").trim();
            if !item.is_empty() {
                out.push(join(prefix, item));
            }
        }
        Some(open) => {
            let head = tree[..open].trim().trim_end_matches("::");
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let base = join(prefix, head);
            let (mut depth, mut start) = (0, 0);
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand(&base, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand(&base, &inner[start..], out);
        }
    }
}

/// The module a path used from `module` names: the longest known module prefix.
fn resolve(module: &str, path: &str, modules: &BTreeSet<String>, is_dir: bool) -> Option<String> {
    let mut segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
    let mut base: Vec<String> = module.split("::").map(String::from).collect();
    match segs.first().copied() {
        Some("crate") => {
            base = vec!["crate".into()];
            segs.remove(0);
        }
        Some("super") => {
            while segs.first() == Some(&"super") {
                segs.remove(0);
                base.pop();
            }
            let _ = is_dir;
        }
        Some("self") => {
            segs.remove(0);
        }
        Some(first) if modules.contains(&format!("{module}::{first}")) => {}
        // Another crate (std, serde, the toolkit...).
        _ => return None,
    }
    let mut best = base.join("::");
    let mut cur = base;
    for s in segs {
        cur.push(s.to_owned());
        let candidate = cur.join("::");
        if modules.contains(&candidate) {
            best = candidate;
        } else {
            break;
        }
    }
    Some(best)
}

/// The module graph of the crate whose sources are under `src`.
pub fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let inline = regex::Regex::new(r"\b(?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)+").unwrap();
    let use_stmt = regex::Regex::new(r"(?s)\buse\s+([^;]+);").unwrap();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for f in &files {
        let module = module_of(src, f);
        // `super` in `a/mod.rs` is `a`'s parent, as in `a/b.rs` it is `a`: both are the
        // module's parent, which is what popping one segment gives.
        let is_dir = f.file_name().is_some_and(|n| n == "mod.rs");
        let text = code(&std::fs::read_to_string(f).unwrap());
        let mut paths = Vec::new();
        for cap in use_stmt.captures_iter(&text) {
            expand("", &cap[1], &mut paths);
        }
        let without_uses = use_stmt.replace_all(&text, "");
        paths.extend(
            inline
                .find_iter(&without_uses)
                .map(|m| m.as_str().to_owned()),
        );
        for p in paths {
            if let Some(target) = resolve(&module, &p, &modules, is_dir)
                && target != module
                && target != "crate"
            {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

/// Each cycle of `edges` with the imports inside it (`from -> to`), to show where to cut.
pub fn imports_inside(
    edges: &BTreeMap<String, BTreeSet<String>>,
    cycles: &[Vec<String>],
) -> Vec<Vec<String>> {
    cycles
        .iter()
        .map(|c| {
            c.iter()
                .flat_map(|from| {
                    edges[from]
                        .iter()
                        .filter(|to| c.contains(to))
                        .map(move |to| format!("{from} -> {to}"))
                })
                .collect()
        })
        .collect()
}

/// Tarjan's strongly connected components with more than one module.
pub fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_finds_a_planted_cycle() {
        let mut g = BTreeMap::new();
        g.insert(
            "crate::a".to_owned(),
            BTreeSet::from(["crate::b".to_owned()]),
        );
        g.insert(
            "crate::b".to_owned(),
            BTreeSet::from(["crate::a".to_owned()]),
        );
        g.insert(
            "crate::c".to_owned(),
            BTreeSet::from(["crate::a".to_owned()]),
        );
        assert_eq!(cycles(&g), vec![vec!["crate::a", "crate::b"]]);
        let mut paths = Vec::new();
        expand(
            "",
            "super::{Ctx, handlers::{Filter, at_version}, status::ApiError}",
            &mut paths,
        );
        assert_eq!(
            paths,
            [
                "super::Ctx",
                "super::handlers::Filter",
                "super::handlers::at_version",
                "super::status::ApiError"
            ]
        );
    }
}
