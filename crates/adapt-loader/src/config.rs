//! The loader's configuration: PyTorch's knobs, the sampler, the transform
//! and the output.

use crate::{LoaderError, LoaderKnobs};
use adapt_dataset::ScaledDecode;
use adapt_transform::{Compose, Normalize};
use std::sync::Arc;
use std::time::Duration;

/// What to do with a sample whose read fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// Return the error at its batch's position and end the epoch.
    #[default]
    Fail,
    /// Leave the sample out of its batch and count it
    /// ([`Batch::skipped`](crate::Batch::skipped), [`Epoch::skipped`](crate::Epoch::skipped)).
    Skip,
}

pub use adapt_dataset::Sampler;

/// What a batch holds: the loader's output type and layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OutputFormat {
    /// f32, `[B, C, H, W]`, normalised (torchvision's `ToTensor()` then
    /// `Normalize`).
    #[default]
    F32Nchw,
    /// u8, `[B, C, H, W]`, not normalised: a quarter of the bytes to copy,
    /// normalisation left to the device.
    U8Nchw,
    /// u8, `[B, H, W, C]`, not normalised (channels-last).
    U8Nhwc,
}

impl OutputFormat {
    /// Bytes per value: 4 for f32, 1 for u8.
    pub fn bytes_per_value(self) -> usize {
        match self {
            OutputFormat::F32Nchw => 4,
            OutputFormat::U8Nchw | OutputFormat::U8Nhwc => 1,
        }
    }

    /// Whether values are u8.
    pub fn is_u8(self) -> bool {
        self != OutputFormat::F32Nchw
    }

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::F32Nchw => "f32",
            OutputFormat::U8Nchw => "u8",
            OutputFormat::U8Nhwc => "u8-nhwc",
        }
    }
}

impl std::fmt::Display for OutputFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for OutputFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "f32-nchw" | "float32" => Ok(OutputFormat::F32Nchw),
            "u8" | "u8-nchw" | "uint8" => Ok(OutputFormat::U8Nchw),
            "u8-nhwc" | "uint8-nhwc" => Ok(OutputFormat::U8Nhwc),
            _ => Err(format!("unknown output {s:?}; expected f32, u8 or u8-nhwc")),
        }
    }
}

/// One rank of a distributed run, with PyTorch `DistributedSampler`
/// semantics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Distributed {
    /// This process's rank, below `world_size`.
    pub rank: usize,
    /// Number of ranks.
    pub world_size: usize,
}

/// The loader's configuration: PyTorch's names and defaults.
#[derive(Clone, Debug)]
pub struct LoaderConfig {
    /// Samples per batch (PyTorch default 1).
    pub batch_size: usize,
    /// Reshuffle every epoch from (seed, epoch).
    pub shuffle: bool,
    /// Drop the last incomplete batch (and, when distributed, trim the
    /// dataset to a multiple of the world size instead of padding it).
    pub drop_last: bool,
    /// Seed of the shuffle and of every random transform: sample `i`'s
    /// draws in epoch `e` come from (seed, e, the dataset's draw key of `i`).
    pub seed: u64,
    /// Split the epoch across ranks.
    pub distributed: Option<Distributed>,
    /// A custom order instead of `shuffle` / `distributed`.
    pub sampler: Option<Arc<dyn Sampler>>,
    /// PyTorch's four knobs. Pinned buffers come from the provider given
    /// to [`Loader::with_buffers`](crate::Loader::with_buffers).
    pub knobs: LoaderKnobs,
    /// How long to wait for one batch before failing; `None` waits forever.
    pub timeout: Option<Duration>,
    /// What a failing sample does.
    pub on_error: ErrorPolicy,
    /// Applied to each decoded sample before collation.
    pub transforms: Option<Arc<Compose>>,
    /// Mean/std normalisation; `None` only scales to [0, 1] (f32 output)
    /// or leaves the bytes as they are (u8 output, which refuses one).
    pub normalize: Option<Normalize>,
    /// The batches' value type and layout.
    pub output: OutputFormat,
    /// Decode encoded images (a dataset's [`encoded`](adapt_dataset::Dataset::encoded)
    /// bytes) through this decoder, at a reduced scale where the
    /// transform's first step shrinks enough; `None` reads through the
    /// dataset (full-size decoding).
    pub decoder: Option<Arc<dyn ScaledDecode>>,
    /// What the batches are made of (a pipeline's identity), recorded in
    /// checkpoints so one of another pipeline is refused.
    pub identity: String,
    /// Record where each epoch's time goes ([`crate::StageStats`]): each
    /// batch's build timed, one sample in 8 stage by stage, and the
    /// consumer's waits. On by default: its cost was within the noise, at most
    /// 1.4% of an epoch's samples/s (docs/benchmarks.md, issue 44).
    pub stage_timing: bool,
}

impl Default for LoaderConfig {
    fn default() -> Self {
        Self {
            batch_size: 1,
            shuffle: false,
            drop_last: false,
            seed: 0,
            distributed: None,
            sampler: None,
            knobs: LoaderKnobs::DEFAULT,
            timeout: None,
            on_error: ErrorPolicy::Fail,
            transforms: None,
            normalize: None,
            output: OutputFormat::F32Nchw,
            decoder: None,
            identity: String::new(),
            stage_timing: true,
        }
    }
}

impl LoaderConfig {
    /// Batches built ahead of the consumer at most
    /// ([`LoaderKnobs::max_in_flight`]).
    pub fn max_in_flight(&self) -> usize {
        self.knobs.max_in_flight()
    }

    /// Samples this rank sees per epoch, for a dataset of `len` samples.
    pub fn samples_per_epoch(&self, len: usize) -> usize {
        match self.distributed {
            None => len,
            Some(d) if self.drop_last => len / d.world_size,
            Some(d) => len.div_ceil(d.world_size),
        }
    }

    /// Batches per epoch, for a dataset of `len` samples.
    pub fn batches_per_epoch(&self, len: usize) -> usize {
        self.batches_for(self.samples_per_epoch(len))
    }

    /// Batches for an epoch order of `n` samples.
    pub fn batches_for(&self, n: usize) -> usize {
        if self.drop_last {
            n / self.batch_size
        } else {
            n.div_ceil(self.batch_size)
        }
    }

    /// Rejects impossible values, with PyTorch's rules where PyTorch has one.
    pub fn validate(&self, len: usize) -> Result<(), LoaderError> {
        let bad = |m: String| Err(LoaderError::InvalidConfig(m));
        if self.batch_size == 0 {
            return bad("batch_size must be at least 1".into());
        }
        self.knobs.check().map_err(LoaderError::InvalidConfig)?;
        if let Some(d) = self.distributed
            && (d.world_size == 0 || d.rank >= d.world_size)
        {
            return bad(format!(
                "rank {} is not below world_size {}",
                d.rank, d.world_size
            ));
        }
        if self.timeout == Some(std::time::Duration::ZERO) {
            return bad("timeout must be positive (None waits forever)".into());
        }
        if len == 0 {
            return bad("the dataset is empty".into());
        }
        Ok(())
    }
}
