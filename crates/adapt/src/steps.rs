//! adapt's steps over samples read elsewhere (a Python dataset's own
//! `__getitem__`): the pipeline's steps and collation applied to one u8
//! image at a time, written into its place in a caller's batch buffer,
//! drawing as the loader draws (from seed, epoch and the sample's key), so
//! the user's decoding is followed by the same Rust steps the loader runs.

use crate::AdaptError;
use adapt_dataset::{Read, Sample, SampleView, Shape};
use adapt_loader::{OutputFormat, collate_sample, transform_read};
use adapt_pipeline::{PipelineError, TransformSpec, compose_steps, parse_transforms};
use adapt_transform::{Compose, Normalize, SampleRng, Scratch};

/// The steps of one pipeline, for samples of one input shape.
#[derive(Debug)]
pub struct SampleSteps {
    compose: Compose,
    normalize: Normalize,
    output: OutputFormat,
    input: Shape,
    shape: Shape,
}

/// A worker's reusable buffers for [`SampleSteps::write`].
#[derive(Debug, Default)]
pub struct StepScratch {
    sample: Sample,
    scratch: Scratch,
    row: Vec<u8>,
}

impl SampleSteps {
    /// The steps of `text` (the text form; `normalize` last, f32 output
    /// only) over samples of `input` (its height and width 0 when the
    /// samples differ in size: a step must then fix the size).
    pub fn new(text: &str, output: &str, input: Shape) -> Result<Self, AdaptError> {
        let steps: Vec<TransformSpec> = parse_transforms(text)?;
        let output: OutputFormat = output
            .parse()
            .map_err(|_| PipelineError::Output(output.to_owned()))?;
        let (compose, normalize, shape) = compose_steps(&steps, input)?;
        if output.is_u8() && normalize.is_some() {
            return Err(PipelineError::Option(
                "u8 output is not normalised: leave normalize out, or ask for f32 output".into(),
            )
            .into());
        }
        let normalize = normalize.unwrap_or_else(|| Normalize::unit(shape.channels as usize));
        Ok(Self {
            compose,
            normalize,
            output,
            input,
            shape,
        })
    }

    /// The shape (height, width, channels) of a sample after the steps.
    pub fn shape(&self) -> Shape {
        self.shape
    }

    /// Bytes one sample takes in a batch.
    pub fn sample_bytes(&self) -> usize {
        self.shape.len() * self.output.bytes_per_value()
    }

    /// Runs the steps on `view` (a lent image, interleaved HWC or planar
    /// CHW; its label is not read) with the random stream of (`seed`,
    /// `epoch`, `key`) and collates the result into `out`
    /// (`sample_bytes()` long).
    pub fn write(
        &self,
        view: SampleView<'_>,
        (seed, epoch, key): (u64, u64, u64),
        out: &mut [u8],
        buf: &mut StepScratch,
    ) -> Result<(), AdaptError> {
        let fixed = self.input.height > 0 && self.input.width > 0;
        if fixed && view.shape != self.input {
            return Err(PipelineError::Option(format!(
                "a sample of {}, the first was {}: the steps need samples of one size \
                 (or a first step that fixes it)",
                view.shape, self.input
            ))
            .into());
        }
        view.validate().map_err(|e| sample_error(key, e))?;
        // The loader's own path: the caller's array is a lent sample.
        let rng = SampleRng::new(seed, epoch, key);
        let (view, geometry) = transform_read(
            &self.compose,
            Read::Lent(view),
            rng,
            &mut buf.sample,
            &mut buf.scratch,
        )
        .map_err(|e| sample_error(key, e))?;
        let (output, normalize, shape) = (self.output, &self.normalize, self.shape);
        collate_sample(output, normalize, shape, view, geometry, &mut buf.row, out)
            .map_err(|e| sample_error(key, e))?;
        Ok(())
    }
}

fn sample_error(key: u64, e: adapt_dataset::Error) -> AdaptError {
    PipelineError::Sample {
        index: key as usize,
        origin: "a Python sample".into(),
        source: e,
    }
    .into()
}
