//! Seeded, photo-like synthetic datasets written in the real on-disk layouts
//! (CIFAR-10 binary batches, CelebA identity file + JPEGs, DigiFace1M class
//! folders of RGBA PNGs, image folders, WebDataset tar shards, Hugging Face
//! Parquet) through the
//! writers of `adapt-formats`. Nothing can
//! be downloaded on the machines adapt is built on; this is how the xtask,
//! tests and benches get data that the real readers read unchanged.
//!
//! This crate is not a data-augmentation library and does not aim at images
//! that look like faces to a person. Its key property is that content is
//! "photo-like" where it matters for timing: smooth gradients, soft-edged
//! shapes and per-pixel noise, so JPEG and PNG decode costs are realistic
//! (a constant-colour image decodes several times faster than a photo).
//! Every image is a pure function of (seed, dataset, index), so generation
//! is parallel and deterministic.

mod paint;

pub use paint::{Painter, photo};

use adapt_formats::{
    CIFAR10_CLASSES, CelebAWriter, Cifar10, FormatError, IMAGE_BYTES, Split, WebDatasetWriter,
    write_batch, write_digiface_image, write_meta,
};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// Errors of the generators.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// A writer failed (the error names the file).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Sizes the layout cannot hold.
    #[error("{0}")]
    InvalidArgument(String),
    /// A folder could not be created.
    #[error("{path}: {source}")]
    Io {
        /// The folder.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

/// Called with the number of items just finished (for a progress bar).
pub type Progress<'a> = &'a (dyn Fn(u64) + Sync);

/// A progress callback that does nothing.
pub fn no_progress(_: u64) {}

fn create_dir(dir: &Path) -> Result<(), SynthError> {
    std::fs::create_dir_all(dir).map_err(|source| SynthError::Io {
        path: dir.to_owned(),
        source,
    })
}

/// Sizes of a synthetic CIFAR-10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cifar10Spec {
    /// Training records, spread over the five batch files (at least 5).
    pub train: usize,
    /// Test records (at least 1).
    pub test: usize,
    /// Seed of every image and label.
    pub seed: u64,
}

impl Default for Cifar10Spec {
    /// Full size: 50,000 train and 10,000 test records.
    fn default() -> Self {
        Self {
            train: 50_000,
            test: 10_000,
            seed: 0,
        }
    }
}

/// Writes a CIFAR-10 binary layout into `dir`: `data_batch_{1..5}.bin`,
/// `test_batch.bin`, `batches.meta.txt`.
pub fn cifar10(dir: &Path, spec: Cifar10Spec, progress: Progress<'_>) -> Result<(), SynthError> {
    if spec.train < 5 || spec.test == 0 {
        return Err(SynthError::InvalidArgument(format!(
            "CIFAR-10 needs at least 5 training records (one per batch file) and 1 test record; got {} and {}",
            spec.train, spec.test
        )));
    }
    create_dir(dir)?;
    let mut files: Vec<(String, usize, usize)> = Vec::new();
    let (per, extra) = (spec.train / 5, spec.train % 5);
    let mut start = 0;
    for (i, name) in Split::Train.file_names().into_iter().enumerate() {
        let n = per + usize::from(i < extra);
        files.push((name, start, n));
        start += n;
    }
    // Test indices follow train indices so no two images share a seed.
    files.push(("test_batch.bin".into(), spec.train, spec.test));
    files.par_iter().try_for_each(|(name, start, n)| {
        let records = cifar_records(spec.seed, "cifar10", 10, *start..start + n, progress);
        write_batch(
            &dir.join(name),
            records.iter().map(|(l, px)| (*l, px.as_slice())),
        )
    })?;
    write_meta(dir, &CIFAR10_CLASSES)?;
    Ok(())
}

/// CIFAR records `indices` of `dataset` (its name seeds the painter):
/// (label below `classes`, 3072 planar bytes).
fn cifar_records(
    seed: u64,
    dataset: &str,
    classes: u64,
    indices: std::ops::Range<usize>,
    progress: Progress<'_>,
) -> Vec<(u8, Vec<u8>)> {
    indices
        .map(|i| {
            let mut p = Painter::new(seed, dataset, i as u64);
            let label = p.below(classes) as u8;
            let hwc = p.photo(32, 32, u64::from(label));
            progress(1);
            (label, hwc_to_planar(&hwc, 32 * 32))
        })
        .collect()
}

