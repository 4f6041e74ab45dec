//! `cargo xtask gpu-check`: the one prepared script a lent GPU runs (minutes,
//! not hours). One JSON line; the exit status is non-zero when a check
//! fails. It measures H2D bandwidth pinned and pageable (256 MiB and one
//! buffer per batch size), then CIFAR-10 batches of 8, 128 and 2048 through
//! the loader and the engine with pin_memory off and on, alternating the
//! order per round with the clock started before the first batch is asked
//! for, over at least 6 epochs each: samples/s, the share of copies that
//! were really page-locked per epoch, device allocations per epoch, the
//! consumer's CPU time while it waited; and one epoch per setting at full
//! copy depth in which every device batch is copied back and compared
//! byte for byte with a host copy taken before it was submitted.
//!
//! Checks (exit 1 when one fails): every batch identical after the copy;
//! every pin_memory copy page-locked in every epoch; no device allocation
//! after the first epoch. Targets (reported, not checks): pinned H2D of
//! 2048-batches ≥ 90% of the 256 MiB pinned figure; pinned ≥ 1.5× pageable.

use adapt::engines::loader::{Batch, LoaderError};
use adapt::{COPY_DEPTH, Device, LoaderKnobs, Pipeline, Run, RunOptions, TransferEngine};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// CIFAR-10 folder (generated there if absent).
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/cifar10"))]
    path: PathBuf,
    /// Batches per timed epoch (at most the epoch's).
    #[arg(long, default_value_t = 200)]
    batches: usize,
    /// Timed epochs per setting (at least 6).
    #[arg(long, default_value_t = 6)]
    epochs: u64,
}

/// This thread's time on a CPU so far, in seconds (`schedstat`, ns).
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(f64::NAN, |ns| ns as f64 / 1e9)
}

struct Timed {
    seconds: f64,
    samples: usize,
    copies: usize,
    pinned: usize,
    device_allocations: usize,
    consumer_cpu_seconds: f64,
}

/// One timed epoch: clock and CPU counters start before the epoch is
/// asked for its first batch.
fn timed_epoch(
    engine: &TransferEngine,
    run: &mut Run,
    epoch: u64,
    limit: usize,
) -> anyhow::Result<Timed> {
    let allocs = engine.device_allocations();
    let (start, cpu) = (Instant::now(), thread_cpu_seconds());
    let (mut samples, mut copies, mut pinned) = (0, 0, 0);
    run.start(epoch)?;
    for d in engine.epoch(run.batches().take(limit), COPY_DEPTH) {
        let d = d?;
        samples += d.shape[0];
        copies += 1;
        pinned += usize::from(d.pinned);
    }
    Ok(Timed {
        seconds: start.elapsed().as_secs_f64(),
        samples,
        copies,
        pinned,
        device_allocations: engine.device_allocations() - allocs,
        consumer_cpu_seconds: thread_cpu_seconds() - cpu,
    })
}

/// One epoch at full depth, every device batch copied back and compared
/// with the host bytes taken before it was submitted; returns (batches,
/// mismatches).
fn verified_epoch(
    engine: &TransferEngine,
    run: &mut Run,
    epoch: u64,
    limit: usize,
) -> anyhow::Result<(usize, usize)> {
    let sent: RefCell<VecDeque<Vec<u8>>> = RefCell::new(VecDeque::new());
    run.start(epoch)?;
    let batches = run
        .batches()
        .take(limit)
        .inspect(|r: &Result<Batch, LoaderError>| {
            if let Ok(b) = r {
                sent.borrow_mut().push_back(b.bytes().to_vec());
            }
        });
    let (mut n, mut bad) = (0, 0);
    for d in engine.epoch(batches, COPY_DEPTH) {
        let d = d?;
        let want = sent.borrow_mut().pop_front().unwrap_or_default();
        n += 1;
        bad += usize::from(engine.to_host(&d)? != want);
    }
    Ok((n, bad))
}

/// The three checks, over every batch size and setting.
struct Checks {
    all_match: bool,
    all_pinned: bool,
    no_steady_allocs: bool,
}

/// H2D bandwidth, pinned and pageable, for 256 MiB and one CIFAR-10 batch
/// of each size.
fn bandwidths(engine: &TransferEngine, sizes: &[usize]) -> anyhow::Result<Vec<serde_json::Value>> {
    let sample_bytes = 3 * 32 * 32 * 4;
    let bw = |bytes: usize| -> anyhow::Result<serde_json::Value> {
        let pinned = engine.bandwidth(bytes, true, 5)?;
        let pageable = engine.bandwidth(bytes, false, 5)?;
        Ok(
            serde_json::json!({ "bytes": bytes, "pinned_gb_per_s": pinned, "pageable_gb_per_s": pageable }),
        )
    };
    let mut out = vec![bw(256 << 20)?];
    for bs in sizes {
        out.push(bw(bs * sample_bytes)?);
    }
    Ok(out)
}

