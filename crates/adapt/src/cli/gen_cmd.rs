//! `gen`: synthetic datasets in the real layouts.

use crate::FormatName;
use anyhow::Context;
use std::path::PathBuf;

/// The verb's flags.
#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = crate::generate::parse_generated, help = crate::generate::dataset_help())]
    dataset: FormatName,
    /// Folder to write the layout into.
    #[arg(long)]
    out: PathBuf,
    /// Number of images (CIFAR-10: training records, test gets a fifth of
    /// it; DigiFace1M: rounded up to whole classes of 50). Defaults: CIFAR-10
    /// full size (50,000 + 10,000), CelebA 20,000, DigiFace1M 200 × 50.
    #[arg(long)]
    count: Option<usize>,
    /// Seed of every image and label.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Image layouts: typical landscape size WIDTHxHEIGHT (default 500x375).
    #[arg(long, value_parser = super::args::parse_size)]
    size: Option<(u32, u32)>,
    /// Image layouts: number of classes (default 10).
    #[arg(long)]
    classes: Option<usize>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let request = crate::generate::Request {
        count: args.count,
        size: args.size,
        classes: args.classes,
        ..crate::generate::Request::new(args.dataset, args.seed)
    };
    let bar = super::progress_bar(request.total() as u64, &args.dataset.to_string());
    let total = crate::generate(&request, &args.out, &|n| bar.inc(n))?;
    bar.finish();
    let out = args
        .out
        .canonicalize()
        .with_context(|| format!("{}", args.out.display()))?;
    println!("wrote {total} {} to {}", request.what(), out.display());
    Ok(())
}
