//! `cargo xtask gpu-check`: the prepared check for a machine with a GPU.
//! One JSON line: whether a device was found, pinned and pageable bandwidth
//! for 256 MiB, CIFAR-10 batches of 8, 128 and 2048 through the loader with
//! pin_memory on and off, and a byte-for-byte check of batches copied back.

use adapt_loader::{Loader, LoaderConfig};
use adapt_transfer::{Device, TransferEngine};
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// CIFAR-10 folder (generated there if absent).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/cifar10"))]
    path: PathBuf,
    /// Batches measured per configuration.
    #[arg(long, default_value_t = 200)]
    batches: usize,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let info = match adapt_transfer::probe() {
        Ok(i) => i,
        Err(e) => {
            println!(
                "{}",
                serde_json::json!({ "device": null, "error": e.to_string() })
            );
            return Ok(());
        }
    };
    let engine = TransferEngine::new(Device::Cuda(0))?.with_timing();
    let mib256 = 256 << 20;
    let pinned = engine.bandwidth(mib256, true, 5)?;
    let pageable = engine.bandwidth(mib256, false, 5)?;
    adapt_synth::ensure_cifar10(
        &args.path,
        adapt_synth::Cifar10Spec::default(),
        &adapt_synth::no_progress,
    )?;
    let opened = adapt_pipeline::open_dataset("cifar10", &args.path, adapt_formats::Split::Train)?;
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let mut batches = Vec::new();
    let mut all_match = true;
    for batch_size in [8usize, 128, 2048] {
        for pin in [false, true] {
            let config = LoaderConfig {
                batch_size,
                shuffle: true,
                num_workers: workers,
                prefetch_factor: Some(2),
                pin_memory: pin,
                normalize: opened.default_normalizer(),
                ..LoaderConfig::default()
            };
            let bound = config.max_in_flight() + 8;
            let mut loader = Loader::with_buffers(
                Arc::clone(&opened.dataset),
                config,
                engine.pinned_buffers(bound),
            )?;
            let mut epoch = loader.epoch(0)?;
            // A few batches copied back and compared with the host batch.
            for _ in 0..3 {
                let Some(b) = epoch.next() else { break };
                let b = b?;
                let host = b.bytes().to_vec();
                let mut one = engine.epoch(std::iter::once(Ok(b)), 1);
                if let Some(d) = one.next() {
                    let d = d?;
                    all_match &= engine.to_host(&d)? == host;
                    engine.recycle(d);
                }
            }
            let (mut bytes, mut ms, mut n, mut pinned_copies) = (0usize, 0.0f64, 0usize, 0usize);
            let start = std::time::Instant::now();
            for d in engine.epoch(epoch.by_ref().take(args.batches), 4) {
                let d = d?;
                bytes += d.byte_len();
                ms += f64::from(d.copy_ms.unwrap_or(0.0));
                n += 1;
                pinned_copies += usize::from(d.pinned);
                engine.recycle(d);
            }
            let wall = start.elapsed().as_secs_f64();
            batches.push(serde_json::json!({
                "batch_size": batch_size,
                "pin_memory": pin,
                "batches": n,
                "pinned_copies": pinned_copies,
                "copy_gb_per_s": bytes as f64 / (ms / 1000.0) / 1e9,
                "end_to_end_samples_per_s": (n * batch_size) as f64 / wall,
            }));
        }
    }
    let line = serde_json::json!({
        "device": info.name,
        "devices": info.devices,
        "bandwidth_256mib_gb_per_s": { "pinned": pinned, "pageable": pageable },
        "cifar10": batches,
        "copied_back_match": all_match,
    });
    println!("{line}");
    Ok(())
}
