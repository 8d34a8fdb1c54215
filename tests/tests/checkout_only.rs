//! A fresh clone alone must pass the test suite: no test, benchmark or CI script may read a path
//! outside the checkout. This scans the sources for the ways a path is built from a known anchor
//! (`CARGO_MANIFEST_DIR`, `#[path]`) and resolves each lexically; it also refuses
//! the names of the documents that sit beside the checkout but are not part of it.

use std::path::{Component, Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every file under `dir` with one of `exts`, skipping build output and VCS metadata.
fn files(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files(&path, exts, out);
            }
        } else if exts.iter().any(|e| name.ends_with(e)) {
            out.push(path);
        }
    }
}

/// The directory of the crate a source file belongs to (nearest `Cargo.toml` above it).
fn crate_dir(file: &Path) -> PathBuf {
    let mut dir = file.parent().unwrap();
    while !dir.join("Cargo.toml").exists() {
        dir = dir.parent().expect("every source file is inside a crate");
    }
    dir.to_path_buf()
}

/// `base/rel` with `.` and `..` folded away, without touching the filesystem.
fn resolve(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel.trim_start_matches('/')).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The relative paths a source anchors to its crate (`crate_based`) or to its own file.
fn anchored_paths(text: &str) -> (Vec<String>, Vec<String>) {
    let manifest =
        regex::Regex::new(r#"env!\("CARGO_MANIFEST_DIR"\)\)?[^;]{0,160}?"(/?[^"{}]*\.\.[^"{}]*)""#)
            .unwrap();
    let attr = regex::Regex::new(r#"#\[path\s*=\s*"([^"]+)"\]"#).unwrap();
    let crate_based = manifest
        .captures_iter(text)
        .map(|c| c[1].to_owned())
        .collect();
    let file_based = attr.captures_iter(text).map(|c| c[1].to_owned()).collect();
    (crate_based, file_based)
}

#[test]
fn no_source_reads_outside_the_checkout() {
    let root = workspace_root();
    let mut sources = Vec::new();
    files(&root, &[".rs"], &mut sources);
    assert!(sources.len() > 50, "the scan found the workspace's sources");

    let mut escapes = Vec::new();
    let mut checked = 0;
    for file in &sources {
        let text = std::fs::read_to_string(file).unwrap();
        let (crate_based, file_based) = anchored_paths(&text);
        let resolved = crate_based
            .iter()
            .map(|p| (p, resolve(&crate_dir(file), p)))
            .chain(
                file_based
                    .iter()
                    .map(|p| (p, resolve(file.parent().unwrap(), p))),
            );
        for (written, path) in resolved {
            checked += 1;
            if !path.starts_with(&root) {
                escapes.push(format!(
                    "{}: {written:?} -> {}",
                    file.display(),
                    path.display()
                ));
            }
        }
    }
    assert!(
        checked > 5,
        "the scan recognised the anchored paths it exists to check"
    );
    assert!(
        escapes.is_empty(),
        "paths leave the checkout:\n{}",
        escapes.join("\n")
    );
}

#[test]
fn nothing_names_the_documents_beside_the_checkout() {
    let root = workspace_root();
    let mut scanned = Vec::new();
    files(&root, &[".rs", ".toml", ".sh", ".py"], &mut scanned);
    scanned.push(root.join(".ci/run"));
    // Spelled in two pieces so this file does not match itself.
    let forbidden = [
        ["shared/", "seed"],
        ["shared/", "reference"],
        ["/work", "/shared"],
    ]
    .map(|p| p.concat());
    let hits: Vec<String> = scanned
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            forbidden
                .iter()
                .find(|word| text.contains(word.as_str()))
                .map(|word| format!("{} names {word}", f.display()))
        })
        .collect();
    assert!(hits.is_empty(), "{}", hits.join("\n"));
}

#[test]
fn the_scanner_catches_an_escape() {
    // Assembled at run time so that the scan of this very file does not find it.
    let text = format!(
        "let p = PathBuf::from(env!({q}CARGO_MANIFEST_DIR{q})).join({q}../../elsewhere/x{q});",
        q = '"'
    );
    let (crate_based, _) = anchored_paths(&text);
    assert_eq!(crate_based, ["../../elsewhere/x"]);
    let root = workspace_root();
    assert!(!resolve(&root.join("tests"), &crate_based[0]).starts_with(&root));
    let attr = r#"#[path = "../support/webhook.rs"]"#;
    assert_eq!(anchored_paths(attr).1, ["../support/webhook.rs"]);
}