/// Writes CIFAR-100 as torchvision downloads it into `root`:
/// `cifar-100-python/{train,test,meta}`, pickles of the layout's own types
/// (as numpy and pickle write them at protocol 2), fine labels below 100.
pub fn cifar100(root: &Path, spec: Cifar10Spec, progress: Progress<'_>) -> Result<(), SynthError> {
    if spec.train == 0 || spec.test == 0 {
        return Err(SynthError::InvalidArgument(format!(
            "CIFAR-100 needs at least 1 training and 1 test record; got {} and {}",
            spec.train, spec.test
        )));
    }
    let dir = root.join("cifar-100-python");
    create_dir(&dir)?;
    let files = [("train", 0, spec.train), ("test", spec.train, spec.test)];
    files.par_iter().try_for_each(|(name, start, n)| {
        let records = cifar_records(spec.seed, "cifar100", 100, *start..start + n, progress);
        let records: Vec<(u8, &[u8])> = records.iter().map(|(l, px)| (*l, px.as_slice())).collect();
        adapt_formats::write_batch_pickle(&dir.join(name), true, &records)
    })?;
    let names: Vec<String> = (0..100).map(|c| format!("class_{c:02}")).collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    adapt_formats::write_meta_pickle(&dir, true, &names)?;
    Ok(())
}

/// Generates a CIFAR-10 layout in `dir` unless one with the spec's sizes is
/// already there and reads cleanly. Returns whether it generated.
pub fn ensure_cifar10(
    dir: &Path,
    spec: Cifar10Spec,
    progress: Progress<'_>,
) -> Result<bool, SynthError> {
    use adapt_dataset::Dataset;
    let complete = matches!(
        (Cifar10::open(dir, Split::Train), Cifar10::open(dir, Split::Test)),
        (Ok(tr), Ok(te)) if tr.len() == spec.train && te.len() == spec.test
    );
    if complete {
        return Ok(false);
    }
    cifar10(dir, spec, progress)?;
    Ok(true)
}

fn hwc_to_planar(hwc: &[u8], plane: usize) -> Vec<u8> {
    let mut out = vec![0; IMAGE_BYTES];
    for (i, px) in hwc.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * plane + i] = px[c];
        }
    }
    out
}

/// Sizes of a synthetic CelebA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CelebASpec {
    /// Number of images.
    pub count: usize,
    /// Number of identities (labels 1..=identities, as CelebA numbers them).
    pub identities: usize,
    /// JPEG quality.
    pub quality: u8,
    /// Seed.
    pub seed: u64,
}

impl Default for CelebASpec {
    /// 20,000 images of 1,000 identities (CelebA has about 20 per identity).
    fn default() -> Self {
        Self {
            count: 20_000,
            identities: 1_000,
            quality: 90,
            seed: 0,
        }
    }
}

/// Writes a CelebA (aligned) layout into `root`: 178×218 JPEGs in
/// `img_align_celeba/` and `identity_CelebA.txt`.
pub fn celeba(root: &Path, spec: CelebASpec, progress: Progress<'_>) -> Result<(), SynthError> {
    if spec.count == 0 || spec.identities == 0 || !(1..=100).contains(&spec.quality) {
        return Err(SynthError::InvalidArgument(format!(
            "CelebA needs at least one image and one identity and a JPEG quality in 1..=100; got {spec:?}"
        )));
    }
    let writer = CelebAWriter::create(root)?;
    let ids: Vec<(String, i64)> = (0..spec.count)
        .into_par_iter()
        .map(|i| {
            let mut p = Painter::new(spec.seed, "celeba", i as u64);
            let id = 1 + p.below(spec.identities as u64);
            let rgb = p.face(178, 218, id);
            let name = CelebAWriter::image_name(i + 1);
            writer.write_image(&name, &rgb, 178, 218, spec.quality)?;
            progress(1);
            Ok((name, id as i64))
        })
        .collect::<Result<_, SynthError>>()?;
    writer.write_identities(ids.iter().map(|(n, id)| (n.as_str(), *id)))?;
    Ok(())
}

/// Sizes of a synthetic DigiFace1M.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DigiFaceSpec {
    /// Number of class folders (0..classes).
    pub classes: usize,
    /// Images per class (0.png ..).
    pub per_class: usize,
    /// Seed.
    pub seed: u64,
}

impl Default for DigiFaceSpec {
    /// 200 classes × 50 images.
    fn default() -> Self {
        Self {
            classes: 200,
            per_class: 50,
            seed: 0,
        }
    }
}

