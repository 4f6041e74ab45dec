//! The per-worker scratch space every step call reuses: a spare pixel
//! buffer, the sample's random stream and the resizer's state.

use crate::SampleRng;
use fast_image_resize as fr;
use std::fmt;

/// Per-worker scratch space reused by every transform call.
#[derive(Default)]
pub struct Scratch {
    /// A spare pixel buffer (swapped with the sample's when a transform
    /// cannot work in place).
    pub bytes: Vec<u8>,
    /// The random stream of the sample being transformed, seeded by the
    /// caller before each sample (the loader: from seed, epoch and the
    /// sample's draw key). Random steps draw from it in pipeline order.
    pub rng: SampleRng,
    pub(crate) resizer: Option<fr::Resizer>,
}

impl Scratch {
    /// Empty scratch space whose random stream is `rng`.
    pub fn with_rng(rng: SampleRng) -> Self {
        Self {
            rng,
            ..Self::default()
        }
    }
}

impl fmt::Debug for Scratch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scratch")
            .field("bytes", &self.bytes.len())
            .finish_non_exhaustive()
    }
}
