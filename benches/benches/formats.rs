//! Single-thread reader throughput, each beside its bare baseline.

#![allow(missing_docs)] // criterion_group! generates undocumented functions.

use adapt_benches::{celeba, cifar10, digiface};
use adapt_dataset::{Dataset, Sample};
use adapt_formats::{CelebA, CelebAOptions, Cifar10, DigiFace, DigiFaceOptions, Split};
use adapt_transform::Normalize;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

const MEAN: [f32; 3] = [0.4914, 0.4822, 0.4465];
const STD: [f32; 3] = [0.2470, 0.2435, 0.2616];

fn cifar(c: &mut Criterion) {
    let ds = Cifar10::open(&cifar10(), Split::Train).expect("bench data");
    let norm = Normalize::new(&MEAN, &STD).expect("constants");
    let n = 10_000;
    let mut g = c.benchmark_group("formats/cifar10");
    g.throughput(Throughput::Elements(n as u64));
    let mut out = vec![0.0f32; 3072];
    // The bare loop: u8 → f32 normalise straight from the mapped records.
    let scale: Vec<f32> = STD.iter().map(|s| 1.0 / (255.0 * s)).collect();
    let bias: Vec<f32> = MEAN.iter().zip(STD).map(|(m, s)| -m / s).collect();
    g.bench_function("bare_normalise", |b| {
        b.iter(|| {
            for i in 0..n {
                let (_, px) = ds.record(i).expect("in range");
                for (ch, (dst, src)) in out
                    .chunks_exact_mut(1024)
                    .zip(px.chunks_exact(1024))
                    .enumerate()
                {
                    let (a, c) = (scale[ch], bias[ch]);
                    for (d, &s) in dst.iter_mut().zip(src) {
                        *d = f32::from(s) * a + c;
                    }
                }
                black_box(&out);
            }
        })
    });
    let mut sample = Sample::default();
    g.bench_function("get_normalise", |b| {
        b.iter(|| {
            for i in 0..n {
                adapt_dataset::read_into(&ds, i, &mut sample).expect("in range");
                norm.write_chw(sample.view(), &mut out).expect("shape");
                black_box(&out);
            }
        })
    });
    // What the loader does: normalise straight from the mapped record.
    g.bench_function("view_normalise", |b| {
        b.iter(|| {
            for i in 0..n {
                let view = ds.read(i, &mut sample).expect("in range").view(&sample);
                norm.write_chw(view, &mut out).expect("shape");
                black_box(&out);
            }
        })
    });
    g.finish();
}

/// `bare_decode` is `image::open` (read + decode) of the same files;
/// `get` adds the format's fixed step; `get_normalise` the f32 collate.
fn images(c: &mut Criterion, name: &str, ds: &dyn Dataset, paths: Vec<String>) {
    let mut g = c.benchmark_group(format!("formats/{name}"));
    g.throughput(Throughput::Elements(paths.len() as u64));
    g.bench_function("bare_decode", |b| {
        b.iter(|| {
            for p in &paths {
                black_box(image::open(p).expect("decodes"));
            }
        })
    });
    let mut sample = Sample::default();
    g.bench_function("get", |b| {
        b.iter(|| {
            for i in 0..paths.len() {
                adapt_dataset::read_into(ds, i, &mut sample).expect("reads");
                black_box(&sample);
            }
        })
    });
    let norm = Normalize::new(&[0.5; 3], &[0.5; 3]).expect("constants");
    let mut out = Vec::new();
    g.bench_function("get_normalise", |b| {
        b.iter(|| {
            for i in 0..paths.len() {
                adapt_dataset::read_into(ds, i, &mut sample).expect("reads");
                out.resize(sample.pixels.len(), 0.0);
                norm.write_chw(sample.view(), &mut out).expect("shape");
                black_box(&out);
            }
        })
    });
    let files: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).expect("reads"))
        .collect();
    g.bench_function("decode_in_memory", |b| {
        b.iter(|| {
            for (p, bytes) in paths.iter().zip(&files) {
                adapt_formats::decode_rgb_into(p.as_ref(), bytes, &mut sample).expect("decodes");
                black_box(&sample);
            }
        })
    });
    // What ADAPT_STRICT_DECODE adds to each decode (a JPEG's scans read).
    g.bench_function("check_whole", |b| {
        b.iter(|| {
            for (p, bytes) in paths.iter().zip(&files) {
                adapt_formats::check_whole(p.as_ref(), bytes).expect("whole");
            }
        })
    });
    g.finish();
}

fn faces(c: &mut Criterion) {
    let n = 200;
    let ds = CelebA::open(&celeba(20_000), CelebAOptions::default()).expect("bench data");
    let paths = (0..n).map(|i| ds.source(i)).collect();
    images(c, "celeba", &ds, paths);
    let ds = DigiFace::open(&digiface(200), DigiFaceOptions::default()).expect("bench data");
    let paths = (0..n).map(|i| ds.source(i)).collect();
    images(c, "digiface", &ds, paths);
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(4));
    targets = cifar, faces
}
criterion_main!(benches);
