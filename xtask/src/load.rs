//! `cargo xtask load`: run epochs through the loader, one JSON line each.

use crate::inspect::{DatasetArgs, hex};
use adapt_loader::{Distributed, Driver, Launch, Loader, LoaderConfig, LoaderState};
use adapt_tune::{AutotunedDriver, Machine, MaybeTuned, Profile};
use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
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
    /// This process's share of a distributed run: `auto` reads torchrun's
    /// RANK/WORLD_SIZE or Slurm's SLURM_PROCID/SLURM_NTASKS; `R/W` sets
    /// rank R of W explicitly (and wins over the environment).
    #[arg(long)]
    distributed: Option<String>,
    /// Resume from this checkpoint (written by --checkpoint-every).
    #[arg(long)]
    resume: Option<PathBuf>,
    /// Write a checkpoint every N batches (to --checkpoint, else --resume's file).
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// Where --checkpoint-every writes.
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// Print one JSON line per batch (epoch, batch, indices, sha256).
    #[arg(long)]
    print_batches: bool,
    /// A consumer that spends this many milliseconds per batch (a stand-in
    /// for a training step).
    #[arg(long)]
    step_ms: Option<u64>,
    /// Tune num_workers and prefetch_factor while loading: during the first
    /// epoch the ADaPT descent moves them between batches by how long this
    /// consumer waits (the data order does not change), then keeps what it
    /// settled on.
    #[arg(long)]
    autotune: bool,
    /// With --autotune: batches timed per candidate (after 2 of settling in).
    #[arg(long, default_value_t = 8)]
    autotune_window: usize,
    /// With --autotune: start from this profile's entry for the pipeline
    /// and batch size, and save what the search settled on there.
    #[arg(long)]
    profile: Option<PathBuf>,
}

