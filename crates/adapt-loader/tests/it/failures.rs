//! Invariant 3: a failing sample, a panicking worker, a slow batch or a
//! dropped loader ends in an error or a clean shutdown; never a hang, never a
//! silently short epoch.

use crate::util::{Boom, Synthetic, loader};
use adapt_dataset::Dataset;
use adapt_loader::{Distributed, ErrorPolicy, Loader, LoaderConfig, LoaderError, LoaderKnobs};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn cfg(workers: usize) -> LoaderConfig {
    LoaderConfig {
        batch_size: 4,
        knobs: LoaderKnobs {
            num_workers: workers,
            ..LoaderKnobs::DEFAULT
        },
        ..LoaderConfig::default()
    }
}

#[test]
fn a_failing_sample_is_returned_at_its_batch() {
    for workers in 0..=3 {
        let mut ds = Synthetic::new(30);
        ds.fail.insert(13);
        let mut l = loader(Arc::new(ds), cfg(workers));
        let results: Vec<_> = l.epoch(0).unwrap().collect();
        assert_eq!(
            results.len(),
            4,
            "w{workers}: batches 0..2 then the error, then the end"
        );
        assert!(results[..3].iter().all(Result::is_ok));
        let err = results[3].as_ref().unwrap_err();
        assert!(
            matches!(
                err,
                LoaderError::SampleFailed {
                    batch: 3,
                    index: 13,
                    ..
                }
            ),
            "w{workers}: {err}"
        );
        assert!(
            matches!(err, LoaderError::SampleFailed { source, .. } if source.reader_error::<Boom>().is_some())
        );
        assert!(err.to_string().contains("synthetic failure at 13"));
    }
}

#[test]
fn a_sample_of_another_size_is_an_error_naming_both_sizes() {
    for workers in 0..=2 {
        let mut ds = Synthetic::new(12);
        ds.odd.insert(5);
        let mut l = loader(Arc::new(ds), cfg(workers));
        let err = l.epoch(0).unwrap().find_map(Result::err).unwrap();
        assert!(
            matches!(err, LoaderError::SampleFailed { index: 5, .. }),
            "w{workers}: {err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("comes out 3x2x3, the batch's samples 2x3x3"),
            "{text}"
        );
    }
}

#[test]
fn skip_leaves_the_sample_out_and_counts_it() {
    for workers in 0..=3 {
        let mut ds = Synthetic::new(30);
        ds.fail.extend([13, 20, 21, 22, 23]);
        let config = LoaderConfig {
            on_error: ErrorPolicy::Skip,
            ..cfg(workers)
        };
        let mut l = loader(Arc::new(ds), config);
        let mut e = l.epoch(0).unwrap();
        let batches: Vec<_> = e.by_ref().map(Result::unwrap).collect();
        // Batch 5 (20..24) is empty and not yielded; batch 3 has 3 samples.
        assert_eq!(batches.len(), 7, "w{workers}");
        assert_eq!(batches[3].indices(), [12, 14, 15]);
        assert_eq!(batches[3].skipped(), 1);
        assert_eq!(e.skipped(), 5);
        assert_eq!(batches.iter().map(|b| b.len()).sum::<usize>(), 25);
    }
}

#[test]
fn a_worker_panic_is_an_error_not_a_hang() {
    for workers in 0..=3 {
        let mut ds = Synthetic::new(30);
        ds.panic.insert(9);
        let mut l = loader(Arc::new(ds), cfg(workers));
        let results: Vec<_> = l.epoch(0).unwrap().collect();
        let err = results.last().unwrap().as_ref().unwrap_err();
        assert!(
            matches!(err, LoaderError::WorkerPanicked { batch: 2, message, .. } if message.contains("sample 9 panics")),
            "w{workers}: {err}"
        );
        // The loader stays usable: the next epoch fails at the same place again.
        assert!(l.epoch(1).unwrap().any(|r| r.is_err()));
    }
}

