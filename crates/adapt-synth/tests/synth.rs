//! The generators write layouts the real readers read, deterministically.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_dataset::{Dataset, Shape};
use adapt_formats::{CelebA, CelebAOptions, Cifar10, DigiFace, DigiFaceOptions, Split};
use adapt_synth::{CelebASpec, Cifar10Spec, DigiFaceSpec, no_progress};

#[test]
fn cifar10_is_deterministic_and_read_back() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let spec = Cifar10Spec {
        train: 12,
        test: 3,
        seed: 5,
    };
    adapt_synth::cifar10(a.path(), spec, &no_progress).unwrap();
    adapt_synth::cifar10(b.path(), spec, &no_progress).unwrap();
    for name in ["data_batch_1.bin", "data_batch_5.bin", "test_batch.bin"] {
        assert_eq!(
            std::fs::read(a.path().join(name)).unwrap(),
            std::fs::read(b.path().join(name)).unwrap()
        );
    }
    let train = Cifar10::open(a.path(), Split::Train).unwrap();
    assert_eq!(
        (
            train.len(),
            Cifar10::open(a.path(), Split::Test).unwrap().len()
        ),
        (12, 3)
    );
    // Photo-like, not flat: many distinct byte values per image.
    let px = train.get(0).unwrap().pixels;
    let mut distinct = px.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert!(distinct.len() > 40, "{} distinct values", distinct.len());
    // Another seed gives other images.
    adapt_synth::cifar10(b.path(), Cifar10Spec { seed: 6, ..spec }, &no_progress).unwrap();
    assert_ne!(
        Cifar10::open(b.path(), Split::Train)
            .unwrap()
            .get(0)
            .unwrap()
            .pixels,
        px
    );
    assert!(!adapt_synth::ensure_cifar10(a.path(), spec, &no_progress).unwrap());
    assert!(
        adapt_synth::cifar10(a.path(), Cifar10Spec { train: 4, ..spec }, &no_progress).is_err()
    );
}

#[test]
fn celeba_and_digiface_layouts_are_read_by_the_real_readers() {
    let dir = tempfile::tempdir().unwrap();
    let count = std::sync::atomic::AtomicU64::new(0);
    let spec = CelebASpec {
        count: 6,
        identities: 2,
        quality: 90,
        seed: 1,
    };
    adapt_synth::celeba(&dir.path().join("celeba"), spec, &|n| {
        count.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    })
    .unwrap();
    assert_eq!(count.into_inner(), 6);
    let c = CelebA::open(&dir.path().join("celeba"), CelebAOptions::default()).unwrap();
    assert_eq!(c.len(), 6);
    assert!((0..6).all(|i| (1..=2).contains(&c.get(i).unwrap().label)));
    assert_eq!(c.get(0).unwrap().shape, Shape::new(128, 128, 3));

    let spec = DigiFaceSpec {
        classes: 3,
        per_class: 2,
        seed: 1,
    };
    adapt_synth::digiface(&dir.path().join("digi"), spec, &no_progress).unwrap();
    let d = DigiFace::open(&dir.path().join("digi"), DigiFaceOptions::default()).unwrap();
    assert_eq!(d.len(), 6);
    assert_eq!(d.get(5).unwrap().label, 2);
    let png = image::open(dir.path().join("digi/1/0.png")).unwrap();
    assert_eq!(png.color(), image::ColorType::Rgba8);
}
