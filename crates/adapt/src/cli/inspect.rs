//! `inspect`: one sample as a JSON line, as the pipeline yields
//! it in a given epoch, to check our readers and transforms against any
//! other tool.

use super::args::DatasetArgs;
use anyhow::Context;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// The verb's flags.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    source: DatasetArgs,
    /// Sample index, in the format's documented order.
    #[arg(long)]
    index: usize,
    /// The epoch whose random draws to show.
    #[arg(long, default_value_t = 0)]
    epoch: u64,
    /// The seed of the random draws (the loader's --seed).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also write the sample's HWC pixel bytes (after every step but
    /// normalisation) to this file.
    #[arg(long)]
    raw_out: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let pipeline = args.source.pipeline()?;
    let s = crate::inspect(&pipeline, args.index, args.epoch, args.seed)?;
    let hwc = s.sample.hwc_bytes();
    let mut line = serde_json::json!({
        "index": args.index,
        "epoch": args.epoch,
        "seed": args.seed,
        "label": s.sample.label,
        "shape": [s.sample.shape.height, s.sample.shape.width, s.sample.shape.channels],
        "sha256": hex(&Sha256::digest(&hwc)),
        "source": s.source,
        "transforms": s.transforms,
    });
    if let Some(origin) = s.origin {
        line["origin"] = origin.into();
    }
    if let Some(text) = s.text {
        line["text"] = text.into();
    }
    println!("{line}");
    if let Some(out) = args.raw_out {
        std::fs::write(&out, &hwc).with_context(|| format!("writing {}", out.display()))?;
    }
    Ok(())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
