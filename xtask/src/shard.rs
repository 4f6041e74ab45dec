//! `cargo xtask shard`: pack a dataset into shards, or verify a pack.

use adapt_pack::{PackOptions, SourceInfo, Store};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Check every checksum and count of this pack and name any damage.
    #[arg(long, conflicts_with_all = ["dataset", "out"])]
    verify: Option<PathBuf>,
    /// Source format: cifar10, celeba, digiface, celeba+digiface or imagefolder.
    #[arg(long)]
    dataset: Option<String>,
    /// The folder holding the source's files.
    #[arg(long)]
    path: Option<PathBuf>,
    /// The pack folder to write.
    #[arg(long)]
    out: Option<PathBuf>,
    #[arg(long, default_value_t = 10_000)]
    shard_size: usize,
    /// Seed of the shuffle before packing.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// raw (decoded pixels: fastest to read) or encoded (original bytes: smallest).
    #[arg(long, default_value = "raw")]
    store: String,
    #[arg(long, default_value_t = 3)]
    zstd_level: i32,
    /// Replace a different pack found in --out.
    #[arg(long)]
    overwrite: bool,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if let Some(pack) = &args.verify {
        let r = adapt_pack::verify(pack)?;
        println!(
            "{}: ok, {} shards, {} frames, {} samples, {:.1} MiB",
            pack.display(),
            r.shards,
            r.frames,
            r.samples,
            r.bytes as f64 / (1u64 << 20) as f64
        );
        return Ok(());
    }
    let (Some(kind), Some(path), Some(out)) = (&args.dataset, &args.path, &args.out) else {
        bail!("shard needs --dataset, --path and --out (or --verify PACK)");
    };
    if kind == "pack" {
        bail!("the source must be a dataset format, not a pack");
    }
    let opened = adapt_pipeline::open_dataset(kind, path, adapt_formats::Split::Train)?;
    let options = PackOptions {
        shard_size: args.shard_size,
        seed: args.seed,
        store: args.store.parse::<Store>()?,
        zstd_level: args.zstd_level,
        overwrite: args.overwrite,
        ..PackOptions::default()
    };
    let source = SourceInfo {
        dataset: kind.clone(),
        path: path.display().to_string(),
        class_names: opened.class_names,
    };
    let bar = crate::progress_bar(opened.dataset.len() as u64, "packing");
    let start = Instant::now();
    let m = adapt_pack::write_pack(&*opened.dataset, &source, out, &options, &|n| bar.inc(n))
        .with_context(|| format!("packing into {}", out.display()))?;
    bar.finish_and_clear();
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{}: {} samples in {} shards, {:.1} MiB, {:.1} s ({:.0} samples/s)",
        out.display(),
        m.samples,
        m.shards.len(),
        bytes as f64 / (1u64 << 20) as f64,
        secs,
        m.samples as f64 / secs
    );
    Ok(())
}
