//! Reduced-scale JPEG decoding for pipelines whose first step shrinks the
//! image (`resize`, `random_resized_crop`): libjpeg-turbo inverts the DCT at
//! 1/2, 1/4 or 1/8 size, skipping most of the inverse transform, upsampling
//! and colour conversion, and the resize then reads 4–64× fewer pixels.
//! PNGs, JPEGs libjpeg-turbo cannot turn into RGB (CMYK) and requests no
//! reduction fits decode in full through [`decode_rgb_into`], exactly as the
//! readers do.
//!
//! Built with the `libjpeg-turbo` feature only (libjpeg-turbo's SIMD needs
//! `nasm` at build time); without it [`reduced_decoder`] is `None` and
//! pipelines decode in full. Measured on this project's synthetic JPEGs,
//! libjpeg-turbo at full scale is as fast as the `image` crate's decoder, so
//! the gain is the reduced scale alone (`docs/benchmarks.md`).

use adapt_dataset::ScaledDecode;
use std::sync::Arc;

/// The reduced-scale decoder, when this build has one.
pub fn reduced_decoder() -> Option<Arc<dyn ScaledDecode>> {
    #[cfg(feature = "libjpeg-turbo")]
    return Some(Arc::new(turbo::JpegScaled));
    #[cfg(not(feature = "libjpeg-turbo"))]
    return None;
}

#[cfg(feature = "libjpeg-turbo")]
mod turbo {
    use crate::{FormatError, decode_rgb_into};
    use adapt_dataset::{Error, Layout, Sample, ScaledDecode, Shape};
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use std::path::Path;

    /// libjpeg-turbo's scaled decoding (see the module doc).
    #[derive(Clone, Copy, Debug, Default)]
    pub(crate) struct JpegScaled;

    fn is_jpeg(bytes: &[u8]) -> bool {
        bytes.starts_with(&[0xFF, 0xD8, 0xFF])
    }

    fn decode_error(message: impl ToString) -> Error {
        Error::reader(FormatError::Decode {
            path: "encoded image".into(),
            message: message.to_string(),
        })
    }

    /// The size at DCT scale `eighths`/8, as libjpeg rounds it (up).
    fn scaled(len: u32, eighths: u32) -> u32 {
        (len * eighths).div_ceil(8)
    }

    fn full(bytes: &[u8], out: &mut Sample) -> Result<(), Error> {
        decode_rgb_into(Path::new("encoded image"), bytes, out).map_err(Error::reader)
    }

    /// libjpeg reports fatal errors by unwinding through the wrapper; they
    /// become decode errors here, never a panic in a worker.
    fn guarded<T>(f: impl FnOnce() -> std::io::Result<T>) -> Result<T, Error> {
        match catch_unwind(AssertUnwindSafe(f)) {
            Ok(r) => r.map_err(decode_error),
            Err(_) => Err(decode_error("libjpeg-turbo rejected the image")),
        }
    }

    impl ScaledDecode for JpegScaled {
        fn dimensions(&self, bytes: &[u8]) -> Result<(u32, u32), Error> {
            if is_jpeg(bytes) {
                let (w, h) = guarded(|| mozjpeg::Decompress::new_mem(bytes).map(|d| d.size()))?;
                return Ok((w as u32, h as u32));
            }
            let reader = image::ImageReader::new(std::io::Cursor::new(bytes))
                .with_guessed_format()
                .map_err(decode_error)?;
            reader.into_dimensions().map_err(decode_error)
        }

        fn decode(
            &self,
            bytes: &[u8],
            min: Option<(u32, u32)>,
            out: &mut Sample,
        ) -> Result<(), Error> {
            adapt_dataset::stage::mark(adapt_dataset::stage::Stage::Decode);
            let Some((min_w, min_h)) = min.filter(|_| is_jpeg(bytes)) else {
                return full(bytes, out);
            };
            crate::image_io::jpeg_decodable(bytes, crate::strict_decode()).map_err(decode_error)?;
            let (w, h) = self.dimensions(bytes)?;
            let limits = crate::decode_limits();
            if w > limits.max_side || h > limits.max_side {
                return Err(Error::reader(FormatError::TooLarge {
                    path: "encoded image".into(),
                    width: w,
                    height: h,
                    limits,
                }));
            }
            let Some(eighths) = [1, 2, 4]
                .into_iter()
                .find(|&e| scaled(w, e) >= min_w && scaled(h, e) >= min_h)
            else {
                return full(bytes, out);
            };
            let pixels = &mut out.pixels;
            let decoded = guarded(|| {
                let mut d = mozjpeg::Decompress::new_mem(bytes)?;
                d.scale(eighths as u8);
                let mut started = d.rgb()?;
                let (gw, gh) = (started.width(), started.height());
                pixels.clear();
                pixels.resize(gw * gh * 3, 0);
                started.read_scanlines_into::<u8>(pixels)?;
                started.finish()?;
                Ok((gw as u32, gh as u32))
            });
            match decoded {
                Ok((gw, gh)) if gw >= min_w && gh >= min_h => {
                    out.shape = Shape::new(gh, gw, 3);
                    out.layout = Layout::Interleaved;
                    Ok(())
                }
                // A colour space libjpeg-turbo cannot turn into RGB (CMYK),
                // or rounding left an axis short: the full path decides.
                _ => full(bytes, out),
            }
        }
    }
}
