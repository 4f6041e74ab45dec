//! Decoding into a reused sample buffer, encoding, and atomic file writes.

use crate::FormatError;
use adapt_dataset::{Layout, Sample, Shape};
use adapt_transform::ToRgb;
use image::{ColorType, DynamicImage, ExtendedColorType, ImageDecoder, ImageEncoder, ImageReader};
use std::cell::RefCell;
use std::io::{Cursor, Read, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};

thread_local! {
    /// Encoded bytes of the file being decoded, reused per thread so a
    /// worker does not allocate a read buffer per image.
    static FILE_BYTES: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Reads the image file at `path` and decodes it as RGB into `out` (pixels,
/// shape, interleaved layout), reusing `out`'s buffer. Grey, grey+alpha,
/// RGBA, palette and 16-bit images are converted to 8-bit RGB as PIL's
/// `convert('RGB')` does. The label is left untouched.
pub fn read_rgb_into(path: &Path, out: &mut Sample) -> Result<(), FormatError> {
    decode_filled(path, out, |bytes| {
        open_regular(path)?
            .read_to_end(bytes)
            .map(drop)
            .map_err(FormatError::io(path))
    })
}

/// Decodes as [`decode_rgb_into`] the bytes `fill` writes into this
/// thread's reused read buffer (cleared first): a reader that fetches an
/// image from elsewhere (a tar member) allocates nothing per image.
pub(crate) fn decode_filled(
    path: &Path,
    out: &mut Sample,
    fill: impl FnOnce(&mut Vec<u8>) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    FILE_BYTES.with_borrow_mut(|bytes| {
        bytes.clear();
        fill(bytes)?;
        decode_rgb_into(path, bytes, out)
    })
}

/// Opens `path` for reading only if it is a regular file (after following
/// links): a FIFO would block the reader forever, a device or a folder give
/// misleading errors. The check comes before the open, which a FIFO blocks.
pub fn open_regular(path: &Path) -> Result<std::fs::File, FormatError> {
    let meta = std::fs::metadata(path).map_err(FormatError::io(path))?;
    if !meta.is_file() {
        return Err(FormatError::NotAFile {
            path: path.to_owned(),
            kind: file_kind(&meta),
        });
    }
    std::fs::File::open(path).map_err(FormatError::io(path))
}

fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "a folder"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() || t.is_block_device() {
        "a device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The bytes of an image file, as `Dataset::encoded` returns them.
pub(crate) fn read_file(path: &Path) -> Result<Vec<u8>, FormatError> {
    let mut bytes = Vec::new();
    open_regular(path)?
        .read_to_end(&mut bytes)
        .map_err(FormatError::io(path))?;
    Ok(bytes)
}

/// Bounds on what one image may decode to: a small file may declare a huge
/// size (a decompression bomb: an 855-byte PNG of 100000×100000 pixels).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest width or height accepted.
    pub max_side: u32,
    /// Largest decoded size in bytes.
    pub max_bytes: u64,
}

impl Default for DecodeLimits {
    /// 16384 pixels a side and 256 MiB decoded (a 9000×9000 RGB photo fits).
    fn default() -> Self {
        Self {
            max_side: 16_384,
            max_bytes: 256 << 20,
        }
    }
}

static LIMITS: std::sync::RwLock<DecodeLimits> = std::sync::RwLock::new(DecodeLimits {
    max_side: 16_384,
    max_bytes: 256 << 20,
});

/// Sets the bounds every reader decodes under (process-wide).
pub fn set_decode_limits(limits: DecodeLimits) {
    *LIMITS.write().unwrap_or_else(|p| p.into_inner()) = limits;
}

/// The bounds in force.
pub fn decode_limits() -> DecodeLimits {
    *LIMITS.read().unwrap_or_else(|p| p.into_inner())
}

/// Whether decoding also checks a JPEG's scans (`check_whole`): 0 not yet
/// read from `ADAPT_STRICT_DECODE`, 1 no, 2 yes.
static STRICT: AtomicU8 = AtomicU8::new(0);

/// Whether decoding checks that a JPEG's data holds all its blocks, not
/// only that it ends with its end marker. On unless `ADAPT_STRICT_DECODE=0`
/// (or [`set_strict_decode`]`(false)`). The check reads every block's
/// Huffman codes, which costs about what the decoder's own entropy decoding
/// does (+6-13% of a photo's decode time, +15-40% of a small synthetic
/// JPEG's, measured), so it runs once per image: the bytes found whole are
/// remembered by their xxh3 (`checked_once`), and later epochs pay only the
/// hash.
pub fn strict_decode() -> bool {
    match STRICT.load(Ordering::Relaxed) {
        0 => {
            let off = std::env::var("ADAPT_STRICT_DECODE")
                .is_ok_and(|v| matches!(v.trim(), "0" | "false" | "no" | "off"));
            STRICT.store(if off { 1 } else { 2 }, Ordering::Relaxed);
            !off
        }
        state => state == 2,
    }
}

/// Sets [`strict_decode`] for the process.
pub fn set_strict_decode(on: bool) {
    STRICT.store(if on { 2 } else { 1 }, Ordering::Relaxed);
}

/// Refuses an encoded image that is not whole, without decoding it: a
/// JPEG without its end marker, or one whose data ends before its last
/// block (cut short and closed with an end marker, which the decoder would
/// fill with grey). Huffman JPEGs, sequential and progressive, are checked
/// block by block; other formats as far as their decoder checks.
pub fn check_whole(path: &Path, bytes: &[u8]) -> Result<(), FormatError> {
    if image::guess_format(bytes).ok() != Some(image::ImageFormat::Jpeg) {
        return Ok(());
    }
    jpeg_whole(bytes, true).map_err(|message| FormatError::Decode {
        path: path.to_owned(),
        message,
    })
}

/// Decodes an encoded sample and applies its fixed steps (as the reader of
/// its format would): RGB, shape check, crop. `path` names it in errors.
/// This is a pack's record, [`check_whole`]d when it was written and
/// checksummed since, so its scans are not read again (its end marker is).
pub fn decode_encoded_into(
    path: &Path,
    bytes: &[u8],
    steps: adapt_dataset::FixedSteps,
    out: &mut Sample,
) -> Result<(), FormatError> {
    decode_rgb(path, bytes, false, out)?;
    if let Some(expected) = steps.expect
        && out.shape != expected
    {
        return Err(FormatError::UnexpectedShape {
            path: path.to_owned(),
            expected,
            got: out.shape,
        });
    }
    if let Some(b) = steps.crop {
        use adapt_transform::Transform;
        adapt_transform::Crop(b)
            .apply(out, &mut adapt_transform::Scratch::default())
            .map_err(|source| FormatError::Transform {
                path: path.to_owned(),
                source,
            })?;
    }
    Ok(())
}

/// Decodes encoded image `bytes` (JPEG or PNG) as RGB into `out`; `path` only
/// names the image in errors. A JPEG must be whole: its end marker, and
/// under [`strict_decode`] (the default) every block, read once per image.
pub fn decode_rgb_into(path: &Path, bytes: &[u8], out: &mut Sample) -> Result<(), FormatError> {
    decode_rgb(path, bytes, strict_decode(), out)
}

/// [`decode_rgb_into`], with a JPEG's scans read (once per image) or not.
fn decode_rgb(path: &Path, bytes: &[u8], scans: bool, out: &mut Sample) -> Result<(), FormatError> {
    adapt_dataset::stage::mark(adapt_dataset::stage::Stage::Decode);
    let err = |e: image::ImageError| FormatError::Decode {
        path: path.to_owned(),
        message: e.to_string(),
    };
    let format = image::guess_format(bytes).map_err(err)?;
    if format == image::ImageFormat::Jpeg
        && let Err(message) = jpeg_decodable(bytes, scans)
    {
        return Err(FormatError::Decode {
            path: path.to_owned(),
            message,
        });
    }
    let bounds = decode_limits();
    let mut limits = image::Limits::default();
    limits.max_image_width = Some(bounds.max_side);
    limits.max_image_height = Some(bounds.max_side);
    limits.max_alloc = Some(bounds.max_bytes);
    let mut reader = ImageReader::with_format(Cursor::new(bytes), format);
    reader.limits(limits);
    let decoder = reader.into_decoder().map_err(err)?;
    let (width, height) = decoder.dimensions();
    let color = decoder.color_type();
    if width > bounds.max_side
        || height > bounds.max_side
        || decoder.total_bytes() > bounds.max_bytes
    {
        return Err(FormatError::TooLarge {
            path: path.to_owned(),
            width,
            height,
            limits: bounds,
        });
    }
    match color {
        ColorType::L8 | ColorType::La8 | ColorType::Rgb8 | ColorType::Rgba8 => {
            let n = usize::try_from(decoder.total_bytes()).map_err(|_| FormatError::Decode {
                path: path.to_owned(),
                message: "image too large".into(),
            })?;
            // The decoder writes every byte: only a buffer that grows is
            // zeroed (its new part), not the whole image each time.
            out.pixels.truncate(n);
            out.pixels.resize(n, 0);
            decoder.read_image(&mut out.pixels).map_err(err)?;
            ToRgb::convert_in_place(&mut out.pixels, u32::from(color.channel_count())).map_err(
                |source| FormatError::Transform {
                    path: path.to_owned(),
                    source,
                },
            )?;
        }
        _ => {
            // Rare (16-bit, float): let `image` convert, at the cost of an
            // allocation.
            out.pixels = DynamicImage::from_decoder(decoder)
                .map_err(err)?
                .to_rgb8()
                .into_raw();
        }
    }
    out.shape = Shape::new(height, width, 3);
    out.layout = Layout::Interleaved;
    Ok(())
}

/// Whether a JPEG stream is whole, or what shows it is not: the decoder
/// fills a truncated scan with grey and reports success, where PIL raises
/// "image file is truncated" for a file without its end marker and libjpeg
/// warns "premature end of data segment" for one cut and closed with it.
/// Both are errors here; the second only with `scans` (it reads every
/// block's codes, see [`check_whole`]).
pub(crate) fn jpeg_whole(bytes: &[u8], scans: bool) -> Result<(), String> {
    if !jpeg_has_end_marker(bytes) {
        return Err("truncated JPEG (no end-of-image marker)".into());
    }
    if !scans {
        return Ok(());
    }
    match crate::jpeg_scan::check(bytes) {
        crate::jpeg_scan::Scan::Short { blocks, expected } => Err(format!(
            "truncated JPEG: its data ends after {blocks} of its {expected} blocks (premature end of data, then an end marker)"
        )),
        crate::jpeg_scan::Scan::CutSegment => Err(
            "truncated JPEG: a marker segment runs past the end of its data, then an end marker"
                .into(),
        ),
        crate::jpeg_scan::Scan::Complete | crate::jpeg_scan::Scan::Unchecked => Ok(()),
    }
}

/// What a decode checks of a JPEG before decoding it: its end marker, and
/// with `scans` its blocks, once per distinct image.
pub(crate) fn jpeg_decodable(bytes: &[u8], scans: bool) -> Result<(), String> {
    jpeg_whole(bytes, false)?;
    if !scans {
        return Ok(());
    }
    crate::checked_once::once(bytes, || jpeg_whole(bytes, true))
}

/// Whether a JPEG stream ends with its end-of-image marker (`FF D9`), allowing
/// a little padding after it. Inside entropy-coded data `FF` is always
/// followed by `00` or a restart marker, so `FF D9` near the end is the EOI.
fn jpeg_has_end_marker(bytes: &[u8]) -> bool {
    bytes[bytes.len().saturating_sub(64)..]
        .windows(2)
        .any(|w| w == [0xFF, 0xD9])
}

/// Encodes interleaved RGB pixels as a baseline JPEG of the given quality.
pub fn encode_jpeg(
    path: &Path,
    rgb: &[u8],
    width: u32,
    height: u32,
    quality: u8,
) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode(rgb, width, height, ExtendedColorType::Rgb8)
        .map_err(|e| FormatError::Encode {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(out)
}

/// Encodes interleaved pixels of 1 to 4 channels (grey, grey+alpha, RGB,
/// RGBA) as PNG.
pub fn encode_png(
    path: &Path,
    pixels: &[u8],
    width: u32,
    height: u32,
    channels: u32,
) -> Result<Vec<u8>, FormatError> {
    let color = match channels {
        1 => ExtendedColorType::L8,
        2 => ExtendedColorType::La8,
        3 => ExtendedColorType::Rgb8,
        4 => ExtendedColorType::Rgba8,
        _ => {
            return Err(FormatError::InvalidInput {
                path: path.to_owned(),
                reason: format!("PNG of {channels} channels"),
            });
        }
    };
    let mut out = Vec::new();
    image::codecs::png::PngEncoder::new(&mut out)
        .write_image(pixels, width, height, color)
        .map_err(|e| FormatError::Encode {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
    Ok(out)
}

/// Writes a file through a temporary name in the same folder, then renames
/// it, so an interrupted writer never leaves a complete-looking, truncated
/// file behind.
pub fn write_atomically(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), FormatError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = std::path::PathBuf::from(tmp);
    let result = (|| {
        let file = std::fs::File::create(&tmp)?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        write(&mut w)?;
        w.flush()?;
        drop(w);
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|source| {
        let _ = std::fs::remove_file(&tmp);
        FormatError::Io {
            path: path.to_owned(),
            source,
        }
    })
}

/// The image of a row that stores only its `path`, as `datasets` stores
/// images it was given as files (in Parquet and Arrow files alike): the
/// file at `path`, taken relative to the folder of the data file `data`
/// (where it is found there) or else as written (the working directory,
/// as `datasets` opens it); at most [`MAX_MEMBER_BYTES`](crate::MAX_MEMBER_BYTES).
#[cfg(feature = "parquet")]
pub(crate) fn image_beside(data: &std::path::Path, path: &[u8]) -> Result<Vec<u8>, String> {
    use crate::MAX_MEMBER_BYTES;
    let path = std::str::from_utf8(path).map_err(|_| "the image path is not UTF-8".to_owned())?;
    let beside = data.parent().map(|d| d.join(path));
    let file = match beside.filter(|p| p.is_file()) {
        Some(p) => p,
        None => std::path::PathBuf::from(path),
    };
    let handle = open_regular(&file).map_err(|e| format!("the image path {path:?}: {e}"))?;
    let len = handle
        .metadata()
        .map_err(|e| format!("{}: {e}", file.display()))?
        .len();
    if len > MAX_MEMBER_BYTES {
        return Err(format!(
            "{}: an image of {len} bytes, past the {MAX_MEMBER_BYTES}-byte bound",
            file.display()
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(&handle, len), &mut bytes)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(bytes)
}
