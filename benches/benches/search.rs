//! Overhead of the search itself on the paper's space (1,584
//! configurations), with an objective that costs nothing: what the search
//! adds to a tuning run besides its trials.

#![allow(missing_docs)] // criterion_group! generates undocumented functions.

use adapt_search::{
    AvlOptions, Config, NoisePolicy, Objective, Param, Space, TrialError, avl_search, grid_search,
};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;

struct Bowl;
impl Objective for Bowl {
    fn measure(&mut self, c: &Config) -> Result<f64, TrialError> {
        let w = (c.int(0) as f64 / 12.0).ln().abs();
        let p = (c.int(1) as f64 / 8.0).log2().abs();
        Ok(10.0
            + w
            + 0.5 * p
            + f64::from(u8::from(!c.bool(2))) * 0.3
            + f64::from(u8::from(!c.bool(3))) * 0.2)
    }
}

fn paper_space() -> Space {
    let workers =
        Param::ints("num_workers", std::iter::once(1).chain((2..=64).step_by(2))).expect("domain");
    Space::new(vec![
        workers,
        Param::powers_of_two("prefetch_factor", 1, 2048).expect("domain"),
        Param::boolean("pin_memory"),
        Param::boolean("persistent_workers"),
    ])
    .expect("space")
    .with_priority(&[
        "persistent_workers",
        "pin_memory",
        "prefetch_factor",
        "num_workers",
    ])
    .expect("priority")
}

fn search(c: &mut Criterion) {
    let space = paper_space();
    let mut g = c.benchmark_group("search/paper_space");
    g.bench_function("avl_plain", |b| {
        b.iter(|| black_box(avl_search(&space, &mut Bowl, &AvlOptions::plain())))
    });
    let refined = AvlOptions {
        refine: true,
        noise: NoisePolicy {
            threshold: 0.05,
            max_repeats: 5,
            candidates: 3,
        },
        prune: true,
    };
    g.bench_function("avl_refined_noise", |b| {
        b.iter(|| black_box(avl_search(&space, &mut Bowl, &refined)))
    });
    g.bench_function("grid", |b| {
        b.iter(|| black_box(grid_search(&space, &mut Bowl)))
    });
    g.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
