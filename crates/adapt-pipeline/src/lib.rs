//! What data and how it is transformed: the one pipeline description that
//! the command line (`load`, `tune`, `inspect`), the tuner and the Python
//! module share. A [`Pipeline`] names a dataset (kind, path, options), a
//! list of transform steps with torchvision's names
//! (`random_crop(32,padding=4),hflip,normalize(cifar10)`) and the output
//! type (f32 normalised NCHW, or u8 NCHW / NHWC for normalisation on the
//! device). It serialises (JSON, for reports and profiles) and has a short
//! text form for the command line.
//!
//! This crate is not a loader and not a reader: it opens data through
//! `adapt-formats` and `adapt-pack` and configures an `adapt-loader`
//! loader. Its key rule is that every front builds its data through
//! [`Pipeline::build`], so a tuning trial times exactly the pipeline a
//! training run executes, and a profile is tied to the pipeline it was
//! tuned on ([`Built::identity`]).
//!
//! ```no_run
//! use adapt_pipeline::{DatasetSpec, Pipeline};
//! let pipeline = Pipeline::new(DatasetSpec::new(&adapt_pipeline::Cifar10Format, "datasets/cifar10"))
//!     .with_transforms("random_crop(32,padding=4),hflip,normalize(cifar10)")?
//!     .with_output("u8")?;
//! let built = pipeline.build()?;
//! let config = built.loader_config(adapt_loader::LoaderConfig { batch_size: 128, ..Default::default() });
//! # Ok::<(), adapt_pipeline::PipelineError>(())
//! ```

mod augment;
mod error;
mod formats;
mod open;
mod parse;
mod spec;

pub use augment::{EraseSpec, InterpolationName, Policy};
pub use error::PipelineError;
pub use formats::{
    ARROW_STREAM_INTERLEAVE, ArrowFormat, CelebADigiFaceFormat, CelebAFormat, Cifar10Format,
    Cifar100Format, ConcatFormat, DigiFaceFormat, FORMATS, Format, FormatName, ImageFolderFormat,
    PARQUET_STREAM_INTERLEAVE, PackFormat, ParquetFormat, WEBDATASET_STREAM_INTERLEAVE,
    WebDatasetFormat, help_lines, listed, lookup, or_list,
};
pub use open::{DatasetSpec, OpenedDataset, SampleFields, Shards, dataset_fingerprint};
pub use parse::parse_transforms;
pub use spec::{Size, TransformSpec, transforms_text};

use adapt_dataset::{Read, Sample, Shape};
use adapt_loader::{LoaderConfig, OutputFormat};
use adapt_transform::{Compose, Normalize, SampleRng, Scratch, Transform};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The most bytes one sample may take after the steps (a 16384×16384 RGB
/// image is 768 MiB): a size past it is a typing mistake, refused before
/// anything is allocated.
pub const MAX_SAMPLE_BYTES: usize = 1 << 30;

/// A whole pipeline: data, transform steps, output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pipeline {
    /// The data.
    pub dataset: DatasetSpec,
    /// The steps; `None` means the dataset's default: its usual
    /// normalisation only (what `load` and `tune` did before pipelines).
    /// In JSON, a list of steps or their text form.
    #[serde(default, deserialize_with = "steps_any")]
    pub transforms: Option<Vec<TransformSpec>>,
    /// `f32`, `u8` or `u8-nhwc`.
    #[serde(with = "output_name")]
    pub output: OutputFormat,
    /// Decode JPEGs at full size even when the first step shrinks them.
    /// By default a first `resize(N)` or `random_resized_crop` that shrinks
    /// a JPEG by 2× or more decodes it at a reduced DCT scale (faster; a
    /// slightly different resampling from the full decode).
    #[serde(default)]
    pub exact_decode: bool,
}