/// Writes a DigiFace1M layout into `root`: `<class>/<n>.png`, 112×112 RGBA.
pub fn digiface(root: &Path, spec: DigiFaceSpec, progress: Progress<'_>) -> Result<(), SynthError> {
    if spec.classes == 0 || spec.per_class == 0 {
        return Err(SynthError::InvalidArgument(format!(
            "DigiFace1M needs at least one image; got {spec:?}"
        )));
    }
    create_dir(root)?;
    (0..spec.classes * spec.per_class)
        .into_par_iter()
        .try_for_each(|i| {
            let (class, n) = (i / spec.per_class, i % spec.per_class);
            let mut p = Painter::new(spec.seed, "digiface", i as u64);
            let rgb = p.face(112, 112, class as u64);
            // Rendered faces on a transparent background: alpha is opaque on
            // the face, partly transparent towards the corners.
            let mut rgba = Vec::with_capacity(112 * 112 * 4);
            for (j, px) in rgb.chunks_exact(3).enumerate() {
                let (x, y) = ((j % 112) as f32 - 55.5, (j / 112) as f32 - 55.5);
                let r = (x * x + y * y).sqrt() / 79.0;
                rgba.extend_from_slice(px);
                rgba.push((255.0 * (1.4 - r).clamp(0.0, 1.0)) as u8);
            }
            write_digiface_image(root, class as u64, n as u64, &rgba, 112)?;
            progress(1);
            Ok(())
        })
}

/// Sizes of a synthetic class-per-folder JPEG set (ImageNet's training
/// layout: `<wnid>/<wnid>_<n>.JPEG`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageFolderSpec {
    /// Class folders.
    pub classes: usize,
    /// Images per class.
    pub per_class: usize,
    /// Typical width of a landscape image; each image varies it by up to
    /// −10%, and one in five is portrait (width and height swapped), as in
    /// ImageNet.
    pub width: u32,
    /// Typical height of a landscape image.
    pub height: u32,
    /// JPEG quality.
    pub quality: u8,
    /// Seed.
    pub seed: u64,
}

impl Default for ImageFolderSpec {
    /// ImageNet-like: 10 classes × 100 images of about 500×375, quality 90.
    fn default() -> Self {
        Self {
            classes: 10,
            per_class: 100,
            width: 500,
            height: 375,
            quality: 90,
            seed: 0,
        }
    }
}

/// Writes a class-per-folder JPEG set into `root` (readable by
/// [`adapt_formats::ImageFolder`] and torchvision's `ImageFolder`).
pub fn imagefolder(
    root: &Path,
    spec: ImageFolderSpec,
    progress: Progress<'_>,
) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    (0..spec.classes * spec.per_class)
        .into_par_iter()
        .try_for_each(|i| {
            let (class, n) = (i / spec.per_class, i % spec.per_class);
            let wnid = wnid(class);
            let dir = root.join(&wnid);
            create_dir(&dir)?;
            let path = dir.join(format!("{wnid}_{n}.JPEG"));
            let jpeg = folder_jpeg(&spec, i, &path)?;
            adapt_formats::write_atomically(&path, |out| out.write_all(&jpeg))?;
            progress(1);
            Ok(())
        })
}

fn check_folder_spec(spec: &ImageFolderSpec) -> Result<(), SynthError> {
    if spec.classes == 0
        || spec.per_class == 0
        || spec.width < 8
        || spec.height < 8
        || !(1..=100).contains(&spec.quality)
    {
        return Err(SynthError::InvalidArgument(format!(
            "an image folder needs classes and images, sides of at least 8 and a JPEG quality in 1..=100; got {spec:?}"
        )));
    }
    Ok(())
}

/// Class `class`'s folder name, ImageNet-like (`n01000000`).
fn wnid(class: usize) -> String {
    format!("n{:08}", 1_000_000 + class * 7_919)
}

/// Image `i` of an image folder (or of its WebDataset), encoded.
fn folder_jpeg(spec: &ImageFolderSpec, i: usize, path: &Path) -> Result<Vec<u8>, SynthError> {
    let class = i / spec.per_class;
    let mut p = Painter::new(spec.seed, "imagefolder", i as u64);
    let shrink = |v: u32, p: &mut Painter| v - p.below(u64::from(v / 10) + 1) as u32;
    let (mut w, mut h) = (shrink(spec.width, &mut p), shrink(spec.height, &mut p));
    if p.below(5) == 0 {
        std::mem::swap(&mut w, &mut h);
    }
    let rgb = p.photo(w, h, class as u64);
    Ok(adapt_formats::encode_jpeg(path, &rgb, w, h, spec.quality)?)
}

/// Samples per shard of a generated WebDataset.
pub const WEBDATASET_SHARD_SAMPLES: usize = 1000;

/// The same images as [`imagefolder`] with `spec` (byte for byte), as
/// WebDataset shards `root/train-NNNNNN.tar` of
/// [`WEBDATASET_SHARD_SAMPLES`] samples: members `WNID_N.jpg` and
/// `WNID_N.cls` (the class, as WebDataset's `TarWriter` writes it), in class
/// order.
pub fn webdataset(
    root: &Path,
    spec: ImageFolderSpec,
    progress: Progress<'_>,
) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    let mut writer = WebDatasetWriter::new(root, "train", WEBDATASET_SHARD_SAMPLES)?;
    in_chunks(&spec, root, WEBDATASET_SHARD_SAMPLES, |i, jpeg| {
        let class = i / spec.per_class;
        let cls = class.to_string();
        let key = format!("{}_{}", wnid(class), i % spec.per_class);
        writer.write(&key, &[("jpg", jpeg), ("cls", cls.as_bytes())])?;
        progress(1);
        Ok(())
    })?;
    writer.finish()?;
    Ok(())
}

