//! CelebA (aligned and cropped faces): `identity_CelebA.txt`, one
//! `000001.jpg 2880` line per image, and the JPEGs (178×218) in
//! `img_align_celeba/`. Samples are in identity-file order; the label is the
//! identity number as written. Each image is cropped by the seed's box
//! (left 25, top 45, right 153, bottom 173 → 128×128) unless configured
//! otherwise.

use crate::image_io::{read_file, read_rgb_into};
use crate::{FormatError, encode_jpeg, write_atomically};
use adapt_dataset::{
    CropBox, Dataset, Encoded, Error, FixedSteps, Read, Sample, Shape, check_index,
};
use adapt_transform::{Crop, Scratch, Transform};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// The crop the seed applies to every CelebA image (PIL box order).
pub const CELEBA_CROP: CropBox = CropBox::new(25, 45, 153, 173);
/// Shape of an aligned CelebA image (218 rows × 178 columns, RGB).
pub const CELEBA_IMAGE_SHAPE: Shape = Shape::new(218, 178, 3);
/// The identity file's name in a CelebA folder.
pub const CELEBA_IDENTITY_FILE: &str = "identity_CelebA.txt";
const IMAGES: &str = "img_align_celeba";

/// How to read CelebA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CelebAOptions {
    /// The fixed crop; `None` keeps the whole 178×218 image.
    pub crop: Option<CropBox>,
}

impl Default for CelebAOptions {
    fn default() -> Self {
        Self {
            crop: Some(CELEBA_CROP),
        }
    }
}

struct Entry {
    name: Box<str>,
    label: i64,
}

/// The CelebA dataset as laid out on disk.
pub struct CelebA {
    images: PathBuf,
    entries: Vec<Entry>,
    crop: Option<Crop>,
    num_classes: usize,
}

impl CelebA {
    /// Opens `root` (the folder with `identity_CelebA.txt` and
    /// `img_align_celeba/`). Parses every identity line (LF or CRLF) and
    /// checks that each listed image exists.
    pub fn open(root: &Path, options: CelebAOptions) -> Result<Self, FormatError> {
        let id_path = root.join(CELEBA_IDENTITY_FILE);
        let images = root.join(IMAGES);
        if id_path.exists() {
            // A FIFO or a folder in its place: refused before it is opened.
            drop(crate::open_regular(&id_path)?);
        }
        let text = std::fs::read_to_string(&id_path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FormatError::Missing {
                path: id_path.clone(),
                what: "CelebA identity file",
            },
            _ => FormatError::Io {
                path: id_path.clone(),
                source: e,
            },
        })?;
        if !images.is_dir() {
            return Err(FormatError::Missing {
                path: images,
                what: "CelebA image folder",
            });
        }
        let present = list_names(&images)?;
        let mut entries = Vec::new();
        let lines: Vec<&str> = text
            .split('\n')
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .collect();
        // Trailing blank lines are the end of the file, not missing entries.
        let last = lines
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .map_or(0, |i| i + 1);
        for (i, line) in lines[..last].iter().enumerate() {
            let bad = |reason| FormatError::BadLine {
                path: id_path.clone(),
                line: i + 1,
                reason,
                content: (*line).into(),
            };
            let mut fields = line.split_ascii_whitespace();
            let (Some(name), Some(id), None) = (fields.next(), fields.next(), fields.next()) else {
                return Err(bad("expected `<image name> <identity>`"));
            };
            let label: i64 = id.parse().map_err(|_| bad("identity is not an integer"))?;
            if label < 0 {
                return Err(bad("identity is negative"));
            }
            if !present.contains(name) {
                return Err(FormatError::MissingImage {
                    path: id_path.clone(),
                    line: i + 1,
                    image: images.join(name),
                });
            }
            entries.push(Entry {
                name: name.into(),
                label,
            });
        }
        if entries.is_empty() {
            return Err(FormatError::Empty {
                path: id_path,
                what: "identity file lists no image",
            });
        }
        let num_classes = entries
            .iter()
            .map(|e| e.label)
            .max()
            .map_or(0, |m| m as usize + 1);
        Ok(Self {
            images,
            entries,
            crop: options.crop.map(Crop),
            num_classes,
        })
    }

    /// The path of image `index`.
    pub fn image_path(&self, index: usize) -> Result<PathBuf, Error> {
        check_index(index, self.entries.len())?;
        Ok(self.images.join(&*self.entries[index].name))
    }
}

/// The file names in a folder, read once (one `read_dir` is far cheaper than
/// one `stat` per identity line on 200k images).
fn list_names(dir: &Path) -> Result<HashSet<String>, FormatError> {
    let mut names = HashSet::new();
    for entry in std::fs::read_dir(dir).map_err(FormatError::io(dir))? {
        let entry = entry.map_err(FormatError::io(dir))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.insert(name);
        }
    }
    Ok(names)
}

impl Dataset for CelebA {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        let path = self.image_path(index)?;
        read_rgb_into(&path, out)?;
        if let Some(crop) = &self.crop {
            // Cropping an interleaved sample is in place: the scratch stays empty.
            crop.apply(out, &mut Scratch::default())
                .map_err(|source| FormatError::Transform { path, source })?;
        }
        out.label = self.entries[index].label;
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            let bytes = read_file(&self.image_path(index)?)?;
            let steps = FixedSteps {
                crop: self.crop.map(|c| c.0),
                expect: None,
            };
            Ok(Encoded {
                bytes,
                label: self.entries[index].label,
                steps,
            })
        };
        Some(read())
    }
    fn source(&self, index: usize) -> String {
        self.image_path(index)
            .map_or_else(|e| e.to_string(), |p| p.display().to_string())
    }
    fn sample_shape(&self) -> Option<Shape> {
        match &self.crop {
            Some(c) => c.output_shape(CELEBA_IMAGE_SHAPE).ok(),
            None => Some(CELEBA_IMAGE_SHAPE),
        }
    }
    fn num_classes(&self) -> Option<usize> {
        Some(self.num_classes)
    }
}

/// Writes a CelebA layout: JPEGs into `img_align_celeba/`, then the identity
/// file (written last, atomically, so a folder without it is incomplete).
pub struct CelebAWriter {
    root: PathBuf,
}

impl CelebAWriter {
    /// Creates `root/img_align_celeba/`.
    pub fn create(root: &Path) -> Result<Self, FormatError> {
        let images = root.join(IMAGES);
        std::fs::create_dir_all(&images).map_err(FormatError::io(&images))?;
        Ok(Self {
            root: root.to_owned(),
        })
    }

    /// The name of image number `n` (from 1), as CelebA numbers them.
    pub fn image_name(n: usize) -> String {
        format!("{n:06}.jpg")
    }

    /// Encodes and writes one RGB image as `img_align_celeba/<name>`.
    pub fn write_image(
        &self,
        name: &str,
        rgb: &[u8],
        width: u32,
        height: u32,
        quality: u8,
    ) -> Result<(), FormatError> {
        let path = self.root.join(IMAGES).join(name);
        let jpeg = encode_jpeg(&path, rgb, width, height, quality)?;
        write_atomically(&path, |w| w.write_all(&jpeg))
    }

    /// Writes `identity_CelebA.txt` with one `<name> <identity>` line each.
    pub fn write_identities<'a>(
        &self,
        entries: impl IntoIterator<Item = (&'a str, i64)>,
    ) -> Result<(), FormatError> {
        write_atomically(&self.root.join(CELEBA_IDENTITY_FILE), |w| {
            for (name, id) in entries {
                writeln!(w, "{name} {id}")?;
            }
            Ok(())
        })
    }
}
