//! `cargo xtask gen`: synthetic datasets in the real layouts.

use adapt_formats::DatasetKind;
use adapt_synth::{CelebASpec, Cifar10Spec, DigiFaceSpec, ImageFolderSpec};
use anyhow::Context;
use std::path::PathBuf;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// cifar10, celeba, digiface or imagefolder (class folders of JPEGs,
    /// ImageNet-like by default; --size 1024x768 for camera-sized photos).
    #[arg(long)]
    dataset: DatasetKind,
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
    /// imagefolder: typical landscape size WIDTHxHEIGHT (default 500x375).
    #[arg(long, value_parser = crate::inspect::parse_size)]
    size: Option<(u32, u32)>,
    /// imagefolder: number of class folders (default 10).
    #[arg(long)]
    classes: Option<usize>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let seed = args.seed;
    let out = &args.out;
    let (total, what) = match args.dataset {
        DatasetKind::Cifar10 => {
            let spec = match args.count {
                Some(n) => Cifar10Spec {
                    train: n,
                    test: (n / 5).max(1),
                    seed,
                },
                None => Cifar10Spec {
                    seed,
                    ..Cifar10Spec::default()
                },
            };
            let bar = crate::progress_bar((spec.train + spec.test) as u64, "cifar10");
            adapt_synth::cifar10(out, spec, &|n| bar.inc(n))?;
            bar.finish();
            (spec.train + spec.test, "CIFAR-10 records")
        }
        DatasetKind::CelebA => {
            let mut spec = CelebASpec {
                seed,
                ..CelebASpec::default()
            };
            if let Some(n) = args.count {
                spec.count = n;
                spec.identities = (n / 20).max(1);
            }
            let bar = crate::progress_bar(spec.count as u64, "celeba");
            adapt_synth::celeba(out, spec, &|n| bar.inc(n))?;
            bar.finish();
            (spec.count, "CelebA images")
        }
        DatasetKind::DigiFace => {
            let mut spec = DigiFaceSpec {
                seed,
                ..DigiFaceSpec::default()
            };
            if let Some(n) = args.count {
                spec.classes = n.div_ceil(spec.per_class).max(1);
            }
            let total = spec.classes * spec.per_class;
            let bar = crate::progress_bar(total as u64, "digiface");
            adapt_synth::digiface(out, spec, &|n| bar.inc(n))?;
            bar.finish();
            (total, "DigiFace1M images")
        }
        DatasetKind::ImageFolder => {
            let mut spec = ImageFolderSpec {
                seed,
                ..ImageFolderSpec::default()
            };
            if let Some(c) = args.classes {
                spec.classes = c;
            }
            if let Some((w, h)) = args.size {
                (spec.width, spec.height) = (w, h);
            }
            if let Some(n) = args.count {
                spec.per_class = n.div_ceil(spec.classes.max(1)).max(1);
            }
            let total = spec.classes * spec.per_class;
            let bar = crate::progress_bar(total as u64, "imagefolder");
            adapt_synth::imagefolder(out, spec, &|n| bar.inc(n))?;
            bar.finish();
            (total, "JPEGs in class folders")
        }
    };
    let out = out
        .canonicalize()
        .with_context(|| format!("{}", out.display()))?;
    println!("wrote {total} {what} to {}", out.display());
    Ok(())
}
