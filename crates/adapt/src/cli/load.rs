//! `load`: run epochs through the loader, one JSON line each.

use super::args::{DatasetArgs, KnobArgs};
use super::inspect::hex;
use crate::{Autotune, LoaderState, Run, RunOptions};
use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::path::PathBuf;
use std::time::Instant;

/// The verb's flags.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: DatasetArgs,
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    #[command(flatten)]
    knobs: KnobArgs,
    /// Reshuffle every epoch from the seed.
    #[arg(long)]
    shuffle: bool,
    #[arg(long)]
    drop_last: bool,
    #[arg(long, default_value_t = 1)]
    epochs: u64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Sharded data (packs, WebDataset, Parquet): read shard by shard
    /// (shuffled shard order, a shuffle buffer of this many samples)
    /// instead of random access.
    #[arg(long)]
    stream: Option<usize>,
    /// With --stream on WebDataset or Parquet: shards (row groups) read at
    /// once, each record from one drawn at random; more mixes batches more
    /// (default 64 tar shards, 16 row groups; 1 reads one at a time).
    #[arg(long)]
    interleave: Option<usize>,
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
    /// End each epoch's line with a `stages` object: seconds per stage
    /// (read, decode, each step, collate) summed over the workers, the
    /// workers' busy share, the consumer's wait, and a one-line verdict
    /// naming the bottleneck.
    #[arg(long, conflicts_with = "no_stage_timing")]
    stages: bool,
    /// Record no stage times (they cost under 1% of an epoch; the
    /// environment's ADAPT_STAGE_TIMING=0 does the same).
    #[arg(long)]
    no_stage_timing: bool,
}

fn distributed(arg: Option<&str>) -> anyhow::Result<Option<crate::Distributed>> {
    let Some(text) = arg else { return Ok(None) };
    Ok(match crate::parse_distributed(text)? {
        Some((d, launcher)) => {
            eprintln!("{launcher}: rank {} of {}", d.rank, d.world_size);
            Some(d)
        }
        None => {
            eprintln!("--distributed auto: no launcher variables, one process");
            None
        }
    })
}

impl Args {
    /// The run's options from the flags.
    fn run_options(&self) -> anyhow::Result<RunOptions> {
        if self.profile.is_some() && !self.autotune {
            bail!("--profile goes with --autotune here (tune --profile tunes offline)");
        }
        Ok(RunOptions {
            batch_size: self.batch_size,
            shuffle: self.shuffle,
            drop_last: self.drop_last,
            seed: self.seed,
            knobs: self.knobs.knobs(),
            stream: self.stream,
            interleave: self.interleave,
            distributed: distributed(self.distributed.as_deref())?,
            autotune: self.autotune.then(|| Autotune {
                window: self.autotune_window,
                profile: self.profile.clone(),
                ..Autotune::default()
            }),
            stage_timing: !self.no_stage_timing && RunOptions::default().stage_timing,
            ..RunOptions::default()
        })
    }

    /// The checkpoint to resume from, and where checkpoints go.
    fn checkpoints(&self) -> anyhow::Result<(Option<LoaderState>, Option<PathBuf>)> {
        let resume = match &self.resume {
            Some(path) => Some(
                LoaderState::from_text(
                    &std::fs::read_to_string(path)
                        .with_context(|| format!("reading checkpoint {}", path.display()))?,
                )
                .with_context(|| format!("checkpoint {}", path.display()))?,
            ),
            None => None,
        };
        let checkpoint = self.checkpoint.clone().or_else(|| self.resume.clone());
        if self.checkpoint_every == Some(0) {
            bail!("--checkpoint-every must be at least 1");
        }
        if self.checkpoint_every.is_some() && checkpoint.is_none() {
            bail!("--checkpoint-every needs --checkpoint FILE (or --resume FILE)");
        }
        Ok((resume, checkpoint))
    }
}

