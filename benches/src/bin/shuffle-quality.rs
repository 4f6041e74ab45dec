//! How far each streaming order is from a full shuffle, on data stored
//! sorted by class (as image folders, and many WebDataset and Parquet sets,
//! are): `cargo run --release -p adapt-benches --bin shuffle-quality`.
//! Orders are pure functions of (shards, seed, buffer, interleave), so the
//! figures are exact, not timed; each is the mean over 3 epochs.

use adapt_dataset::{ShardOrder, ShuffleQuality, permutation};
use std::ops::Range;

/// Samples, classes (stored in class order) and the batch size.
const SAMPLES: usize = 100_000;
const CLASSES: usize = 100;
const BATCH: usize = 256;
const EPOCHS: u64 = 3;

fn mean(orders: impl Fn(u64) -> Vec<usize>, labels: &[i64]) -> ShuffleQuality {
    let qs: Vec<ShuffleQuality> = (0..EPOCHS)
        .map(|e| ShuffleQuality::of(&orders(e), labels, BATCH))
        .collect();
    let avg = |f: fn(&ShuffleQuality) -> f64| qs.iter().map(f).sum::<f64>() / qs.len() as f64;
    ShuffleQuality {
        displacement: avg(|q| q.displacement),
        neighbour_distance: avg(|q| q.neighbour_distance),
        classes_per_batch: avg(|q| q.classes_per_batch),
    }
}

fn row(name: &str, q: ShuffleQuality, full: ShuffleQuality) {
    println!(
        "| {name} | {:.3} ({:.2}) | {:.4} ({:.3}) | {:.1} ({:.2}) |",
        q.displacement,
        q.displacement / full.displacement,
        q.neighbour_distance,
        q.neighbour_distance / full.neighbour_distance,
        q.classes_per_batch,
        q.classes_per_batch / full.classes_per_batch,
    );
}

fn main() {
    let labels: Vec<i64> = (0..SAMPLES)
        .map(|i| (i * CLASSES / SAMPLES) as i64)
        .collect();
    let full = mean(|e| permutation(SAMPLES, 0, e), &labels);
    println!(
        "{SAMPLES} samples of {CLASSES} classes stored in class order, batches of {BATCH}; \
         each figure (its ratio to the full shuffle's)\n"
    );
    println!("| Order | Displacement | Neighbour distance | Classes per batch |");
    println!("|---|---|---|---|");
    row("full shuffle (random access)", full, full);
    // Tar shards or Parquet files of 1000, Parquet row groups of 100.
    for (what, size) in [("shards of 1000", 1000), ("row groups of 100", 100)] {
        let shards: Vec<Range<usize>> = (0..SAMPLES / size)
            .map(|s| s * size..(s + 1) * size)
            .collect();
        for buffer in [1000, 2048, 8192] {
            for k in [1, 4, 16, 64] {
                let order = ShardOrder::new(shards.clone(), 0, buffer).with_interleave(k);
                let q = mean(|e| order.order(e), &labels);
                let name = format!("{what}, buffer {buffer}, interleave {k}");
                row(&name, q, full);
            }
        }
    }
}
