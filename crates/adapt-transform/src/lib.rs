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

mod augment;
mod decode;
mod geometry;
mod mapped;
mod normalize;
mod rng;
mod transform;

pub use augment::{
    CenterCrop, ColorJitter, PaddingMode, RandomCrop, RandomFlip, RandomResizedCrop, Region,
    ResizeShorter, flip_horizontal, flip_vertical, resize_region,
};
pub use decode::{apply_encoded_deferring, decode_exact};
pub use geometry::{Geometry, apply_deferring};
pub use mapped::Mapped;
pub use normalize::{Normalize, write_u8};
pub use rng::SampleRng;
pub use transform::{Compose, Crop, Resize, ResizeFilter, Scratch, ToRgb, Transform};

// The vocabulary the steps work on, under the names the modules use.
pub(crate) use adapt_dataset::{
    CropBox, Dataset, Encoded, Error, Layout, Read, Sample, SampleView, ScaledDecode, Shape,
};