/// One batch size: both settings timed over `epochs` alternated rounds,
/// then one verified epoch each. Updates `checks`; returns the JSON.
fn check_batch_size(
    engine: &TransferEngine,
    pipeline: &Pipeline,
    workers: usize,
    batch_size: usize,
    (epochs, batches): (u64, usize),
    checks: &mut Checks,
) -> anyhow::Result<serde_json::Value> {
    // Through the front, as every run: the pool is this engine's (its
    // counters are the ones reported), sized by the shared rule.
    let make = |pin: bool| -> anyhow::Result<Run> {
        let options = RunOptions {
            knobs: LoaderKnobs {
                num_workers: workers,
                prefetch_factor: Some(2),
                persistent_workers: true,
                pin_memory: pin,
            },
            batch_size,
            shuffle: true,
            device: Device::Cuda(0),
            ..RunOptions::default()
        };
        Ok(Run::open_with_pool(
            pipeline,
            &options,
            engine.pinned_pool().cloned(),
        )?)
    };
    let mut loaders = [make(false)?, make(true)?];
    let mut runs: [Vec<Timed>; 2] = [Vec::new(), Vec::new()];
    for round in 0..epochs {
        // Alternate which setting goes first, so drift favours neither.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            runs[i].push(timed_epoch(engine, &mut loaders[i], round, batches)?);
        }
    }
    let mut per_pin = Vec::new();
    for (i, pin) in [false, true].into_iter().enumerate() {
        let (checked, mismatched) = verified_epoch(engine, &mut loaders[i], epochs, batches)?;
        checks.all_match &= mismatched == 0 && checked > 0;
        let r = &runs[i];
        let shares: Vec<f64> = r
            .iter()
            .map(|t| t.pinned as f64 / t.copies.max(1) as f64)
            .collect();
        if pin {
            checks.all_pinned &= shares.iter().all(|&s| s == 1.0);
        }
        let allocs: Vec<usize> = r.iter().map(|t| t.device_allocations).collect();
        checks.no_steady_allocs &= allocs.iter().skip(1).all(|&a| a == 0);
        let mut rates: Vec<f64> = r.iter().map(|t| t.samples as f64 / t.seconds).collect();
        rates.sort_by(f64::total_cmp);
        per_pin.push(serde_json::json!({
            "pin_memory": pin,
            "samples_per_s_median": rates.get(rates.len() / 2),
            "samples_per_s": r.iter().map(|t| t.samples as f64 / t.seconds).collect::<Vec<_>>(),
            "pinned_share_per_epoch": shares,
            "device_allocations_per_epoch": allocs,
            "consumer_cpu_seconds_per_epoch": r.iter().map(|t| t.consumer_cpu_seconds).collect::<Vec<_>>(),
            "wall_seconds_per_epoch": r.iter().map(|t| t.seconds).collect::<Vec<_>>(),
            "verified_batches": checked,
            "mismatched_batches": mismatched,
        }));
    }
    Ok(serde_json::json!({ "batch_size": batch_size, "runs": per_pin }))
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let started = Instant::now();
    let info = match adapt::engines::transfer::probe() {
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
    let sizes = [8usize, 128, 2048];
    let bandwidth = bandwidths(&engine, &sizes)?;
    let pipeline: Pipeline = adapt::default_cifar10(&args.path, &|_| {})?;
    let workers = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(8);
    let length = (args.epochs.max(6), args.batches);
    let mut checks = Checks {
        all_match: true,
        all_pinned: true,
        no_steady_allocs: true,
    };
    let mut settings = Vec::new();
    for batch_size in sizes {
        settings.push(check_batch_size(
            &engine,
            &pipeline,
            workers,
            batch_size,
            length,
            &mut checks,
        )?);
    }
    let pinned_of = |v: &serde_json::Value| v["pinned_gb_per_s"].as_f64().unwrap_or(0.0);
    let pageable_of =
        |v: &serde_json::Value| v["pageable_gb_per_s"].as_f64().unwrap_or(f64::INFINITY);
    let big = &bandwidth[0];
    let b2048 = &bandwidth[bandwidth.len() - 1];
    let ok = checks.all_match && checks.all_pinned && checks.no_steady_allocs;
    let line = serde_json::json!({
        "device": info.name,
        "devices": info.devices,
        "workers": workers,
        "depth": COPY_DEPTH,
        "bandwidth": bandwidth,
        "cifar10": settings,
        "pinned_pool": engine.pinned_stats().map(|s| serde_json::json!({
            "allocations": s.allocations, "live": s.live,
            "pinned_handed": s.pinned_handed, "pageable_handed": s.pageable_handed,
        })),
        "checks": {
            "every_batch_identical_after_copy": checks.all_match,
            "every_pinned_copy_page_locked": checks.all_pinned,
            "no_device_allocation_after_first_epoch": checks.no_steady_allocs,
        },
        "targets": {
            "pinned_2048_over_256mib": pinned_of(b2048) / pinned_of(big).max(1e-9),
            "pinned_over_pageable_256mib": pinned_of(big) / pageable_of(big),
        },
        "seconds": started.elapsed().as_secs_f64(),
        "ok": ok,
    });
    println!("{line}");
    if !ok {
        anyhow::bail!("gpu-check: a check failed (see \"checks\")");
    }
    Ok(())
}
