//! Epoch time through the loader: full CIFAR-10 train at batch 8, 128 and
//! 2048 and the CelebA-like set (20,000 JPEGs) at 128, for 0, 1 and 2
//! workers with prefetch 2.

#![allow(missing_docs)] // criterion_group! generates undocumented functions.

use adapt_benches::{celeba, cifar10};
use adapt_dataset::{Dataset, Normalize};
use adapt_formats::{CelebA, CelebAOptions, Cifar10, Split};
use adapt_loader::{Loader, LoaderConfig};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

fn epoch(ds: &Arc<dyn Dataset>, batch_size: usize, workers: usize, normalize: &Normalize) -> usize {
    let config = LoaderConfig {
        batch_size,
        shuffle: true,
        num_workers: workers,
        prefetch_factor: (workers > 0).then_some(2),
        normalize: Some(normalize.clone()),
        ..LoaderConfig::default()
    };
    // A fresh loader per epoch: worker start-up is part of the epoch, as in PyTorch.
    let mut loader = Loader::new(Arc::clone(ds), config).expect("valid config");
    let mut n = 0;
    for b in loader.epoch(0).expect("starts") {
        n += black_box(b.expect("batch")).len();
    }
    n
}

fn cifar(c: &mut Criterion) {
    let ds: Arc<dyn Dataset> =
        Arc::new(Cifar10::open(&cifar10(), Split::Train).expect("bench data"));
    let norm =
        Normalize::new(&[0.4914, 0.4822, 0.4465], &[0.2470, 0.2435, 0.2616]).expect("constants");
    let mut g = c.benchmark_group("loader/cifar10");
    g.throughput(Throughput::Elements(ds.len() as u64));
    for bs in [8, 128, 2048] {
        for w in [0, 1, 2] {
            g.bench_with_input(
                BenchmarkId::new(format!("b{bs}"), format!("w{w}_p2")),
                &(bs, w),
                |b, &(bs, w)| b.iter(|| epoch(&ds, bs, w, &norm)),
            );
        }
    }
    g.finish();
}

fn faces(c: &mut Criterion) {
    let ds: Arc<dyn Dataset> =
        Arc::new(CelebA::open(&celeba(20_000), CelebAOptions::default()).expect("bench data"));
    let norm = Normalize::new(&[0.5; 3], &[0.5; 3]).expect("constants");
    let mut g = c.benchmark_group("loader/celeba");
    g.throughput(Throughput::Elements(ds.len() as u64));
    g.sample_size(10).measurement_time(Duration::from_secs(30));
    for w in [0, 1, 2] {
        g.bench_with_input(BenchmarkId::new("b128", format!("w{w}_p2")), &w, |b, &w| {
            b.iter(|| epoch(&ds, 128, w, &norm))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = cifar, faces
}
criterion_main!(benches);
