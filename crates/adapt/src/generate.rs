//! Synthetic datasets in the real on-disk layouts, sized by a sample count
//! (what `gen` and the benches ask for).

use crate::AdaptError;
use adapt_pipeline::{FormatName, or_list};
use adapt_synth::{CelebASpec, Cifar10Spec, DigiFaceSpec, ImageFolderSpec, SynthError};
use std::path::Path;

/// How a request's count sizes a layout.
#[derive(Clone, Copy, Debug)]
enum Sizing {
    /// Training records, the test split a fifth.
    Cifar10,
    /// Images, one identity per 20.
    CelebA,
    /// Whole classes of 50 images.
    DigiFace,
    /// Class folders of JPEGs (`size`, `classes`).
    Images,
}

/// A synthetic writer: the request, the folder, the progress counter.
type WriteFn = fn(&Request, &Path, adapt_synth::Progress<'_>) -> Result<(), SynthError>;

/// One format `gen` writes: its images, sizing and synthetic writer.
struct Writer {
    name: &'static str,
    what: &'static str,
    sizing: Sizing,
    write: WriteFn,
}

/// The formats `gen` writes, in the real layouts.
const WRITERS: &[Writer] = &[
    Writer {
        name: "cifar10",
        what: "CIFAR-10 records",
        sizing: Sizing::Cifar10,
        write: |r, out, p| adapt_synth::cifar10(out, r.cifar10(), p),
    },
    Writer {
        name: "cifar100",
        what: "CIFAR-100 records (torchvision's pickles)",
        sizing: Sizing::Cifar10,
        write: |r, out, p| adapt_synth::cifar100(out, r.cifar10(), p),
    },
    Writer {
        name: "celeba",
        what: "CelebA images",
        sizing: Sizing::CelebA,
        write: |r, out, p| adapt_synth::celeba(out, r.celeba(), p),
    },
    Writer {
        name: "digiface",
        what: "DigiFace1M images",
        sizing: Sizing::DigiFace,
        write: |r, out, p| adapt_synth::digiface(out, r.digiface(), p),
    },
    Writer {
        name: "imagefolder",
        what: "JPEGs in class folders",
        sizing: Sizing::Images,
        write: |r, out, p| adapt_synth::imagefolder(out, r.imagefolder(), p),
    },
    Writer {
        name: "webdataset",
        what: "JPEGs in WebDataset shards",
        sizing: Sizing::Images,
        write: |r, out, p| adapt_synth::webdataset(out, r.imagefolder(), p),
    },
    Writer {
        name: "parquet",
        what: "JPEGs in Hugging Face Parquet",
        sizing: Sizing::Images,
        write: |r, out, p| adapt_synth::parquet(out, r.imagefolder(), p),
    },
    Writer {
        name: "arrow",
        what: "JPEGs in a Hugging Face save_to_disk folder",
        sizing: Sizing::Images,
        write: |r, out, p| adapt_synth::arrow(out, r.imagefolder(), p),
    },
];

/// The formats `gen` writes, as a sentence lists them.
pub fn generated() -> String {
    or_list(&WRITERS.iter().map(|w| w.name).collect::<Vec<_>>())
}

/// `gen --dataset`'s help: the formats it writes.
pub fn dataset_help() -> String {
    format!(
        "The layout to write: {}. imagefolder writes class folders of JPEGs (ImageNet-like by \
         default; --size 1024x768 for camera-sized photos); the shard and file layouts hold the \
         same JPEGs with the same flags (1000 samples per tar shard, `cls` labels; \
         data/train-*.parquet of 1000 rows; arrow: a save_to_disk folder)",
        generated()
    )
}

/// `name` as a format `gen` writes (the `--dataset` parser).
pub fn parse_generated(name: &str) -> Result<FormatName, String> {
    let format: FormatName = name.parse().map_err(|e| format!("{e}"))?;
    match writer(format) {
        Ok(_) => Ok(format),
        Err(e) => Err(e.to_string()),
    }
}

/// The writer of `format`, or an error naming those there are.
fn writer(format: FormatName) -> Result<&'static Writer, AdaptError> {
    WRITERS.iter().find(|w| format == w.name).ok_or_else(|| {
        AdaptError::Option(format!(
            "gen writes {}; {format} has no synthetic writer",
            generated()
        ))
    })
}