/// One epoch's counts and digest.
struct Epoch {
    samples: usize,
    batches: usize,
    digest: Sha256,
    /// Bytes of the batches' texts, where the data has a text field.
    text_bytes: Option<usize>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let pipeline = args.source.pipeline()?;
    let options = args.run_options()?;
    let (resume, checkpoint) = args.checkpoints()?;
    let mut run = Run::open(&pipeline, &options)?;
    eprintln!(
        "{}",
        serde_json::json!({ "pipeline": run.info().description })
    );
    let first = resume.as_ref().map_or(0, |s| s.epoch);
    for epoch in first..args.epochs {
        let start = Instant::now();
        match &resume {
            Some(state) if epoch == first => run.resume(state)?,
            _ => run.start(epoch)?,
        };
        let counted = run_epoch(&args, &mut run, epoch, checkpoint.as_deref())?;
        println!(
            "{}",
            epoch_line(&args, &run, epoch, counted, start.elapsed())
        );
    }
    Ok(())
}

/// Runs the epoch started on `run`: digests, per-batch lines, the
/// consumer's step, checkpoints.
fn run_epoch(
    args: &Args,
    run: &mut Run,
    epoch: u64,
    checkpoint: Option<&std::path::Path>,
) -> anyhow::Result<Epoch> {
    let mut e = Epoch {
        samples: 0,
        batches: 0,
        digest: Sha256::new(),
        text_bytes: None,
    };
    while let Some(batch) = run.next(&mut || false) {
        let batch = batch.with_context(|| format!("epoch {epoch}"))?;
        if !args.no_digest {
            // Native byte order: little-endian on every machine we run on,
            // so an f32 batch hashes as its values' little-endian bytes.
            hash_batch(&mut e.digest, &batch);
        }
        if let Some(texts) = run
            .texts(&batch)
            .with_context(|| format!("epoch {epoch}"))?
        {
            for t in &texts {
                if !args.no_digest {
                    e.digest.update(t.as_bytes());
                    e.digest.update([0]);
                }
                *e.text_bytes.get_or_insert(0) += t.len();
            }
        }
        if args.print_batches {
            let mut one = Sha256::new();
            hash_batch(&mut one, &batch);
            let line = serde_json::json!({
                "epoch": epoch,
                "batch": batch.number(),
                "indices": batch.indices(),
                "sha256": hex(&one.finalize()),
            });
            println!("{line}");
        }
        e.samples += batch.len();
        e.batches += 1;
        drop(batch);
        if let Some(ms) = args.step_ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        if let Some(path) = checkpoint
            && args
                .checkpoint_every
                .is_some_and(|n| e.batches.is_multiple_of(n))
        {
            run.write_state(path)?;
        }
    }
    // And at the epoch's end (a resume from it starts the next epoch).
    if let (Some(path), Some(_)) = (checkpoint, args.checkpoint_every) {
        run.write_state(path)?;
    }
    Ok(e)
}

fn hash_batch(digest: &mut Sha256, batch: &crate::Batch) {
    digest.update(batch.bytes());
    for l in batch.labels() {
        digest.update(l.to_le_bytes());
    }
}

/// The epoch's JSON line.
fn epoch_line(
    args: &Args,
    run: &Run,
    epoch: u64,
    e: Epoch,
    took: std::time::Duration,
) -> serde_json::Value {
    let seconds = took.as_secs_f64();
    let knobs = run.config().knobs;
    let mut line = serde_json::json!({
        "epoch": epoch,
        "seconds": seconds,
        "samples": e.samples,
        "batches": e.batches,
        "samples_per_s": e.samples as f64 / seconds,
        "digest": if args.no_digest { serde_json::Value::Null } else { hex(&e.digest.finalize()).into() },
        "num_workers": knobs.num_workers,
        "prefetch_factor": knobs.prefetch_factor,
        "page_locked": run.info().page_locked,
    });
    if let Some(bytes) = e.text_bytes {
        line["text_bytes"] = bytes.into();
    }
    if args.stages
        && let Some(stages) = run.stages()
    {
        line["stages"] = stages.to_json();
    }
    if let Some(a) = run.autotune() {
        let waits = a.waits();
        let tail = &waits[waits.len() - waits.len().min(e.batches)..];
        line["mean_wait_ms"] = (tail.iter().sum::<f64>() / tail.len().max(1) as f64 * 1e3).into();
        line["autotune"] = serde_json::json!({
            "settled": a.tuner().settled().map(|k| k.to_string()),
            "tried": a.tuner().tried().iter()
                .map(|(k, w)| serde_json::json!({ "knobs": k.to_string(), "mean_wait_ms": w * 1e3 }))
                .collect::<Vec<_>>(),
        });
    }
    line
}
