//! `cargo xtask shard`: pack a dataset into shards (in a folder or an
//! object store), or verify a pack (against its source too).

use crate::remote_args::RemoteArgs;
use adapt_pack::{Codec, Manifest, PackOptions, SourceInfo, Store};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// Check every checksum and count of this pack (a folder or
    /// s3://bucket/prefix) and name any damage; with --dataset and --path,
    /// also check that the source still holds the content it was made from.
    #[arg(long, conflicts_with = "out")]
    verify: Option<PathBuf>,
    /// Source format: cifar10, celeba, digiface, celeba+digiface or imagefolder.
    #[arg(long)]
    dataset: Option<String>,
    /// The folder holding the source's files.
    #[arg(long)]
    path: Option<PathBuf>,
    /// The pack to write: a folder, or s3://bucket/prefix (staged in the
    /// cache folder, uploaded shard by shard, the manifest last).
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
    /// none (default: fastest to read), lz4 or zstd (smallest).
    #[arg(long)]
    codec: Option<String>,
    /// With --codec zstd.
    #[arg(long, default_value_t = 3)]
    zstd_level: i32,
    /// Replace a different pack found at --out (once the new one is complete).
    #[arg(long)]
    overwrite: bool,
    #[command(flatten)]
    remote: RemoteArgs,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let remote = args.remote.install()?;
    if let Some(pack) = &args.verify {
        return verify(&args, pack, &remote);
    }
    let (Some(kind), Some(path), Some(out)) = (&args.dataset, &args.path, &args.out) else {
        bail!("shard needs --dataset, --path and --out (or --verify PACK)");
    };
    if kind == "pack" {
        bail!("the source must be a dataset format, not a pack");
    }
    let opened = adapt_pipeline::open_dataset(kind, path, adapt_formats::Split::Train)?;
    let store = args.store.parse::<Store>()?;
    let options = PackOptions {
        shard_size: args.shard_size,
        seed: args.seed,
        store,
        codec: match &args.codec {
            Some(c) => c.parse::<Codec>()?,
            None => PackOptions::default_codec(store),
        },
        zstd_level: args.zstd_level,
        overwrite: args.overwrite,
        ..PackOptions::default()
    };
    let source = SourceInfo {
        dataset: kind.clone(),
        path: path.display().to_string(),
        class_names: opened.class_names,
    };
    // (The source is read twice: first to digest its content — what ties
    // the pack to it —, then to pack; the bar counts the second pass.)
    let bar = crate::progress_bar(opened.dataset.len() as u64, "packing");
    let start = Instant::now();
    let out_text = out.display().to_string();
    let m = if adapt_remote::is_remote(&out_text) {
        let (m, r) = adapt_remote::publish(
            &*opened.dataset,
            &source,
            &out_text,
            &options,
            &remote,
            &|n| bar.inc(n),
        )
        .with_context(|| format!("publishing to {out_text}"))?;
        bar.finish_and_clear();
        println!(
            "{out_text}: uploaded {} shards ({:.1} MiB), {} already there, {} old objects removed",
            r.uploaded,
            r.bytes as f64 / (1u64 << 20) as f64,
            r.skipped,
            r.removed
        );
        m
    } else {
        let m = adapt_pack::write_pack(&*opened.dataset, &source, out, &options, &|n| bar.inc(n))
            .with_context(|| format!("packing into {}", out.display()))?;
        bar.finish_and_clear();
        m
    };
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{}: {} samples in {} shards ({:?}, {}), {:.1} MiB, {:.1} s ({:.0} samples/s)",
        out.display(),
        m.samples,
        m.shards.len(),
        m.store,
        m.codec,
        bytes as f64 / (1u64 << 20) as f64,
        secs,
        m.samples as f64 / secs
    );
    Ok(())
}

fn verify(
    args: &Args,
    pack: &std::path::Path,
    remote: &adapt_remote::RemoteOptions,
) -> anyhow::Result<()> {
    let text = pack.display().to_string();
    let (r, manifest) = if adapt_remote::is_remote(&text) {
        let r = adapt_remote::verify_pack(&text, remote)?;
        let storage = adapt_remote::RemoteStorage::connect(&text, remote)?;
        (r, Manifest::load_from(&storage)?)
    } else {
        (adapt_pack::verify(pack)?, Manifest::load(pack)?)
    };
    let against = match (&args.dataset, &args.path) {
        (Some(kind), Some(path)) => {
            let opened = adapt_pipeline::open_dataset(kind, path, adapt_formats::Split::Train)?;
            adapt_pack::check_source(&manifest, pack, &*opened.dataset)?;
            format!(", made from {} as it is now", path.display())
        }
        (None, None) => String::new(),
        _ => bail!("--verify checks against a source given by both --dataset and --path"),
    };
    println!(
        "{text}: ok, {} shards, {} frames, {} samples, {:.1} MiB{against}",
        r.shards,
        r.frames,
        r.samples,
        r.bytes as f64 / (1u64 << 20) as f64
    );
    Ok(())
}