fn distributed(arg: Option<&str>) -> anyhow::Result<Option<Distributed>> {
    Ok(match arg {
        None => None,
        Some("auto") => match Launch::from_env()? {
            Some(l) => {
                eprintln!(
                    "{}: rank {} of {}",
                    l.launcher, l.distributed.rank, l.distributed.world_size
                );
                Some(l.distributed)
            }
            None => {
                eprintln!("--distributed auto: no launcher variables, one process");
                None
            }
        },
        Some(s) => {
            let (r, w) = s
                .split_once('/')
                .with_context(|| format!("--distributed {s:?}: expected auto or RANK/WORLD"))?;
            let n = |v: &str| {
                v.trim()
                    .parse::<usize>()
                    .with_context(|| format!("--distributed {s:?}"))
            };
            Some(Distributed {
                rank: n(r)?,
                world_size: n(w)?,
            })
        }
    })
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
        distributed: distributed(args.distributed.as_deref())?,
        ..LoaderConfig::default()
    });
    let resume = match &args.resume {
        Some(path) => Some(
            LoaderState::from_text(
                &std::fs::read_to_string(path)
                    .with_context(|| format!("reading checkpoint {}", path.display()))?,
            )
            .with_context(|| format!("checkpoint {}", path.display()))?,
        ),
        None => None,
    };
    let checkpoint = args.checkpoint.clone().or_else(|| args.resume.clone());
    if args.checkpoint_every == Some(0) {
        bail!("--checkpoint-every must be at least 1");
    }
    if args.checkpoint_every.is_some() && checkpoint.is_none() {
        bail!("--checkpoint-every needs --checkpoint FILE (or --resume FILE)");
    }
    if args.profile.is_some() && !args.autotune {
        bail!("--profile goes with --autotune here (cargo xtask tune --profile tunes offline)");
    }
    let machine = Machine::detect();
    let identity = built.identity();
    let mut profile = match &args.profile {
        Some(p) => Some(Profile::load(p)?),
        None => None,
    };
    let start_knobs = profile
        .as_ref()
        .and_then(|p| p.lookup(&identity, args.batch_size, &machine))
        .map(|e| e.knobs);
    let driver = Driver::new(Loader::new(built.dataset(), config)?);
    let mut runner = if args.autotune {
        MaybeTuned::Tuned(AutotunedDriver::new(
            driver,
            &machine,
            start_knobs,
            args.autotune_window,
            2,
        )?)
    } else {
        MaybeTuned::Fixed(driver)
    };
    let mut saved = false;
    eprintln!(
        "{}",
        serde_json::json!({ "pipeline": built.describe(&pipeline) })
    );
    let first = resume.as_ref().map_or(0, |s| s.epoch);
    for epoch in first..args.epochs {
        let start = Instant::now();
        let mut digest = Sha256::new();
        let (mut samples, mut batches) = (0usize, 0usize);
        match &resume {
            Some(state) if epoch == first => runner.driver().resume(state)?,
            _ => runner.driver().start(epoch)?,
        };
        while let Some(batch) = runner.next(&mut || false) {
            let batch = batch.with_context(|| format!("epoch {epoch}"))?;
            if !args.no_digest {
                // Native byte order: little-endian on every machine we run on,
                // so an f32 batch hashes as its values' little-endian bytes.
                digest.update(batch.bytes());
                for l in batch.labels() {
                    digest.update(l.to_le_bytes());
                }
            }
            if args.print_batches {
                let mut one = Sha256::new();
                one.update(batch.bytes());
                for l in batch.labels() {
                    one.update(l.to_le_bytes());
                }
                let line = serde_json::json!({
                    "epoch": epoch,
                    "batch": batch.number(),
                    "indices": batch.indices(),
                    "sha256": hex(&one.finalize()),
                });
                println!("{line}");
            }
            samples += batch.len();
            batches += 1;
            drop(batch);
            if let Some(ms) = args.step_ms {
                std::thread::sleep(std::time::Duration::from_millis(ms));
            }
            if args
                .checkpoint_every
                .is_some_and(|n| batches.is_multiple_of(n))
            {
                save_checkpoint(runner.driver(), checkpoint.as_deref())?;
            }
        }
        // And at the epoch's end (a resume from it starts the next epoch).
        if args.checkpoint_every.is_some() {
            save_checkpoint(runner.driver(), checkpoint.as_deref())?;
        }
        let seconds = start.elapsed().as_secs_f64();
        let knobs = runner.driver().loader().config().clone();
        let mut line = serde_json::json!({
            "epoch": epoch,
            "seconds": seconds,
            "samples": samples,
            "batches": batches,
            "samples_per_s": samples as f64 / seconds,
            "digest": if args.no_digest { serde_json::Value::Null } else { hex(&digest.finalize()).into() },
            "num_workers": knobs.num_workers,
            "prefetch_factor": knobs.prefetch_factor,
        });
        if let Some(a) = runner.tuned() {
            let waits = a.waits();
            let tail = &waits[waits.len() - waits.len().min(batches)..];
            line["mean_wait_ms"] =
                (tail.iter().sum::<f64>() / tail.len().max(1) as f64 * 1e3).into();
            line["autotune"] = serde_json::json!({
                "settled": a.tuner().settled().map(|k| k.to_string()),
                "tried": a.tuner().tried().iter()
                    .map(|(k, w)| serde_json::json!({ "knobs": k.to_string(), "mean_wait_ms": w * 1e3 }))
                    .collect::<Vec<_>>(),
            });
            if let (Some(k), Some(p), Some(path), false) =
                (a.tuner().settled(), profile.as_mut(), &args.profile, saved)
            {
                p.insert_settled(&identity, args.batch_size, &machine, k);
                p.save(path)?;
                saved = true;
            }
        }
        println!("{line}");
    }
    Ok(())
}

/// Writes the driver's checkpoint (when an epoch runs) to `path` atomically.
fn save_checkpoint(driver: &Driver, path: Option<&std::path::Path>) -> anyhow::Result<()> {
    if let (Some(path), Some(state)) = (path, driver.state()) {
        let text = state.to_text();
        adapt_formats::write_atomically(path, |w| w.write_all(text.as_bytes()))?;
    }
    Ok(())
}
