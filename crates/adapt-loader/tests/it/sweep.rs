//! Invariant 1: tuning knobs never change the data.

use crate::util::{Synthetic, loader, run_epoch, sweep};
use adapt_dataset::Dataset;
use adapt_loader::{LoaderConfig, LoaderKnobs, OutputFormat};
use adapt_transform::{ColorJitter, Compose, Normalize, PaddingMode, RandomCrop, RandomFlip};
use std::sync::Arc;

fn check_sweep(base: LoaderConfig, len: usize) {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(len));
    let mut reference = loader(Arc::clone(&ds), base.clone());
    let expected: Vec<_> = (0..2).map(|e| run_epoch(&mut reference, e)).collect();
    for (label, config) in sweep(&base) {
        let mut l = loader(Arc::clone(&ds), config);
        for (e, want) in expected.iter().enumerate() {
            assert!(
                run_epoch(&mut l, e as u64) == *want,
                "{label}: epoch {e} differs from the 0-worker run"
            );
        }
        drop(l);
    }
    assert_eq!(
        Arc::strong_count(&ds),
        2,
        "only the test and the reference loader hold the dataset"
    );
}

#[test]
fn every_knob_combination_gives_the_same_bytes_sequential() {
    check_sweep(
        LoaderConfig {
            batch_size: 4,
            ..LoaderConfig::default()
        },
        37,
    );
}

#[test]
fn every_knob_combination_gives_the_same_bytes_shuffled() {
    check_sweep(
        LoaderConfig {
            batch_size: 5,
            shuffle: true,
            seed: 11,
            drop_last: true,
            ..LoaderConfig::default()
        },
        41,
    );
}

/// A random pipeline on the 2×3 synthetic images: reflect-padded crop,
/// both flips, colour jitter.
fn random_pipeline() -> Arc<Compose> {
    let mut crop = RandomCrop::new(2, 2).unwrap();
    crop.padding = [1; 4];
    crop.mode = PaddingMode::Reflect;
    Arc::new(
        Compose::new()
            .then(crop)
            .then(RandomFlip::horizontal(0.5).unwrap())
            .then(RandomFlip::vertical(0.3).unwrap())
            .then(ColorJitter::new(0.4, 0.4, 0.4).unwrap()),
    )
}

#[test]
fn every_knob_combination_gives_the_same_bytes_with_a_random_pipeline() {
    check_sweep(
        LoaderConfig {
            batch_size: 3,
            shuffle: true,
            seed: 5,
            transforms: Some(random_pipeline()),
            normalize: Some(Normalize::new(&[0.5, 0.4, 0.3], &[0.2, 0.3, 0.4]).unwrap()),
            ..LoaderConfig::default()
        },
        29,
    );
}

#[test]
fn every_knob_combination_gives_the_same_bytes_with_u8_outputs() {
    for output in [OutputFormat::U8Nchw, OutputFormat::U8Nhwc] {
        check_sweep(
            LoaderConfig {
                batch_size: 4,
                shuffle: true,
                seed: 2,
                transforms: Some(random_pipeline()),
                output,
                ..LoaderConfig::default()
            },
            23,
        );
    }
}

#[test]
fn a_random_pipeline_differs_by_epoch_and_repeats_within_one() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(30));
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: 2,
            persistent_workers: true,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 30,
        transforms: Some(random_pipeline()),
        ..LoaderConfig::default()
    };
    let mut l = loader(ds, config);
    let a = run_epoch(&mut l, 0);
    let b = run_epoch(&mut l, 1);
    assert_eq!(a.0[0].2, b.0[0].2, "same order (no shuffle)");
    assert_ne!(a.0[0].0, b.0[0].0, "new draws each epoch");
    assert_eq!(run_epoch(&mut l, 0), a, "epoch 0 again draws the same");
}

#[test]
fn u8_batches_hold_the_f32_batches_pixels_in_their_layouts() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(10));
    let base = LoaderConfig {
        batch_size: 10,
        transforms: Some(random_pipeline()),
        ..LoaderConfig::default()
    };
    let first = |output| {
        let mut l = loader(
            Arc::clone(&ds),
            LoaderConfig {
                output,
                ..base.clone()
            },
        );
        let b = l.epoch(4).unwrap().next().unwrap().unwrap();
        (b.shape(), b.bytes().to_vec(), b.f32s().map(<[f32]>::to_vec))
    };
    let (shape_f, _, f32s) = first(OutputFormat::F32Nchw);
    let (shape_c, chw, none) = first(OutputFormat::U8Nchw);
    let (shape_h, hwc, _) = first(OutputFormat::U8Nhwc);
    assert!(none.is_none(), "a u8 batch has no f32 view");
    assert_eq!(shape_f, [10, 3, 2, 2]);
    assert_eq!(shape_c, shape_f);
    assert_eq!(shape_h, [10, 2, 2, 3]);
    let f32s = f32s.unwrap();
    // f32 output without a normaliser is ToTensor(): the u8 value / 255.
    for (f, &u) in f32s.iter().zip(&chw) {
        assert_eq!(*f, f32::from(u) * (1.0 / 255.0));
    }
    // NHWC is NCHW transposed per sample.
    for s in 0..10 {
        for c in 0..3 {
            for p in 0..4 {
                assert_eq!(hwc[s * 12 + p * 3 + c], chw[s * 12 + c * 4 + p]);
            }
        }
    }
    let refused = adapt_loader::Loader::new(
        Arc::clone(&ds),
        LoaderConfig {
            output: OutputFormat::U8Nchw,
            normalize: Some(Normalize::unit(3)),
            ..base
        },
    );
    assert!(refused.is_err(), "u8 output is never normalised");
}

#[test]
fn shuffle_changes_every_epoch_with_persistent_workers() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(40));
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: 2,
            persistent_workers: true,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 8,
        shuffle: true,
        ..LoaderConfig::default()
    };
    let mut l = loader(ds, config);
    let a = run_epoch(&mut l, 0);
    let b = run_epoch(&mut l, 1);
    assert_ne!(a, b);
    assert_eq!(
        run_epoch(&mut l, 0),
        a,
        "epoch 0 again gives epoch 0's order"
    );
}
