//! Shared set-up of the criterion benchmarks: synthetic datasets in the real
//! layouts under `target/bench-data/`, generated once and reused.
//!
//! Not a library for anything else. Benchmarks live in `benches/`, one file
//! per area (`formats`, `loader`, `search`), ids `area/subject/param`, each
//! baseline in the same group as what it is compared with, so ratios come
//! from one run.

use adapt_dataset::Dataset;
use adapt_formats::{CelebA, CelebAOptions, DigiFace, DigiFaceOptions};
use std::path::PathBuf;

/// `target/bench-data/<name>`.
pub fn data_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/bench-data")
        .join(name)
}

/// Full-size synthetic CIFAR-10 (50,000 + 10,000).
pub fn cifar10() -> PathBuf {
    let dir = data_dir("cifar10");
    adapt_synth::ensure_cifar10(
        &dir,
        adapt_synth::Cifar10Spec::default(),
        &adapt_synth::no_progress,
    )
    .unwrap_or_else(|e| panic!("generating {}: {e}", dir.display()));
    dir
}

/// A CelebA-like set of `count` JPEGs.
pub fn celeba(count: usize) -> PathBuf {
    let dir = data_dir(&format!("celeba-{count}"));
    let ok = CelebA::open(&dir, CelebAOptions::default()).is_ok_and(|d| d.len() == count);
    if !ok {
        // `gen`'s sizing rule (one identity per 20 images), from the front.
        let request = adapt::generate::Request {
            count: Some(count),
            ..adapt::generate::Request::new(&adapt::CelebAFormat, 0)
        };
        adapt::generate(&request, &dir, &|_| {})
            .unwrap_or_else(|e| panic!("generating {}: {e}", dir.display()));
    }
    dir
}

/// A DigiFace-like set of `classes` × 50 PNGs.
pub fn digiface(classes: usize) -> PathBuf {
    let dir = data_dir(&format!("digiface-{classes}"));
    let ok =
        DigiFace::open(&dir, DigiFaceOptions::default()).is_ok_and(|d| d.len() == classes * 50);
    if !ok {
        let spec = adapt_synth::DigiFaceSpec {
            classes,
            per_class: 50,
            seed: 0,
        };
        adapt_synth::digiface(&dir, spec, &adapt_synth::no_progress)
            .unwrap_or_else(|e| panic!("generating {}: {e}", dir.display()));
    }
    dir
}
