//! The transfer engine on the host backend (CI has no GPU), and the probe.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_dataset::Dataset;
use adapt_formats::{Cifar10, Split};
use adapt_loader::{Loader, LoaderConfig, LoaderKnobs};
use adapt_transfer::{Device, TransferEngine, TransferError, driver_present, probe};
use std::sync::Arc;

fn cifar() -> (tempfile::TempDir, Arc<dyn Dataset>) {
    let dir = tempfile::tempdir().unwrap();
    adapt_synth::cifar10(
        dir.path(),
        adapt_synth::Cifar10Spec {
            train: 200,
            test: 1,
            seed: 5,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    let ds = Arc::new(Cifar10::open(dir.path(), Split::Train).unwrap());
    (dir, ds)
}

fn config(workers: usize, pin: bool) -> LoaderConfig {
    LoaderConfig {
        batch_size: 16,
        shuffle: true,
        knobs: LoaderKnobs {
            num_workers: workers,
            prefetch_factor: (workers > 0).then_some(2),
            pin_memory: pin,
            ..LoaderKnobs::DEFAULT
        },
        ..LoaderConfig::default()
    }
}

#[test]
fn a_cuda_device_without_a_driver_is_an_error_not_a_panic() {
    let r = TransferEngine::new(Device::Cuda(0));
    if driver_present() {
        // A GPU machine: either it works or the error names the device.
        assert!(r.is_ok() || matches!(r, Err(TransferError::NoDevice { .. })));
    } else {
        assert!(matches!(r, Err(TransferError::NoDriver)));
        assert!(matches!(probe(), Err(TransferError::NoDriver)));
        assert!(r.err().unwrap().to_string().contains("host"));
    }
    assert!(TransferEngine::new(Device::Cuda(1_000)).is_err());
}

#[test]
fn device_names_parse() {
    assert_eq!("host".parse::<Device>().unwrap(), Device::Host);
    assert_eq!("cuda".parse::<Device>().unwrap(), Device::Cuda(0));
    assert_eq!("cuda:3".parse::<Device>().unwrap(), Device::Cuda(3));
    assert!("tpu".parse::<Device>().is_err());
}

#[test]
fn pin_memory_on_the_host_backend_gives_the_same_bytes() {
    let (_dir, ds) = cifar();
    let engine = TransferEngine::new(Device::Host).unwrap();
    assert!(
        engine.pinned_buffers(8).is_none(),
        "no pinned memory without CUDA"
    );
    let run = |pin: bool| {
        let mut l = Loader::with_buffers(Arc::clone(&ds), config(2, pin), engine.pinned_buffers(8))
            .unwrap();
        let e = l.epoch(1).unwrap();
        engine
            .epoch(e, 2)
            .map(|b| engine.to_host(&b.unwrap()).unwrap())
            .collect::<Vec<_>>()
    };
    let (off, on) = (run(false), run(true));
    assert_eq!(off.len(), 13);
    assert_eq!(off, on);
}

#[test]
fn the_copied_buffer_is_the_one_the_worker_wrote() {
    let (_dir, ds) = cifar();
    let engine = TransferEngine::new(Device::Host).unwrap();
    let mut l = Loader::new(ds, config(2, false)).unwrap();
    for batch in l.epoch(0).unwrap() {
        let batch = batch.unwrap();
        let written = batch.host_buffer().as_bytes().as_ptr();
        let mut one = engine.epoch(std::iter::once(Ok(batch)), 1);
        let d = one.next().unwrap().unwrap();
        assert_eq!(d.source, written, "no intermediate host copy");
        assert_eq!(d.host_data().unwrap().as_ptr(), written);
        assert!(one.next().is_none());
    }
}

#[test]
fn copies_in_flight_are_bounded_and_buffers_recycled() {
    let (_dir, ds) = cifar();
    let engine = TransferEngine::new(Device::Host).unwrap();
    let depth = 3;
    let mut l = Loader::new(ds, config(2, true)).unwrap();
    let bound = l.config().max_in_flight();
    let mut allocated = Vec::new();
    for e in 0..3 {
        let mut epoch = l.epoch(e).unwrap();
        {
            let mut dev = engine.epoch(epoch.by_ref(), depth);
            let mut n = 0;
            while let Some(b) = dev.next() {
                // Back-pressure: the consumer holds one, the engine at most
                // `depth - 1` more, the loader at most its bound.
                assert!(dev.in_flight() < depth);
                engine.recycle(b.unwrap());
                n += 1;
            }
            assert_eq!(n, 13);
        }
        assert!(epoch.max_in_flight() <= bound);
        drop(epoch);
        allocated.push(l.buffers_allocated());
    }
    // 39 batches, and never more buffers than the loader bound + the
    // engine's queue + the consumer's batch: recycled, not allocated.
    assert!(
        allocated.iter().all(|&a| a <= bound + depth + 1),
        "{allocated:?}"
    );
}

#[test]
fn a_loader_error_ends_the_device_epoch_after_the_copied_batches() {
    let (_dir, ds) = cifar();
    struct FailAt(Arc<dyn Dataset>);
    impl Dataset for FailAt {
        fn len(&self) -> usize {
            self.0.len()
        }
        fn read<'a>(
            &'a self,
            i: usize,
            buf: &mut adapt_dataset::Sample,
        ) -> Result<adapt_dataset::Read<'a>, adapt_dataset::Error> {
            if i == 40 {
                return Err(adapt_dataset::Error::InvalidParameter("bad sample".into()));
            }
            self.0.read(i, buf)
        }
        fn sample_shape(&self) -> Option<adapt_dataset::Shape> {
            self.0.sample_shape()
        }
    }
    let engine = TransferEngine::new(Device::Host).unwrap();
    let cfg = LoaderConfig {
        shuffle: false,
        ..config(1, false)
    };
    let mut l = Loader::new(Arc::new(FailAt(ds)), cfg).unwrap();
    let results: Vec<_> = engine.epoch(l.epoch(0).unwrap(), 2).collect();
    assert_eq!(
        results.len(),
        3,
        "batches 0 and 1, then the error of batch 2"
    );
    assert!(matches!(results[2], Err(TransferError::Loader(_))));
}