/// Rows per file of a generated Parquet dataset (row groups of 100, as
/// `datasets` writes images).
pub const PARQUET_FILE_ROWS: usize = 1000;

/// The same images as [`imagefolder`] with `spec` (byte for byte), in the
/// Hugging Face layout: `root/data/train-IIIII-of-NNNNN.parquet` of
/// [`PARQUET_FILE_ROWS`] rows, an `image` column of `{bytes, path}`
/// (`WNID_N.jpg`) and a `ClassLabel` `label` named by the WNIDs, in class
/// order.
#[cfg(feature = "parquet")]
pub fn parquet(
    root: &Path,
    spec: ImageFolderSpec,
    progress: Progress<'_>,
) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    let options = adapt_formats::ParquetWriterOptions {
        rows_per_file: PARQUET_FILE_ROWS,
        rows_per_group: 100,
        class_names: Some((0..spec.classes).map(wnid).collect()),
    };
    let mut writer = adapt_formats::ParquetWriter::new(&root.join("data"), "train", options)?;
    hf_rows(&spec, root, progress, |jpeg, name, label| {
        Ok(writer.write(jpeg, Some(name), label)?)
    })?;
    writer.finish()?;
    Ok(())
}

/// The same images as [`imagefolder`] with `spec` (byte for byte), as
/// `datasets`' `save_to_disk` writes them: `root/data-00000-of-00001.arrow`
/// (record batches of 1,000 rows, an `image` column of `{bytes, path}`,
/// a `ClassLabel` `label` named by the WNIDs, in class order) beside
/// `state.json` and `dataset_info.json`.
#[cfg(feature = "parquet")]
pub fn arrow(root: &Path, spec: ImageFolderSpec, progress: Progress<'_>) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    let names = Some((0..spec.classes).map(wnid).collect());
    let mut writer = adapt_formats::ArrowWriter::new(root, PARQUET_FILE_ROWS, names)?;
    hf_rows(&spec, root, progress, |jpeg, name, label| {
        Ok(writer.write(jpeg, Some(name), label)?)
    })?;
    writer.finish()?;
    Ok(())
}

/// A build without the `parquet` feature (which writes Arrow too):
/// refused, naming it.
#[cfg(not(feature = "parquet"))]
pub fn arrow(root: &Path, spec: ImageFolderSpec, _: Progress<'_>) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    Err(FormatError::NotBuilt {
        path: root.to_owned(),
        format: "Arrow",
        feature: "parquet",
    }
    .into())
}

/// A build without the `parquet` feature: refused, naming it.
#[cfg(not(feature = "parquet"))]
pub fn parquet(root: &Path, spec: ImageFolderSpec, _: Progress<'_>) -> Result<(), SynthError> {
    check_folder_spec(&spec)?;
    Err(FormatError::not_built_parquet(root).into())
}

/// Calls `write` with each image of [`imagefolder`]'s (index, JPEG) in
/// order, encoding `chunk` at a time in parallel.
/// The image folder's images as Hugging Face rows (JPEG, `WNID_i.jpg`,
/// class), in order, each written by `write`.
#[cfg(feature = "parquet")]
fn hf_rows(
    spec: &ImageFolderSpec,
    root: &Path,
    progress: Progress<'_>,
    mut write: impl FnMut(&[u8], &str, i64) -> Result<(), SynthError>,
) -> Result<(), SynthError> {
    in_chunks(spec, root, PARQUET_FILE_ROWS, |i, jpeg| {
        let class = i / spec.per_class;
        write(
            jpeg,
            &format!("{}_{}.jpg", wnid(class), i % spec.per_class),
            class as i64,
        )?;
        progress(1);
        Ok(())
    })
}

fn in_chunks(
    spec: &ImageFolderSpec,
    root: &Path,
    chunk: usize,
    mut write: impl FnMut(usize, &[u8]) -> Result<(), SynthError>,
) -> Result<(), SynthError> {
    let total = spec.classes * spec.per_class;
    for start in (0..total).step_by(chunk) {
        let indices: Vec<usize> = (start..total.min(start + chunk)).collect();
        let jpegs: Vec<Vec<u8>> = indices
            .par_iter()
            .map(|&i| folder_jpeg(spec, i, &root.join(format!("{i}.jpg"))))
            .collect::<Result<_, _>>()?;
        for (&i, jpeg) in indices.iter().zip(&jpegs) {
            write(i, jpeg)?;
        }
    }
    Ok(())
}
