//! The flags the verbs that open data share: which dataset (`--dataset`,
//! its help and parser read the format table), which of a record's parts,
//! which pipeline steps and output.

use crate::{DatasetSpec, FORMATS, FormatName, LoaderKnobs, Pipeline};
use std::path::PathBuf;

/// `--dataset`'s parser: a name in the format table.
pub(crate) fn parse_format(name: &str) -> Result<FormatName, String> {
    name.parse().map_err(|e| format!("{e}"))
}

/// `--dataset`'s short help: every format's name.
pub(crate) fn dataset_help() -> String {
    format!("The format: {}", adapt_pipeline::listed())
}

/// `--dataset`'s long help: one line per format.
pub(crate) fn dataset_long_help() -> String {
    format!("The format, one of:\n{}", adapt_pipeline::help_lines())
}

/// PyTorch's four loader knobs as flags, with its names and defaults.
#[derive(clap::Args)]
pub(crate) struct KnobArgs {
    /// Worker threads (0 loads in the consumer's thread).
    #[arg(long, default_value_t = 0)]
    num_workers: usize,
    /// Batches in flight per worker (PyTorch: 2 when unset; refused with 0 workers).
    #[arg(long)]
    prefetch_factor: Option<usize>,
    /// Collate into page-locked memory (where a CUDA device is usable).
    #[arg(long)]
    pin_memory: bool,
    /// Keep the workers across epochs (needs --num-workers).
    #[arg(long)]
    persistent_workers: bool,
}

impl KnobArgs {
    /// The knobs the flags set (checked by the loader, as PyTorch's are).
    pub(crate) fn knobs(&self) -> LoaderKnobs {
        LoaderKnobs {
            num_workers: self.num_workers,
            prefetch_factor: self.prefetch_factor,
            pin_memory: self.pin_memory,
            persistent_workers: self.persistent_workers,
        }
    }
}

/// Which data and pipeline a verb reads (shared by `inspect` and `load`).
#[derive(clap::Args)]
pub(crate) struct DatasetArgs {
    #[arg(long, value_parser = parse_format, help = dataset_help(), long_help = dataset_long_help())]
    dataset: FormatName,
    /// The folder holding the format's files (a pack may be
    /// s3://bucket/prefix or https://host/path; WebDataset shards or Parquet files a folder,
    /// `a.tar::b.tar` or `shards-{000000..000099}.tar`).
    #[arg(long)]
    path: PathBuf,
    #[command(flatten)]
    members: FieldArgs,
    #[command(flatten)]
    remote: super::remote_args::RemoteArgs,
    /// CIFAR-10 split.
    #[arg(long, value_enum, default_value = "train")]
    split: SplitArg,
    /// Resize every sample to WIDTHxHEIGHT after the format's fixed steps
    /// (image folders of mixed sizes need it to batch).
    #[arg(long, value_parser = parse_size)]
    resize: Option<(u32, u32)>,
    #[command(flatten)]
    pipeline: PipelineArgs,
}

/// Which members of a WebDataset sample, or columns of a Parquet row, are
/// read (shared by the verbs that open data).
#[derive(clap::Args)]
pub(crate) struct FieldArgs {
    /// webdataset: the image member's extension, alternatives separated by
    /// `;` (default jpg;jpeg;png;webp). parquet: the image column, a
    /// `{bytes, path}` struct or binary (default image).
    #[arg(long)]
    image: Option<String>,
    /// webdataset: the label member's extension, an integer in ASCII
    /// (default cls). parquet: the integer label column (default label).
    /// `none` for unlabelled data (labels -1).
    #[arg(long)]
    label: Option<String>,
    /// webdataset: the text member's extension (a caption: txt, or json
    /// read as its text); parquet: a string column. `inspect` shows the
    /// sample's, `load` reads each batch's (into its digest, and its bytes
    /// in the epoch line).
    #[arg(long)]
    text: Option<String>,
}

impl FieldArgs {
    /// The fields asked for, applied to `spec` (an error for another kind).
    pub(crate) fn apply(&self, mut spec: DatasetSpec) -> anyhow::Result<DatasetSpec> {
        if self.image.is_none() && self.label.is_none() && self.text.is_none() {
            return Ok(spec);
        }
        let Some(default) = spec.kind.format().fields() else {
            let named: Vec<&str> = FORMATS
                .iter()
                .filter(|f| f.fields().is_some())
                .map(|f| f.name())
                .collect();
            anyhow::bail!(
                "--image, --label and --text choose the named parts of a record (--dataset {}), \
                 not of {}",
                adapt_pipeline::or_list(&named),
                spec.kind
            );
        };
        spec.fields = Some(crate::SampleFields {
            image: self.image.clone().unwrap_or(default.image),
            label: match self.label.as_deref() {
                None => default.label,
                Some(l) if l.eq_ignore_ascii_case("none") => None,
                Some(l) => Some(l.to_owned()),
            },
            text: self.text.clone(),
        });
        Ok(spec)
    }

    /// Refuses `--text` for a verb that reads no text, saying which do.
    pub(crate) fn refuse_text(&self, verb: &str, why: &str) -> anyhow::Result<()> {
        if self.text.is_some() {
            anyhow::bail!("{verb} --text: {why}; `load --text` and `inspect --text` read texts");
        }
        Ok(())
    }
}

/// The pipeline's steps and output (shared by `inspect`, `load` and `tune`).
#[derive(clap::Args)]
pub(crate) struct PipelineArgs {
    /// Transform steps, torchvision's names, e.g.
    /// "random_crop(32,padding=4),hflip,normalize(cifar10)". Default: the
    /// dataset's usual normalisation only.
    #[arg(long)]
    pub(crate) transform: Option<String>,
    /// f32 (normalised NCHW), u8 (NCHW) or u8-nhwc.
    #[arg(long, default_value = "f32")]
    pub(crate) output: String,
    /// Decode JPEGs at full size even where a first resize or random
    /// resized crop could decode them at a reduced DCT scale.
    #[arg(long)]
    pub(crate) exact_decode: bool,
}

impl PipelineArgs {
    /// Applies the steps and output to `pipeline`.
    pub(crate) fn apply(&self, mut pipeline: Pipeline) -> anyhow::Result<Pipeline> {
        if let Some(t) = &self.transform {
            pipeline = pipeline.with_transforms(t)?;
        }
        pipeline.exact_decode = self.exact_decode;
        Ok(pipeline.with_output(&self.output)?)
    }
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
    /// The pipeline the flags describe (with the object-store flags
    /// installed, so a pack at `s3://…` opens with them).
    pub(crate) fn pipeline(&self) -> anyhow::Result<Pipeline> {
        self.remote.install()?;
        let spec = self.members.apply(DatasetSpec {
            test_split: matches!(self.split, SplitArg::Test),
            resize: self.resize,
            ..DatasetSpec::new(self.dataset, self.path.clone())
        })?;
        self.pipeline.apply(Pipeline::new(spec))
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
pub(crate) enum SplitArg {
    Train,
    Test,
}