/// What to generate.
#[derive(Clone, Debug)]
pub struct Request {
    /// The layout (one `gen` writes: [`generated`]).
    pub kind: FormatName,
    /// Images; `None` for the layout's default size. CIFAR-10: training
    /// records (the test split gets a fifth); CelebA: images, one identity
    /// per 20; DigiFace1M and image folders: rounded up to whole classes.
    pub count: Option<usize>,
    /// Seed of every image and label.
    pub seed: u64,
    /// Image folders (and WebDataset shards or Parquet of the same
    /// images): typical (width, height).
    pub size: Option<(u32, u32)>,
    /// Image folders: class folders.
    pub classes: Option<usize>,
}

impl Request {
    /// The layout's default size with `seed`.
    pub fn new(kind: impl Into<FormatName>, seed: u64) -> Self {
        Self {
            kind: kind.into(),
            count: None,
            seed,
            size: None,
            classes: None,
        }
    }

    /// Images this request writes (0 for a format `gen` does not write).
    pub fn total(&self) -> usize {
        let Ok(w) = writer(self.kind) else { return 0 };
        match w.sizing {
            Sizing::Cifar10 => {
                let s = self.cifar10();
                s.train + s.test
            }
            Sizing::CelebA => self.celeba().count,
            Sizing::DigiFace => {
                let s = self.digiface();
                s.classes * s.per_class
            }
            Sizing::Images => {
                let s = self.imagefolder();
                s.classes * s.per_class
            }
        }
    }

    /// What the images are, for a summary line.
    pub fn what(&self) -> &'static str {
        writer(self.kind).map_or("samples", |w| w.what)
    }

    fn cifar10(&self) -> Cifar10Spec {
        match self.count {
            Some(n) => Cifar10Spec {
                train: n,
                test: (n / 5).max(1),
                seed: self.seed,
            },
            None => Cifar10Spec {
                seed: self.seed,
                ..Cifar10Spec::default()
            },
        }
    }

    /// CelebA's spec: `count` images of one identity per 20.
    pub fn celeba(&self) -> CelebASpec {
        let mut spec = CelebASpec {
            seed: self.seed,
            ..CelebASpec::default()
        };
        if let Some(n) = self.count {
            spec.count = n;
            spec.identities = (n / 20).max(1);
        }
        spec
    }

    fn digiface(&self) -> DigiFaceSpec {
        let mut spec = DigiFaceSpec {
            seed: self.seed,
            ..DigiFaceSpec::default()
        };
        if let Some(n) = self.count {
            spec.classes = n.div_ceil(spec.per_class).max(1);
        }
        spec
    }

    fn imagefolder(&self) -> ImageFolderSpec {
        let mut spec = ImageFolderSpec {
            seed: self.seed,
            ..ImageFolderSpec::default()
        };
        if let Some(c) = self.classes {
            spec.classes = c;
        }
        if let Some((w, h)) = self.size {
            (spec.width, spec.height) = (w, h);
        }
        if let Some(n) = self.count {
            spec.per_class = n.div_ceil(spec.classes.max(1)).max(1);
        }
        spec
    }
}

/// Writes the dataset `request` describes into `out`; `progress` counts
/// images written. Returns the number written.
pub fn generate(
    request: &Request,
    out: &Path,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<usize, AdaptError> {
    let w = writer(request.kind)?;
    refuse_non_empty(out)?;
    (w.write)(request, out, progress)?;
    Ok(request.total())
}

/// Generation writes a new or empty folder: over an existing dataset with
/// more samples, the old extra files would stay and the result would have
/// the old count; and a folder that is not a dataset is not ours to clear.
fn refuse_non_empty(out: &Path) -> Result<(), AdaptError> {
    let entries = match std::fs::read_dir(out) {
        Ok(rd) => rd.count(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(AdaptError::Io {
                path: out.to_owned(),
                source,
            });
        }
    };
    if entries == 0 {
        return Ok(());
    }
    Err(AdaptError::Io {
        path: out.to_owned(),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!(
                "holds {entries} entries: gen writes a new or empty folder (remove this one, or \
                 choose another --out)"
            ),
        ),
    })
}
