//! `cargo xtask load`: run epochs through the loader, one JSON line each.

use crate::inspect::{DatasetArgs, hex};
use adapt_loader::{Loader, LoaderConfig};
use anyhow::Context;
use sha2::{Digest, Sha256};
use std::time::Instant;

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    source: DatasetArgs,
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    #[arg(long, default_value_t = 0)]
    num_workers: usize,
    /// Batches in flight per worker (PyTorch: 2 when unset; refused with 0 workers).
    #[arg(long)]
    prefetch_factor: Option<usize>,
    #[arg(long)]
    pin_memory: bool,
    #[arg(long)]
    persistent_workers: bool,
    /// Reshuffle every epoch from the seed.
    #[arg(long)]
    shuffle: bool,
    #[arg(long)]
    drop_last: bool,
    #[arg(long, default_value_t = 1)]
    epochs: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Packs only: read shard by shard (shuffled shard order, a shuffle
    /// buffer of this many samples) instead of random access.
    #[arg(long)]
    stream: Option<usize>,
    /// Skip the sha256 digest (it costs the consumer thread about 1 GB/s of
    /// hashing; leave it out to time the loader alone).
    #[arg(long)]
    no_digest: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let (pipeline, built) = args.source.open()?;
    let sampler = built.opened.pack_sampler(
        args.stream,
        args.seed,
        args.num_workers,
        args.prefetch_factor,
        args.batch_size,
    )?;
    let config = built.loader_config(LoaderConfig {
        sampler,
        batch_size: args.batch_size,
        shuffle: args.shuffle,
        drop_last: args.drop_last,
        seed: args.seed,
        num_workers: args.num_workers,
        prefetch_factor: args.prefetch_factor,
        pin_memory: args.pin_memory,
        persistent_workers: args.persistent_workers,
        ..LoaderConfig::default()
    });
    let mut loader = Loader::new(built.dataset(), config)?;
    eprintln!(
        "{}",
        serde_json::json!({ "pipeline": built.describe(&pipeline) })
    );
    for epoch in 0..args.epochs {
        let start = Instant::now();
        let mut digest = Sha256::new();
        let (mut samples, mut batches) = (0usize, 0usize);
        for batch in loader.epoch(epoch)? {
            let batch = batch.with_context(|| format!("epoch {epoch}"))?;
            if !args.no_digest {
                // Native byte order: little-endian on every machine we run on,
                // so an f32 batch hashes as its values' little-endian bytes.
                digest.update(batch.bytes());
                for l in batch.labels() {
                    digest.update(l.to_le_bytes());
                }
            }
            samples += batch.len();
            batches += 1;
        }
        let seconds = start.elapsed().as_secs_f64();
        let line = serde_json::json!({
            "epoch": epoch,
            "seconds": seconds,
            "samples": samples,
            "batches": batches,
            "samples_per_s": samples as f64 / seconds,
            "digest": if args.no_digest { serde_json::Value::Null } else { hex(&digest.finalize()).into() },
        });
        println!("{line}");
    }
    Ok(())
}
