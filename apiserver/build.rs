//! Embeds the SQL migrations (`migrations/sqlite/`, `migrations/postgres/` at the workspace
//! root) in the crate: writes `$OUT_DIR/migrations.rs` with each backend's files as
//! `(file name, contents)` in name order, read by `store::migrations`. It takes the place of
//! sqlx's `migrate!` macro, whose procedural-macro crate compiled sqlx, SQLite's C and rustls a
//! second time for the build host (issue 41: the cold build).

use std::{env, fmt::Write as _, fs, path::Path};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
    let mut out = String::new();
    for (name, dir) in [("SQLITE", "sqlite"), ("POSTGRES", "postgres")] {
        let dir = root.join(dir);
        println!("cargo::rerun-if-changed={}", dir.display());
        let mut files: Vec<_> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|entry| entry.expect("a directory entry").path())
            .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
            .collect();
        files.sort();
        writeln!(out, "pub(super) const {name}: &[(&str, &str)] = &[").unwrap();
        for path in files {
            let file = path
                .file_name()
                .and_then(|f| f.to_str())
                .expect("a UTF-8 file name");
            let path = path.canonicalize().expect("a migration's path");
            writeln!(
                out,
                "    ({file:?}, include_str!({:?})),",
                path.display().to_string()
            )
            .unwrap();
        }
        writeln!(out, "];").unwrap();
    }
    let out_dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR");
    fs::write(Path::new(&out_dir).join("migrations.rs"), out).expect("writing migrations.rs");
}
