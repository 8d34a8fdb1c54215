//! Reading a crate's sources the way the source checks (`module_graph`, `string_errors`) need
//! them: every `.rs` file under a directory, and a file's code without comments and tests.

use std::path::{Path, PathBuf};

/// Every library crate's sources, by the path of its `src` from the workspace root.
pub const LIBRARY_CRATES: &[&str] = &[
    "api/src",
    "apiserver/src",
    "gateway/src",
    "gateway/rest/src",
    "serving/src",
    "serving/delegated-auth/src",
    "worker/src",
    "agents/device-manager/src",
    "agents/model-manager/src",
    "agents/proto/src",
    "src",
];

/// The workspace's root directory.
pub fn workspace_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// Every `.rs` file under `dir`, recursively.
pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without comments and without its `#[cfg(test)]` modules.
pub fn code(text: &str) -> String {
    let mut out = String::new();
    let mut skip_depth: Option<i32> = None;
    let mut depth = 0i32;
    let mut pending_test = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.starts_with("#[cfg(test)]") {
            pending_test = true;
            continue;
        }
        let opens = line.matches('{').count() as i32;
        let closes = line.matches('}').count() as i32;
        if pending_test && skip_depth.is_none() {
            skip_depth = Some(depth);
            pending_test = false;
        }
        depth += opens - closes;
        if let Some(d) = skip_depth {
            if depth <= d && (opens > 0 || closes > 0 || trimmed.ends_with(';')) {
                skip_depth = None;
            }
            continue;
        }
        out.push_str(line.split(" //").next().unwrap_or(""));
        out.push('\n');
    }
    out
}
