//! `cargo xtask inspect`: one sample as a JSON line, to check our readers
//! against any other tool.

use adapt_formats::Split;
use anyhow::Context;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

/// Which dataset a verb reads (shared by `inspect` and `load`).
#[derive(clap::Args)]
pub(crate) struct DatasetArgs {
    /// cifar10, celeba, digiface, celeba+digiface, imagefolder or pack.
    #[arg(long)]
    dataset: String,
    /// The folder holding the format's files.
    #[arg(long)]
    path: PathBuf,
    /// CIFAR-10 split.
    #[arg(long, value_enum, default_value = "train")]
    split: SplitArg,
    /// Resize every sample to WIDTHxHEIGHT after the format's fixed steps
    /// (image folders of mixed sizes need it to batch).
    #[arg(long, value_parser = parse_size)]
    resize: Option<(u32, u32)>,
}

/// `WIDTHxHEIGHT`, e.g. `224x224`.
pub(crate) fn parse_size(s: &str) -> Result<(u32, u32), String> {
    let (w, h) = s
        .split_once(['x', 'X'])
        .ok_or_else(|| format!("{s:?}: expected WIDTHxHEIGHT"))?;
    let n = |v: &str| v.trim().parse::<u32>().map_err(|e| format!("{s:?}: {e}"));
    Ok((n(w)?, n(h)?))
}

impl DatasetArgs {
    pub(crate) fn open(&self) -> anyhow::Result<adapt_tune::OpenedDataset> {
        let opened = adapt_tune::open_dataset(&self.dataset, &self.path, self.split.into())?;
        Ok(match self.resize {
            Some((w, h)) => opened.resized(w, h)?,
            None => opened,
        })
    }
}

#[derive(clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    source: DatasetArgs,
    /// Sample index, in the format's documented order.
    #[arg(long)]
    index: usize,
    /// Also write the sample's HWC pixel bytes to this file.
    #[arg(long)]
    raw_out: Option<PathBuf>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SplitArg {
    Train,
    Test,
}

impl From<SplitArg> for Split {
    fn from(s: SplitArg) -> Self {
        match s {
            SplitArg::Train => Split::Train,
            SplitArg::Test => Split::Test,
        }
    }
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let opened = args.source.open()?;
    let ds = &opened.dataset;
    let sample = ds
        .get(args.index)
        .with_context(|| format!("sample {}", args.index))?;
    let hwc = sample.hwc_bytes();
    let mut line = serde_json::json!({
        "index": args.index,
        "label": sample.label,
        "shape": [sample.shape.height, sample.shape.width, sample.shape.channels],
        "sha256": hex(&Sha256::digest(&hwc)),
        "source": ds.source(args.index),
    });
    if let Some(pack) = &opened.pack {
        line["origin"] = pack.origin(args.index)?.into();
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
