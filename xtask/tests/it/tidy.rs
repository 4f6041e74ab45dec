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
        (
            "xtask/Cargo.toml",
            &["adapt", "adapt-fuzz", "adapt-soak"][..],
        ),
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

/// The names `use crate::{…}` and `crate::…` paths reach in `code`
/// (comments and the test module left out): module names, or items.
fn crate_paths(code: &str) -> Vec<String> {
    let code = code.split("#[cfg(test)]").next().unwrap_or(code);
    let code: String = code
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        if let Some(inner) = rest.strip_prefix('{') {
            let end = inner.find('}').unwrap_or(inner.len());
            out.extend(
                inner[..end]
                    .split(',')
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty()),
            );
        } else {
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            out.push(rest[..end].to_string());
        }
    }
    out
}

#[test]
fn adapt_transform_modules_import_only_the_modules_above_them() {
    let src = root().join("crates/adapt-transform/src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    // Rank: the order lib.rs states ("// Module order: a → b → …", which
    // must name every module); an item's module from the `pub use
    // module::{…}` lines.
    let order = lib
        .split("// Module order:")
        .nth(1)
        .expect("lib.rs states its module order");
    let order = order.split('.').next().unwrap().replace("//", " ");
    let mods: Vec<&str> = order.split('→').map(str::trim).collect();
    let mut declared: Vec<&str> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
        .collect();
    let mut listed = mods.clone();
    declared.sort_unstable();
    listed.sort_unstable();
    assert_eq!(
        declared, listed,
        "the stated module order names every module once"
    );
    let rank = |m: &str| mods.iter().position(|&x| x == m);
    let mut owner = std::collections::HashMap::new();
    for stmt in lib.split(';') {
        let Some(path) = stmt.trim().strip_prefix("pub use ") else {
            continue;
        };
        let (module, names) = path.split_once("::").unwrap();
        for name in names.trim_matches(|c| "{} \n".contains(c)).split(',') {
            owner.insert(name.trim().to_string(), module.to_string());
        }
    }
    let mut bad = Vec::new();
    for (i, m) in mods.iter().enumerate() {
        let mut files = Vec::new();
        let dir = src.join(m);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{m}.rs")));
        }
        for f in files {
            let code = std::fs::read_to_string(&f).unwrap();
            for name in crate_paths(&code) {
                let module = if rank(&name).is_some() {
                    Some(name.clone())
                } else {
                    owner.get(&name).cloned()
                };
                // Unknown names are the crate's vocabulary (adapt-dataset's).
                if let Some(module) = module
                    && module != *m
                    && rank(&module).is_some_and(|r| r > i)
                {
                    bad.push(format!("{} uses {name} from {module}", f.display()));
                }
            }
        }
    }
    assert!(bad.is_empty(), "imports pointing up: {bad:#?}");
}