#[test]
fn timeout_names_the_batch_that_did_not_arrive() {
    let mut ds = Synthetic::new(20);
    ds.slow = Some((5, Duration::from_millis(600)));
    let config = LoaderConfig {
        timeout: Some(Duration::from_millis(100)),
        ..cfg(2)
    };
    let mut l = loader(Arc::new(ds), config);
    let results: Vec<_> = l.epoch(0).unwrap().collect();
    let err = results.last().unwrap().as_ref().unwrap_err();
    assert!(
        matches!(
            err,
            LoaderError::Timeout {
                batch: 1,
                epoch: 0,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("batch 1"));
}

#[test]
fn dropping_an_epoch_or_the_loader_joins_every_worker_promptly() {
    for persistent in [false, true] {
        let mut ds = Synthetic::new(400);
        ds.every_sample = Some(Duration::from_millis(5));
        let ds: Arc<dyn Dataset> = Arc::new(ds);
        let config = LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: 3,
                prefetch_factor: Some(4),
                persistent_workers: persistent,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 16,
            ..LoaderConfig::default()
        };
        let mut l = loader(Arc::clone(&ds), config);
        {
            let mut e = l.epoch(0).unwrap();
            e.next().unwrap().unwrap();
            let t = Instant::now();
            drop(e);
            // Workers stop after their current sample, not their batch.
            assert!(
                t.elapsed() < Duration::from_millis(500),
                "{:?}",
                t.elapsed()
            );
        }
        assert_eq!(l.live_workers(), if persistent { 3 } else { 0 });
        // Persistent workers discard the abandoned epoch and serve the next.
        let n = l
            .epoch(1)
            .unwrap()
            .take(3)
            .map(|b| b.unwrap().len())
            .sum::<usize>();
        assert_eq!(n, 48);
        let t = Instant::now();
        drop(l);
        assert!(t.elapsed() < Duration::from_millis(500));
        assert_eq!(
            Arc::strong_count(&ds),
            1,
            "no worker thread still holds the dataset"
        );
    }
}

#[test]
fn impossible_configurations_are_refused_at_construction() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(10));
    let bad = [
        LoaderConfig {
            batch_size: 0,
            ..LoaderConfig::default()
        },
        LoaderConfig {
            knobs: LoaderKnobs {
                prefetch_factor: Some(2),
                ..LoaderKnobs::DEFAULT
            },
            ..LoaderConfig::default()
        },
        LoaderConfig {
            knobs: LoaderKnobs {
                persistent_workers: true,
                ..LoaderKnobs::DEFAULT
            },
            ..LoaderConfig::default()
        },
        LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: 1,
                prefetch_factor: Some(0),
                ..LoaderKnobs::DEFAULT
            },
            ..LoaderConfig::default()
        },
        LoaderConfig {
            distributed: Some(Distributed {
                rank: 2,
                world_size: 2,
            }),
            ..LoaderConfig::default()
        },
        LoaderConfig {
            distributed: Some(Distributed {
                rank: 0,
                world_size: 0,
            }),
            ..LoaderConfig::default()
        },
        LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: 1,
                ..LoaderKnobs::DEFAULT
            },
            timeout: Some(Duration::ZERO),
            ..LoaderConfig::default()
        },
        LoaderConfig {
            normalize: Some(adapt_transform::Normalize::unit(1)),
            ..LoaderConfig::default()
        },
    ];
    for c in bad {
        let desc = format!("{c:?}");
        assert!(
            matches!(
                Loader::new(Arc::clone(&ds), c),
                Err(LoaderError::InvalidConfig(_))
            ),
            "{desc}"
        );
    }
    assert!(Loader::new(Arc::new(Synthetic::new(0)), LoaderConfig::default()).is_err());
}

#[test]
fn steady_state_allocates_no_new_buffer() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(100));
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: 2,
            prefetch_factor: Some(2),
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 4,
        ..LoaderConfig::default()
    };
    let mut l = loader(ds, config);
    // 4 epochs × 25 batches; buffers allocated at most the in-flight bound
    // plus the consumer's one (the count may reach it in any epoch, as
    // timing decides how far ahead the workers get).
    for e in 0..4 {
        l.epoch(e).unwrap().for_each(|b| drop(b.unwrap()));
        assert!(
            l.buffers_allocated() <= 5,
            "epoch {e}: {}",
            l.buffers_allocated()
        );
    }
}

/// Issue 14: a batch size whose buffers cannot fit in memory is refused at
/// construction, not an abort at the first allocation.
#[test]
fn a_batch_too_large_for_memory_is_refused_at_construction() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(10));
    for batch_size in [1usize << 40, usize::MAX / 2, usize::MAX] {
        let r = adapt_loader::Loader::new(
            Arc::clone(&ds),
            LoaderConfig {
                batch_size,
                ..LoaderConfig::default()
            },
        );
        assert!(
            matches!(r, Err(LoaderError::InvalidConfig(ref m)) if m.contains("batch of")),
            "batch size {batch_size}"
        );
    }
}

