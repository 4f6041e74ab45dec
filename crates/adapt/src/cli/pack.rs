//! `shard`: pack a dataset into shards (in a folder or an
//! object store), or verify a pack (against its source too).

use super::remote_args::RemoteArgs;
use crate::{Codec, DatasetSpec, PackOptions, Payload, RemoteOptions};
use anyhow::{Context, bail};
use std::path::PathBuf;
use std::time::Instant;

/// The verb's flags.
#[derive(clap::Args)]
pub struct Args {
    /// Check every checksum and count of this pack (a folder,
    /// s3://bucket/prefix or https://host/path) and name any damage; with --dataset and --path,
    /// also check that the source still holds the content it was made from.
    #[arg(long, conflicts_with = "out")]
    verify: Option<PathBuf>,
    /// Source format.
    #[arg(long, value_parser = super::args::parse_format, long_help = super::args::dataset_long_help())]
    dataset: Option<crate::FormatName>,
    /// The folder holding the source's files (WebDataset, Parquet: the
    /// file list).
    #[arg(long)]
    path: Option<PathBuf>,
    #[command(flatten)]
    members: super::args::FieldArgs,
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
    /// What to write: pack (adapt's shards), or webdataset (tar shards
    /// `train-NNNNNN.tar` of KEY.jpg/png and KEY.cls, for other tools).
    #[arg(long, default_value = "pack")]
    format: String,
    #[command(flatten)]
    remote: RemoteArgs,
}

impl Args {
    /// The source the flags name (`--dataset` and `--path`), if both are given.
    fn source(&self) -> anyhow::Result<Option<DatasetSpec>> {
        self.members
            .refuse_text("pack", "a pack stores images and labels, not texts")?;
        match (&self.dataset, &self.path) {
            (Some(kind), Some(path)) => Ok(Some(
                self.members.apply(DatasetSpec::new(*kind, path.clone()))?,
            )),
            (None, None) => Ok(None),
            _ => bail!("the source is given by both --dataset and --path"),
        }
    }

    fn pack_options(&self) -> anyhow::Result<PackOptions> {
        let store = self.store.parse::<Payload>()?;
        Ok(PackOptions {
            shard_size: self.shard_size,
            seed: self.seed,
            store,
            codec: match &self.codec {
                Some(c) => c.parse::<Codec>()?,
                None => PackOptions::default_codec(store),
            },
            zstd_level: self.zstd_level,
            overwrite: self.overwrite,
            ..PackOptions::default()
        })
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let remote = args.remote.install()?;
    if let Some(pack) = &args.verify {
        return verify(&args, pack, &remote);
    }
    let (Some(source), Some(out)) = (args.source()?, &args.out) else {
        bail!("shard needs --dataset, --path and --out (or --verify PACK)");
    };
    match args.format.as_str() {
        "pack" => {}
        "webdataset" => return webdataset(&args, &source, out),
        other => bail!("--format {other}: expected pack or webdataset"),
    }
    let options = args.pack_options()?;
    // (The source is read twice: first to digest its content — what ties
    // the pack to it —, then to pack; the bar counts the second pass.)
    let source = crate::pack::Source::open(&source)?;
    let bar = super::progress_bar(source.len() as u64, "packing");
    let start = Instant::now();
    let dest = out.display().to_string();
    let written = crate::pack::write(&source, &dest, &options, &remote, &|n| bar.inc(n))
        .with_context(|| format!("packing into {dest}"))?;
    bar.finish_and_clear();
    if let Some(r) = &written.upload {
        println!(
            "{dest}: uploaded {} shards ({:.1} MiB), {} already there, {} old objects removed",
            r.uploaded,
            r.bytes as f64 / (1u64 << 20) as f64,
            r.skipped,
            r.removed
        );
    }
    let m = &written.manifest;
    let secs = start.elapsed().as_secs_f64();
    let bytes: u64 = m.shards.iter().map(|s| s.bytes).sum();
    println!(
        "{dest}: {} samples in {} shards ({:?}, {}), {:.1} MiB, {:.1} s ({:.0} samples/s)",
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

/// `--format webdataset`: the source as WebDataset tar shards in `out`.
fn webdataset(args: &Args, source: &DatasetSpec, out: &std::path::Path) -> anyhow::Result<()> {
    if crate::is_remote(&out.to_string_lossy()) {
        bail!("--format webdataset writes to a local folder; upload the shards with your own tool");
    }
    if args.codec.is_some() || args.store != "raw" {
        bail!("--codec and --store are a pack's; WebDataset shards hold the images' files");
    }
    let source = crate::pack::Source::open(source)?;
    let bar = super::progress_bar(source.len() as u64, "writing");
    let start = Instant::now();
    let o = crate::pack::WebDatasetOut {
        shard_size: args.shard_size,
        seed: args.seed,
        prefix: "train".into(),
        overwrite: args.overwrite,
    };
    let shards = crate::pack::write_webdataset(&source, out, &o, &|n| bar.inc(n))
        .with_context(|| format!("writing WebDataset shards into {}", out.display()))?;
    bar.finish_and_clear();
    let bytes: u64 = shards
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    println!(
        "{}: {} samples in {} WebDataset shards, {:.1} MiB, {:.1} s",
        out.display(),
        source.len(),
        shards.len(),
        bytes as f64 / (1u64 << 20) as f64,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn verify(args: &Args, pack: &std::path::Path, remote: &RemoteOptions) -> anyhow::Result<()> {
    let text = pack.display().to_string();
    let against = args.source()?;
    let r = crate::pack::verify(&text, against.as_ref(), remote)?;
    let made_from = match &against {
        Some(s) => format!(", made from {} as it is now", s.path.display()),
        None => String::new(),
    };
    println!(
        "{text}: ok, {} shards, {} frames, {} samples, {:.1} MiB{made_from}",
        r.shards,
        r.frames,
        r.samples,
        r.bytes as f64 / (1u64 << 20) as f64
    );
    Ok(())
}
