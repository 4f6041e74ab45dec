//! Epoch time through the loader: full CIFAR-10 train at batch 8, 128 and
//! 2048 and the CelebA-like set (20,000 JPEGs) at 128, for 0, 1 and 2
//! workers with prefetch 2.

#![allow(missing_docs)] // criterion_group! generates undocumented functions.

use adapt_benches::{celeba, cifar10};
use adapt_dataset::Dataset;
use adapt_formats::{CelebA, CelebAOptions, Cifar10, Split};
use adapt_loader::{Loader, LoaderConfig, LoaderKnobs};
use adapt_transform::Normalize;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

fn epoch(ds: &Arc<dyn Dataset>, batch_size: usize, workers: usize, normalize: &Normalize) -> usize {
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: workers,
            prefetch_factor: (workers > 0).then_some(2),
            ..LoaderKnobs::DEFAULT
        },
        batch_size,
        shuffle: true,
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

/// A name, the data, and the pack behind it (for streaming).
type Source = (
    &'static str,
    Arc<dyn Dataset>,
    Option<Arc<adapt_pack::PackDataset>>,
);

/// The same loader configuration over the CelebA-like set as loose JPEGs,
/// as an `encoded` pack and as a `raw` pack (random access, and streaming).
fn packs(c: &mut Criterion) {
    use adapt_pack::{PackDataset, PackOptions, Payload, ShardStream, SourceInfo, write_pack};
    let loose = celeba(20_000);
    let ds: Arc<dyn Dataset> =
        Arc::new(CelebA::open(&loose, CelebAOptions::default()).expect("bench data"));
    let mut sources: Vec<Source> = vec![("loose", Arc::clone(&ds), None)];
    for (name, store) in [
        ("encoded_pack", Payload::Encoded),
        ("raw_pack", Payload::Raw),
    ] {
        let dir = adapt_benches::data_dir(&format!("celeba-20000-{name}"));
        let source = SourceInfo {
            dataset: "celeba".into(),
            path: loose.display().to_string(),
            class_names: None,
        };
        write_pack(
            &*ds,
            &source,
            &dir,
            &PackOptions {
                store,
                ..PackOptions::default()
            },
            &|_| {},
        )
        .expect("packs");
        let pack = Arc::new(PackDataset::open(&dir).expect("opens"));
        sources.push((name, Arc::clone(&pack) as Arc<dyn Dataset>, Some(pack)));
    }
    let norm = Normalize::new(&[0.5; 3], &[0.5; 3]).expect("constants");
    let mut g = c.benchmark_group("loader/celeba_source");
    g.throughput(Throughput::Elements(ds.len() as u64));
    g.sample_size(10).measurement_time(Duration::from_secs(20));
    for (name, data, pack) in &sources {
        let modes: &[Option<usize>] = if pack.is_some() {
            &[None, Some(1024)]
        } else {
            &[None]
        };
        for &stream in modes {
            let id = format!("{name}{}", if stream.is_some() { "_stream" } else { "" });
            g.bench_function(BenchmarkId::new("b128_w2_p2", id), |b| {
                b.iter(|| {
                    let sampler: Option<Arc<dyn adapt_loader::Sampler>> = match (stream, pack) {
                        (Some(buffer), Some(p)) => {
                            p.set_cache_frames(p.frames_for(buffer + 5 * 128));
                            Some(Arc::new(ShardStream::new(p, 0, buffer)))
                        }
                        (_, Some(p)) => {
                            p.set_cache_frames(p.frames_for(4));
                            None
                        }
                        _ => None,
                    };
                    let config = LoaderConfig {
                        knobs: LoaderKnobs {
                            num_workers: 2,
                            prefetch_factor: Some(2),
                            ..LoaderKnobs::DEFAULT
                        },
                        batch_size: 128,
                        shuffle: true,
                        sampler,
                        normalize: Some(norm.clone()),
                        ..LoaderConfig::default()
                    };
                    let mut loader = Loader::new(Arc::clone(data), config).expect("valid config");
                    loader
                        .epoch(0)
                        .expect("starts")
                        .map(|b| black_box(b.expect("batch")).len())
                        .sum::<usize>()
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    targets = cifar, faces, packs
}
criterion_main!(benches);