/// Steps as a list, as the text form, or null.
fn steps_any<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<TransformSpec>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Steps {
        Text(String),
        List(Vec<TransformSpec>),
    }
    match Option::<Steps>::deserialize(d)? {
        None => Ok(None),
        Some(Steps::List(l)) => Ok(Some(l)),
        Some(Steps::Text(t)) => parse_transforms(&t)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

mod output_name {
    use adapt_loader::OutputFormat;
    use serde::{Deserialize, Deserializer, Serializer};
    pub(crate) fn serialize<S: Serializer>(o: &OutputFormat, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(o.name())
    }
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<OutputFormat, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Pipeline {
    /// The dataset's default pipeline: its usual normalisation, f32 output.
    pub fn new(dataset: DatasetSpec) -> Self {
        Self {
            dataset,
            transforms: None,
            output: OutputFormat::F32Nchw,
            exact_decode: false,
        }
    }

    /// The same pipeline with steps from the text form.
    pub fn with_transforms(mut self, text: &str) -> Result<Self, PipelineError> {
        self.transforms = Some(parse_transforms(text)?);
        Ok(self)
    }

    /// The same pipeline with another output (`f32`, `u8`, `u8-nhwc`).
    pub fn with_output(mut self, name: &str) -> Result<Self, PipelineError> {
        self.output = name
            .parse()
            .map_err(|_| PipelineError::Output(name.to_owned()))?;
        Ok(self)
    }

    /// Reads a pipeline from its JSON form.
    pub fn from_json(text: &str) -> Result<Self, PipelineError> {
        let p: Self =
            serde_json::from_str(text).map_err(|e| PipelineError::Description(e.to_string()))?;
        if let Some(t) = &p.transforms {
            spec::check_order(t)?;
        }
        Ok(p)
    }

    /// The JSON form.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Opens the data and builds the steps, checking each against the shape
    /// it receives: a crop larger than the (padded) image or a normaliser
    /// whose channel count does not match is an error naming the step.
    pub fn build(&self) -> Result<Built, PipelineError> {
        let mut opened = self.dataset.open()?;
        let steps = match &self.transforms {
            Some(t) => t.clone(),
            None => vec![TransformSpec::Normalize {
                preset: None,
                mean: opened.normalize.0.clone(),
                std: opened.normalize.1.clone(),
            }],
        };
        let shape = batch_input_shape(&*opened.dataset, &steps)?;
        if opened.dataset.sample_shape().is_none() && shape.height > 0 {
            // The first sample set the size: the loader batches at it.
            opened.dataset = Arc::new(adapt_dataset::Shaped::new(opened.dataset, shape));
        }
        let (compose, normalize, shape) = compose_steps(&steps, shape)?;
        let (normalize, device_normalize) = match (self.output.is_u8(), normalize) {
            (true, n) => (None, n.and(normalize_values(&steps))),
            (false, n) => (n, None),
        };
        let fingerprint = self.fingerprint(&*opened.dataset);
        // Reduced decoding only helps a first step that shrinks.
        let shrinks_first = matches!(
            steps.first(),
            Some(
                TransformSpec::Resize {
                    shorter: Some(_),
                    ..
                } | TransformSpec::RandomResizedCrop { .. }
            )
        );
        let decoder = (shrinks_first && !self.exact_decode)
            .then(adapt_formats::reduced_decoder)
            .flatten();
        Ok(Built {
            decoder,
            transforms: (!compose.is_empty()).then(|| Arc::new(compose)),
            opened,
            steps,
            normalize,
            device_normalize,
            output: self.output,
            sample_shape: shape,
            fingerprint,
        })
    }
}

impl Pipeline {
    /// The data's fingerprint: a concatenation's names every part.
    fn fingerprint(&self, ds: &dyn adapt_dataset::Dataset) -> String {
        match self.dataset.kind.as_str() {
            "concat" => {
                let parts: Vec<String> = self
                    .dataset
                    .parts
                    .iter()
                    .map(|p| format!("{}:{}", p.kind, p.path.display()))
                    .collect();
                let joined = parts.join(",");
                dataset_fingerprint("concat", std::path::Path::new(&joined), ds)
            }
            _ => match &self.dataset.fields {
                // The members or columns read are part of what the data is.
                Some(m) => {
                    let kind = format!("{}[{}|{:?}]", self.dataset.kind, m.image, m.label);
                    dataset_fingerprint(&kind, &self.dataset.path, ds)
                }
                None => dataset_fingerprint(self.dataset.kind.as_str(), &self.dataset.path, ds),
            },
        }
    }
}

/// Builds the u8 steps in order, checking each against the shape it
/// receives; returns them composed, the normaliser (the last step's) and
/// the shape the samples are batched at.
pub fn compose_steps(
    steps: &[TransformSpec],
    mut shape: Shape,
) -> Result<(Compose, Option<Normalize>, Shape), PipelineError> {
    let mut compose = Compose::new();
    let mut normalize = None;
    for s in steps {
        if let Some(n) = s.normalizer() {
            let n = n?;
            if n.channels() != shape.channels as usize {
                return Err(s.error(format!(
                    "{} channels given, the samples have {}",
                    n.channels(),
                    shape.channels
                )));
            }
            normalize = Some(n);
            continue;
        }
        if let Some(t) = s.build_in(steps)? {
            shape = t.output_shape(shape).map_err(|e| s.error(e.to_string()))?;
            if shape.len() > MAX_SAMPLE_BYTES {
                return Err(s.error(format!(
                    "makes samples of {shape} ({} bytes), more than the {MAX_SAMPLE_BYTES} one sample may take",
                    shape.len()
                )));
            }
            compose.0.push(t);
        }
    }
    if shape.len() > MAX_SAMPLE_BYTES {
        return Err(PipelineError::Option(format!(
            "a sample of {shape} is {} bytes, more than the {MAX_SAMPLE_BYTES} one sample may take",
            shape.len()
        )));
    }
    if shape.height == 0 || shape.width == 0 {
        return Err(PipelineError::Option(
            "the samples have no fixed size: add resize(WxH), center_crop or \
             random_resized_crop (or --resize WxH)"
                .into(),
        ));
    }
    Ok((compose, normalize, shape))
}

/// The shape the steps start from. Readers of images of mixed sizes yield
/// RGB of no fixed size (0×0): a step may fix it; when none does, the first
/// sample as the reader yields it sets the size (as PyTorch's collation
/// takes it), and a later sample of another size is an error naming its
/// file when it is batched.
fn batch_input_shape(
    ds: &dyn adapt_dataset::Dataset,
    steps: &[TransformSpec],
) -> Result<Shape, PipelineError> {
    if let Some(s) = ds.sample_shape() {
        return Ok(s);
    }
    let unknown = Shape::new(0, 0, 3);
    let mut shape = unknown;
    for s in steps {
        if let Some(t) = s.build_in(steps)? {
            shape = t.output_shape(shape).map_err(|e| s.error(e.to_string()))?;
        }
    }
    if (shape.height > 0 && shape.width > 0) || ds.is_empty() {
        return Ok(unknown);
    }
    let first = ds.get(0).map_err(|source| PipelineError::Sample {
        index: 0,
        origin: ds.source(0),
        source,
    })?;
    Ok(first.shape)
}

fn normalize_values(steps: &[TransformSpec]) -> Option<(Vec<f32>, Vec<f32>)> {
    steps.iter().find_map(|s| match s {
        TransformSpec::Normalize { mean, std, .. } => Some((mean.clone(), std.clone())),
        _ => None,
    })
}

/// A pipeline ready to run: the opened data and the steps built.
pub struct Built {
    /// The data as opened (dataset, pack, class names).
    pub opened: OpenedDataset,
    /// The steps as resolved (the dataset's default made explicit).
    pub steps: Vec<TransformSpec>,
    /// The u8 steps, composed; `None` when there are none.
    pub transforms: Option<Arc<Compose>>,
    /// The reduced-scale decoder, when the first step can use it.
    pub decoder: Option<Arc<dyn adapt_dataset::ScaledDecode>>,
    /// The normaliser the loader applies (f32 output).
    pub normalize: Option<Normalize>,
    /// Mean and std left for the device to apply (u8 output with a
    /// normalize step).
    pub device_normalize: Option<(Vec<f32>, Vec<f32>)>,
    /// Output type and layout.
    pub output: OutputFormat,
    /// Shape of one sample as batched (H, W, C).
    pub sample_shape: Shape,
    /// The dataset's fingerprint.
    pub fingerprint: String,
}

impl Built {
    /// The dataset.
    pub fn dataset(&self) -> Arc<dyn adapt_dataset::Dataset> {
        Arc::clone(&self.opened.dataset)
    }

    /// `base` with this pipeline's transform, normaliser and output set.
    pub fn loader_config(&self, base: LoaderConfig) -> LoaderConfig {
        LoaderConfig {
            transforms: self.transforms.clone(),
            normalize: self.normalize.clone(),
            output: self.output,
            decoder: self.decoder.clone(),
            identity: self.identity(),
            ..base
        }
    }

    /// The steps the workers run, in order, by their text form (the
    /// normalisation is done while collating, so it is not among them).
    pub fn step_names(&self) -> Vec<String> {
        self.steps
            .iter()
            .filter(|s| s.normalizer().is_none())
            .map(ToString::to_string)
            .collect()
    }

    /// The canonical text form of the steps.
    pub fn transforms_text(&self) -> String {
        transforms_text(&self.steps)
    }

    /// Whether any step draws random numbers (epochs then differ).
    pub fn is_random(&self) -> bool {
        self.steps.iter().any(TransformSpec::is_random)
    }

    /// What a profile or report is tied to: the dataset's fingerprint, the
    /// steps and the output.
    pub fn identity(&self) -> String {
        format!(
            "{}|{}|{}{}",
            self.fingerprint,
            self.transforms_text(),
            self.output,
            if self.decoder.is_some() {
                "|reduced-decode"
            } else {
                ""
            }
        )
    }

    /// The pipeline as JSON for reports: dataset, steps, output, shape.
    pub fn describe(&self, pipeline: &Pipeline) -> serde_json::Value {
        serde_json::json!({
            "dataset": pipeline.dataset,
            "transforms": self.transforms_text(),
            "output": self.output.name(),
            "device_normalize": self.device_normalize,
            "reduced_decode": self.decoder.is_some(),
            "sample_shape": [self.sample_shape.height, self.sample_shape.width, self.sample_shape.channels],
            "identity": self.identity(),
        })
    }

    /// Sample `index` as the pipeline yields it in `epoch` under `seed`,
    /// before collation (u8 pixels after every step; normalisation is the
    /// collation's): what a loader with this seed batches, whatever its
    /// knobs.
    pub fn sample(&self, index: usize, epoch: u64, seed: u64) -> Result<Sample, PipelineError> {
        let ds = &self.opened.dataset;
        let read_err = |e: adapt_dataset::Error| PipelineError::Sample {
            index,
            origin: ds.source(index),
            source: e,
        };
        let mut sample = Sample::default();
        let mut scratch = Scratch::with_rng(SampleRng::new(seed, epoch, ds.draw_key(index)));
        // The loader's own path: reduced decoding of encoded images where
        // the pipeline uses it, deferred crops and flips materialised.
        if let (Some(t), Some(dec)) = (&self.transforms, &self.decoder)
            && let Some(enc) = ds.encoded(index)
        {
            let enc = enc.map_err(read_err)?;
            if let Some(g) = t
                .apply_encoded_deferring(&enc, &**dec, &mut sample, &mut scratch)
                .map_err(read_err)?
            {
                g.materialize(&mut sample, &mut scratch);
            }
            return Ok(sample);
        }
        if let Read::Lent(v) = ds.read(index, &mut sample).map_err(read_err)? {
            sample.copy_from(v);
        }
        if let Some(t) = &self.transforms {
            t.apply(&mut sample, &mut scratch).map_err(read_err)?;
        }
        Ok(sample)
    }
}
