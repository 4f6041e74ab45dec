//! The loader over a real on-disk layout (synthetic CIFAR-10 and CelebA).

use adapt_dataset::Dataset;
use adapt_formats::{CelebA, CelebAOptions, Cifar10, Split};
use adapt_loader::{Loader, LoaderConfig, LoaderKnobs};
use adapt_transform::Normalize;
use std::sync::Arc;

#[test]
fn cifar10_batches_are_normalised_chw_of_the_records() {
    let dir = tempfile::tempdir().unwrap();
    let spec = adapt_synth::Cifar10Spec {
        train: 40,
        test: 5,
        seed: 2,
    };
    adapt_synth::cifar10(dir.path(), spec, &adapt_synth::no_progress).unwrap();
    let ds = Arc::new(Cifar10::open(dir.path(), Split::Train).unwrap());
    let norm = Normalize::new(&[0.5; 3], &[0.25; 3]).unwrap();
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: 2,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 16,
        shuffle: true,
        normalize: Some(norm),
        ..LoaderConfig::default()
    };
    let mut l = Loader::new(Arc::clone(&ds) as Arc<dyn Dataset>, config).unwrap();
    let batches: Vec<_> = l.epoch(0).unwrap().map(Result::unwrap).collect();
    assert_eq!(
        batches.iter().map(|b| b.shape()[0]).collect::<Vec<_>>(),
        [16, 16, 8]
    );
    let b = &batches[1];
    assert_eq!(b.shape(), [16, 3, 32, 32]);
    let (label, planar) = ds.record(b.indices()[3]).unwrap();
    assert_eq!(b.labels()[3], i64::from(label));
    let sample = &b.f32s().unwrap()[3 * 3072..4 * 3072];
    for k in [0, 1500, 3071] {
        let want = (f32::from(planar[k]) / 255.0 - 0.5) / 0.25;
        assert!(
            (sample[k] - want).abs() < 1e-5,
            "{k}: {} vs {want}",
            sample[k]
        );
    }
}

#[test]
fn celeba_through_workers_matches_inline() {
    let dir = tempfile::tempdir().unwrap();
    let spec = adapt_synth::CelebASpec {
        count: 12,
        identities: 3,
        quality: 90,
        seed: 4,
    };
    adapt_synth::celeba(dir.path(), spec, &adapt_synth::no_progress).unwrap();
    let ds: Arc<dyn Dataset> =
        Arc::new(CelebA::open(dir.path(), CelebAOptions::default()).unwrap());
    let run = |workers| {
        let config = LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: workers,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 5,
            shuffle: true,
            ..LoaderConfig::default()
        };
        let mut l = Loader::new(Arc::clone(&ds), config).unwrap();
        l.epoch(3)
            .unwrap()
            .map(|b| b.unwrap().bytes().to_vec())
            .collect::<Vec<_>>()
    };
    let inline = run(0);
    assert_eq!(inline[0].len(), 5 * 3 * 128 * 128 * 4, "f32 bytes");
    assert_eq!(run(2), inline);
}
