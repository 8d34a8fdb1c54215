//! No library crate returns `Result<_, String>` (see [`gpustack_tests::string_errors`]): errors
//! are types a caller can match on. Only clap's value parsers, whose signature clap fixes, and
//! test code may.

use std::path::{Component, Path};

use gpustack_tests::{
    sources::{LIBRARY_CRATES, code, rust_files, workspace_root},
    string_errors::string_errors,
};

/// clap's value parsers and the check of parsed flags clap calls: `Result<_, String>` is
/// clap's contract there.
const CLAP_PARSERS: &[&str] = &["src/cli/args.rs", "src/cli/validate.rs"];

#[test]
fn no_library_returns_a_string_as_its_error() {
    let mut report = Vec::new();
    for krate in LIBRARY_CRATES {
        let mut files = Vec::new();
        rust_files(&workspace_root().join(krate), &mut files);
        assert!(!files.is_empty(), "no sources under {krate}");
        for f in files {
            let rel = f.strip_prefix(workspace_root()).unwrap();
            let in_tests = rel
                .components()
                .any(|c| c == Component::Normal("tests".as_ref()))
                || rel.file_name().is_some_and(|n| n == "tests.rs");
            if in_tests || CLAP_PARSERS.iter().any(|p| rel == Path::new(p)) {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap();
            for found in string_errors(&code(&text)) {
                report.push(format!("{}: {found}", rel.display()));
            }
        }
    }
    assert!(
        report.is_empty(),
        "Result<_, String> in libraries: {report:#?}"
    );
}

/// The allow-list holds clap's parsers only while they exist, so that it cannot outlive them.
#[test]
fn the_clap_parsers_allowed_still_are_there() {
    for p in CLAP_PARSERS {
        let text = std::fs::read_to_string(workspace_root().join(p)).unwrap();
        assert!(!string_errors(&code(&text)).is_empty(), "{p}");
    }
}