/// Issue 14: files changing underneath a running loader. CIFAR-10's records
/// are read at open, so truncating a batch file mid-epoch cannot crash the
/// process (it did with SIGBUS when the files were mapped); an image
/// removed mid-epoch is an error naming it, and the epoch ends cleanly.
#[test]
fn files_truncated_or_removed_mid_epoch_never_crash_or_hang() {
    let dir = tempfile::tempdir().unwrap();
    adapt_synth::cifar10(
        dir.path(),
        adapt_synth::Cifar10Spec {
            train: 500,
            test: 1,
            seed: 2,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    let ds: Arc<dyn Dataset> =
        Arc::new(adapt_formats::Cifar10::open(dir.path(), adapt_formats::Split::Train).unwrap());
    let mut l = Loader::new(
        Arc::clone(&ds),
        LoaderConfig {
            batch_size: 10,
            ..cfg(2)
        },
    )
    .unwrap();
    let mut e = l.epoch(0).unwrap();
    assert!(e.next().unwrap().is_ok());
    for i in 1..=5 {
        std::fs::File::options()
            .write(true)
            .open(dir.path().join(format!("data_batch_{i}.bin")))
            .unwrap()
            .set_len(100)
            .unwrap();
    }
    assert_eq!(e.filter(Result::is_ok).count(), 49, "the epoch completes");

    let images = tempfile::tempdir().unwrap();
    for k in 0..40 {
        let path = images.path().join("a").join(format!("{k:02}.png"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let px = vec![k as u8; 8 * 8 * 3];
        std::fs::write(
            &path,
            adapt_formats::encode_png(&path, &px, 8, 8, 3).unwrap(),
        )
        .unwrap();
    }
    let folder: Arc<dyn Dataset> =
        Arc::new(adapt_formats::ImageFolder::open(images.path()).unwrap());
    let config = LoaderConfig {
        batch_size: 4,
        transforms: Some(Arc::new(
            adapt_transform::Compose::new().then(adapt_transform::Resize::new(8, 8).unwrap()),
        )),
        ..cfg(2)
    };
    let mut l = Loader::new(folder, config).unwrap();
    let mut e = l.epoch(0).unwrap();
    assert!(e.next().unwrap().is_ok());
    std::fs::remove_file(images.path().join("a").join("37.png")).unwrap();
    let rest: Vec<_> = e.collect();
    let err = rest
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("an error, not a silently short epoch");
    assert!(err.to_string().contains("37.png"), "{err}");
    drop(rest);
    drop(l);
}

/// Issue 14: a batch buffer that cannot be allocated (memory refused) is an
/// error at its batch, for every worker count; no hang, no thread left.
#[test]
fn a_refused_allocation_is_an_error_not_a_hang() {
    use adapt_loader::{BufferProvider, HeapBuffers, HostBuffer};
    use std::sync::atomic::{AtomicUsize, Ordering};
    struct Refusing(AtomicUsize);
    impl BufferProvider for Refusing {
        fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
            if self.0.fetch_add(1, Ordering::SeqCst) >= 2 {
                return Err(LoaderError::Buffer {
                    bytes,
                    message: "refused".into(),
                });
            }
            HeapBuffers.allocate(bytes)
        }
    }
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(100));
    for workers in [0, 1, 3] {
        let config = LoaderConfig {
            knobs: LoaderKnobs {
                pin_memory: true,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 4,
            ..cfg(workers)
        };
        let provider: Arc<dyn BufferProvider> = Arc::new(Refusing(AtomicUsize::new(0)));
        let mut l = Loader::with_buffers(Arc::clone(&ds), config, Some(provider)).unwrap();
        let start = Instant::now();
        // Hold every batch: the pool must allocate, and is refused.
        let got: Vec<_> = l.epoch(0).unwrap().collect();
        assert!(start.elapsed() < Duration::from_secs(10));
        let err = got.iter().find_map(|r| r.as_ref().err()).expect("an error");
        assert!(
            matches!(err, LoaderError::Buffer { .. }),
            "w{workers}: {err}"
        );
        drop(got);
        drop(l);
    }
}