/// Issue 16: pinned buffers used to be counted when allocated and never
/// when freed, so after a few epochs every new buffer fell back to
/// pageable memory. The pool now keeps and reuses them: over ten epochs, at
/// every copy depth and loader bound, every batch is pinned and the
/// allocator is called at most `max` times.
#[test]
fn pinned_share_stays_full_over_ten_epochs_at_every_depth() {
    use adapt_transfer::{CountingAllocator, PinnedPool};
    use std::collections::VecDeque;
    use std::sync::atomic::Ordering;
    let (_dir, ds) = cifar();
    for depth in [1, 2, 4, 8] {
        for (workers, prefetch) in [(0, None), (1, Some(1)), (2, Some(2)), (2, Some(8))] {
            let alloc = Arc::new(CountingAllocator::default());
            let cfg = LoaderConfig {
                knobs: LoaderKnobs {
                    num_workers: workers,
                    prefetch_factor: prefetch,
                    persistent_workers: workers > 0,
                    pin_memory: true,
                },
                batch_size: 16,
                shuffle: true,
                ..LoaderConfig::default()
            };
            // The loader's bound, the copies in flight, the batch the
            // consumer holds and the one it just let go.
            let max = cfg.max_in_flight() + depth + 2;
            let pool = PinnedPool::new(Arc::clone(&alloc) as _, max);
            let engine = TransferEngine::new(Device::Host).unwrap();
            let mut l = Loader::with_buffers(Arc::clone(&ds), cfg, Some(pool.provider())).unwrap();
            for e in 0..10 {
                let mut held = VecDeque::new();
                for b in engine.epoch(l.epoch(e).unwrap(), depth) {
                    let b = b.unwrap();
                    assert!(
                        b.pinned,
                        "depth {depth}, w{workers}: epoch {e} copied a pageable batch"
                    );
                    held.push_back(b);
                    if held.len() > 1 {
                        held.pop_front();
                    }
                }
            }
            let s = pool.stats();
            assert_eq!(s.pageable_handed, 0, "depth {depth}, w{workers}: {s:?}");
            assert!(
                s.allocations <= max,
                "depth {depth}, w{workers}: {s:?} > {max}"
            );
            assert_eq!(s.live, s.allocations);
            // A second loader (a new tuning trial) reuses the same buffers.
            drop(l);
            let mut again = Loader::with_buffers(
                Arc::clone(&ds),
                LoaderConfig {
                    knobs: LoaderKnobs {
                        pin_memory: true,
                        ..LoaderKnobs::DEFAULT
                    },
                    ..config(0, true)
                },
                Some(pool.provider()),
            )
            .unwrap();
            for b in engine.epoch(again.epoch(0).unwrap(), depth) {
                assert!(b.unwrap().pinned);
            }
            assert_eq!(
                pool.stats().allocations,
                s.allocations,
                "no new page-locked allocation"
            );
            drop(again);
            drop(pool);
            assert_eq!(
                alloc.alive.load(Ordering::SeqCst),
                0,
                "every buffer freed with its pool"
            );
        }
    }
}

/// Past its bound the pool answers with heap memory instead of blocking,
/// and says so in its counters.
#[test]
fn a_full_pool_hands_out_pageable_memory_and_counts_it() {
    use adapt_transfer::{CountingAllocator, PinnedPool};
    let (_dir, ds) = cifar();
    let pool = PinnedPool::new(Arc::new(CountingAllocator::default()), 1);
    let mut l =
        Loader::with_buffers(Arc::clone(&ds), config(2, true), Some(pool.provider())).unwrap();
    let held: Vec<_> = l.epoch(0).unwrap().map(Result::unwrap).collect();
    let pinned = held.iter().filter(|b| b.host_buffer().is_pinned()).count();
    assert_eq!(pinned, 1);
    let s = pool.stats();
    assert_eq!((s.allocations, s.pinned_handed), (1, 1));
    assert!(s.pageable_handed >= held.len() - 1);
}

/// A short last batch leaves the end of its buffer unwritten: those bytes
/// are zeros (or an older batch's), never uninitialised memory.
#[test]
fn the_tail_of_a_short_batch_is_initialised() {
    use adapt_transfer::{CountingAllocator, PinnedPool};
    let (_dir, ds) = cifar();
    let pool = PinnedPool::new(Arc::new(CountingAllocator::default()), 64);
    let cfg = LoaderConfig {
        knobs: LoaderKnobs {
            pin_memory: true,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 64,
        ..LoaderConfig::default()
    };
    let mut l = Loader::with_buffers(Arc::clone(&ds), cfg, Some(pool.provider())).unwrap();
    let batches: Vec<_> = l.epoch(0).unwrap().map(Result::unwrap).collect();
    let last = batches.last().unwrap();
    assert_eq!(last.len(), 200 % 64);
    let all = last.host_buffer().as_bytes();
    assert!(all.len() > last.bytes().len());
    assert!(
        all[last.bytes().len()..].iter().all(|&b| b == 0),
        "fresh tail is zeroed"
    );
}
