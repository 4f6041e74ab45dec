//! One sample as a pipeline yields it in an epoch, before collation: what
//! `inspect` prints, to check readers and steps against any other tool.

use crate::AdaptError;
use adapt_dataset::Sample;
use adapt_pipeline::Pipeline;

/// A sample and where it came from.
pub struct Inspected {
    /// The pixels after every step (normalisation is collation's), and the label.
    pub sample: Sample,
    /// The reader's provenance (file and record).
    pub source: String,
    /// For a pack, the sample's index in the source it was packed from.
    pub origin: Option<usize>,
    /// The steps' canonical text form.
    pub transforms: String,
    /// The sample's text (caption), where the data was opened with a text
    /// field.
    pub text: Option<String>,
}

/// Sample `index` of `pipeline` in `epoch` under `seed`: what a loader with
/// this seed batches, whatever its knobs.
pub fn inspect(
    pipeline: &Pipeline,
    index: usize,
    epoch: u64,
    seed: u64,
) -> Result<Inspected, AdaptError> {
    let built = pipeline.build()?;
    let sample = built.sample(index, epoch, seed)?;
    let origin =
        match &built.opened.pack {
            Some(pack) => Some(pack.origin(index).map_err(|source| {
                adapt_pipeline::PipelineError::Sample {
                    index,
                    origin: built.opened.dataset.source(index),
                    source,
                }
            })?),
            None => None,
        };
    let text = crate::data::texts_of(&*built.opened.dataset, &[index])?.and_then(|mut t| t.pop());
    Ok(Inspected {
        text,
        sample,
        source: built.opened.dataset.source(index),
        origin,
        transforms: built.transforms_text(),
    })
}
