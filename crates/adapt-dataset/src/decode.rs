//! The seam for reduced-scale decoding: a decoder that can decode an
//! encoded image at a smaller DCT scale (implemented in `adapt-formats`;
//! `adapt-transform` decides when to use it).

use crate::{Error, Sample};

/// A decoder that can decode at a reduced scale. Implemented where the
/// decoders live (`adapt-formats`); this crate does no I/O and no decoding.
pub trait ScaledDecode: Send + Sync + std::fmt::Debug {
    /// The (width, height) of the encoded image, from its header.
    fn dimensions(&self, bytes: &[u8]) -> Result<(u32, u32), Error>;

    /// Decodes `bytes` as interleaved RGB into `out` (label untouched): at
    /// the smallest scale whose size is at least `min` (width, height) on
    /// both axes, or at full size when `min` is `None`, when no reduction
    /// fits, or when the format cannot scale (PNG).
    fn decode(&self, bytes: &[u8], min: Option<(u32, u32)>, out: &mut Sample) -> Result<(), Error>;
}
