//! Tidy checks over the source tree (rust-analyzer's `tidy` habit): every
//! Rust file says what it is in its first line, proptest is a dependency
//! only where it is used, and the binaries reach the libraries only
//! through the front crate.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every `.rs` file below `dir`, skipping build output.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        if name == "target" || name.to_string_lossy().starts_with('.') {
            continue;
        }
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for top in ["crates", "xtask", "benches", "python/src"] {
        rust_files(&root().join(top), &mut files);
    }
    assert!(files.len() > 50, "found only {} Rust files", files.len());
    files
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let missing: Vec<String> = all_rust_files()
        .into_iter()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap_or_default();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            !first.starts_with("//!")
        })
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! first line: {missing:#?}"
    );
}

/// The `[dependencies]` table of a manifest, as text.
fn dependencies(manifest: &str) -> &str {
    let start = manifest.find("[dependencies]").unwrap_or(manifest.len());
    let rest = &manifest[start..];
    let end = rest[1..].find("\n[").map_or(rest.len(), |i| i + 1);
    &rest[..end]
}

#[test]
fn proptest_is_a_dependency_only_where_it_is_used() {
    let mut manifests = vec![root().join("benches/Cargo.toml")];
    for e in std::fs::read_dir(root().join("crates")).unwrap().flatten() {
        manifests.push(e.path().join("Cargo.toml"));
    }
    for m in manifests {
        let text = std::fs::read_to_string(&m).unwrap_or_default();
        if !text.lines().any(|l| l.trim_start().starts_with("proptest")) {
            continue;
        }
        let mut files = Vec::new();
        rust_files(m.parent().unwrap(), &mut files);
        let used = files
            .iter()
            .any(|f| std::fs::read_to_string(f).is_ok_and(|t| t.contains("proptest")));
        assert!(used, "{} lists proptest and never uses it", m.display());
    }
}

#[test]
fn the_binaries_reach_the_libraries_only_through_the_front_crate() {
    for (manifest, allowed) in [
        ("xtask/Cargo.toml", &["adapt", "adapt-fuzz"][..]),
        ("python/Cargo.toml", &["adapt"][..]),
    ] {
        let text = std::fs::read_to_string(root().join(manifest)).unwrap();
        for line in dependencies(&text).lines() {
            let name = line.split(['.', ' ', '=']).next().unwrap_or("");
            if name.starts_with("adapt") {
                assert!(allowed.contains(&name), "{manifest} depends on {name}");
            }
        }
    }
}
