//! The image steps of a pipeline, with torchvision's names and semantics
//! (`RandomCrop` with padding modes, `CenterCrop`, `RandomFlip`,
//! `RandomResizedCrop`, `ResizeShorter`, `ColorJitter`, plus `Crop`, `ToRgb`,
//! `Resize`), their composition ([`Compose`]) with crops and flips deferred
//! into collation ([`Geometry`]), reduced-scale decoding driven by the first
//! step, the collation writers ([`Normalize`]: u8 → normalised f32 CHW,
//! [`write_u8`]: u8 CHW/HWC), the per-sample random stream ([`SampleRng`])
//! and [`Mapped`] (a dataset through a transform).
//!
//! It is not a reader and not a loader: it works on one decoded
//! [`Sample`] at a time, in the caller's thread,
//! reusing the caller's [`Scratch`]. The key rule is that a random step draws
//! only from the scratch's rng, seeded from (seed, epoch, draw key), so a
//! sample's pixels depend on nothing else.
//!
//! ```
//! use adapt_transform::{Compose, Normalize, RandomFlip, Scratch, Transform};
//! let mut sample = adapt_dataset::Sample::hwc(vec![255; 2 * 2 * 3], 2, 2, 3, 0).unwrap();
//! Compose(vec![Box::new(RandomFlip::horizontal(1.0).unwrap())]).apply(&mut sample, &mut Scratch::default()).unwrap();
//! let mut out = vec![0.0f32; 12];
//! Normalize::new(&[0.5; 3], &[0.5; 3]).unwrap().write_chw(sample.view(), &mut out).unwrap();
//! assert!(out.iter().all(|&v| v == 1.0));
//! ```

// Module order: testing → rng → scratch → pixels → geometry → step → steps → decode →
// compose → collate → mapped. Each uses only those before it (checked by
// xtask's tidy test).
mod collate;
mod compose;
mod decode;
mod geometry;
mod mapped;
mod pixels;
mod rng;
mod scratch;
mod step;
mod steps;
#[cfg(test)]
mod testing;

pub use collate::{Normalize, write_u8};
pub use compose::Compose;
pub use decode::decode_exact;
pub use geometry::Geometry;
pub use mapped::Mapped;
pub use pixels::{PaddingMode, flip_horizontal, flip_vertical};
pub use rng::SampleRng;
pub use scratch::Scratch;
pub use step::Transform;
pub use steps::{
    AutoAugment, AutoAugmentPolicy, CenterCrop, ColorJitter, Crop, EraseValue, Interpolation, Op,
    PolicyStep, RandAugment, RandomCrop, RandomErasing, RandomFlip, RandomResizedCrop, Region,
    Resize, ResizeFilter, ResizeShorter, ToRgb, TrivialAugmentWide, resize_region,
};

// The vocabulary the steps work on, under the names the modules use.
pub(crate) use adapt_dataset::{
    CropBox, Dataset, Encoded, Error, Layout, Read, Sample, SampleView, ScaledDecode, Shape,
};
