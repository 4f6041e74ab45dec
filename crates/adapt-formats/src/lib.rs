//! Readers (and, beside each, a writer) for the real on-disk layouts of the
//! datasets adapt loads: CIFAR-10's binary batches, CelebA (aligned) with its
//! identity file and fixed crop, DigiFace1M's class folders of RGBA PNGs, and
//! a generic class-per-folder image tree as torchvision's `ImageFolder`, and
//! WebDataset `.tar` shards read in place through a member index,
//! Parquet files in the Hugging Face layout read by row group, and
//! Hugging Face `datasets`' Arrow files, memory-mapped.
//!
//! Each reader implements [`adapt_dataset::Dataset`] and is meant to run
//! unchanged on the real datasets. A sample comes out after the format's own
//! fixed steps (CelebA's crop, DigiFace's RGBA→RGB) and before any
//! normalisation. Writers exist so that synthetic data (`adapt-synth`) and
//! tests produce exactly the real layout: write-then-read is one test.
//!
//! This crate is not for batching, shuffling or sharded packs; those are the
//! loader's and the pack crate's. Its key choice is to validate at open what
//! can be validated cheaply (file sizes, labels, identity lines, that every
//! listed image exists), so that a damaged dataset fails at once with the
//! file and record named, never mid-epoch or as a silently shorter dataset.

mod celeba;
mod checked_once;
mod cifar10;
mod cifar_pickles;
mod digiface;
mod error;
mod file_list;
#[cfg(feature = "parquet")]
mod hf_arrow;
mod image_io;
mod imagefolder;
mod jpeg_scan;
#[cfg(feature = "parquet")]
mod parquet;
mod parquet_options;
mod pickle;
mod scaled;
mod webdataset;

#[cfg(feature = "parquet")]
pub use self::parquet::{PARQUET_CACHE_BYTES, Parquet, ParquetWriter, ParquetWriterOptions};
pub use celeba::{
    CELEBA_CROP, CELEBA_IDENTITY_FILE, CELEBA_IMAGE_SHAPE, CelebA, CelebAOptions, CelebAWriter,
};
pub use cifar_pickles::{write_batch_pickle, write_meta_pickle};
pub use cifar10::{
    CIFAR10_CLASSES, Cifar10, Cifar100, IMAGE_BYTES, RECORD_BYTES, Split, write_batch, write_meta,
};
pub use digiface::{DIGIFACE_IMAGE_SIZE, DigiFace, DigiFaceOptions, write_digiface_image};
pub use error::FormatError;
pub use file_list::{MAX_SHARDS, expand_braces};
#[cfg(feature = "parquet")]
pub use hf_arrow::{ArrowFiles, ArrowWriter};
pub use image_io::{
    DecodeLimits, check_whole, decode_encoded_into, decode_limits, decode_rgb_into, encode_jpeg,
    encode_png, open_regular, set_decode_limits, set_strict_decode, strict_decode,
    write_atomically,
};
pub use imagefolder::{IMAGE_EXTENSIONS, ImageFolder};
#[cfg(feature = "parquet")]
use parquet_options::hf_class_names;
pub use parquet_options::{PARQUET_ENABLED, ParquetOptions};
pub use scaled::reduced_decoder;
pub use webdataset::{
    MAX_INDEX_CACHE_BYTES, MAX_MEMBER_BYTES, MAX_TEXT_BYTES, MAX_UNPACKED_SHARD_BYTES,
    WEBDATASET_IMAGE_EXTENSIONS, WebDataset, WebDatasetOptions, WebDatasetWriter, is_gzip_shard,
    shard_list, split_name,
};
