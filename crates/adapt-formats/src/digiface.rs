//! DigiFace1M: `<root>/<class_id>/<n>.png`, 112×112 RGBA PNGs. Samples are
//! ordered by class number, then by image number; they come out as RGB
//! (alpha dropped, as PIL's `convert('RGB')`), labelled with the class number
//! plus a configurable offset (the seed adds CelebA's class count so the two
//! can be concatenated).

use crate::image_io::{read_file, read_rgb_into};
use crate::{FormatError, encode_png, write_atomically};
use adapt_dataset::{Dataset, Encoded, Error, FixedSteps, Read, Sample, Shape, check_index};
use std::path::{Path, PathBuf};

/// Side of a DigiFace1M image.
pub const DIGIFACE_IMAGE_SIZE: u32 = 112;

/// How to read DigiFace1M.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DigiFaceOptions {
    /// Added to every class number to form the label.
    pub class_offset: i64,
}

struct Entry {
    path: PathBuf,
    label: i64,
}

/// The DigiFace1M dataset as laid out on disk.
pub struct DigiFace {
    entries: Vec<Entry>,
    classes: usize,
    offset: i64,
}

/// Parses a decimal name; `None` for anything else (signs, spaces, empty).
fn number(name: &str) -> Option<u64> {
    (!name.is_empty() && name.bytes().all(|b| b.is_ascii_digit()))
        .then(|| name.parse().ok())
        .flatten()
}

impl DigiFace {
    /// Opens `root`, the folder of class folders. Every sub-folder must be a
    /// class number and every `.png` in it an image number; other files are
    /// ignored (as the seed's `endswith('.png')` does).
    pub fn open(root: &Path, options: DigiFaceOptions) -> Result<Self, FormatError> {
        if !root.is_dir() {
            return Err(FormatError::Missing {
                path: root.to_owned(),
                what: "DigiFace1M folder",
            });
        }
        let classes = class_folders(root)?;
        let mut entries = Vec::new();
        let mut max_class = None;
        for (class, dir) in classes {
            let images = images_in(&dir)?;
            let label = i64::try_from(class)
                .ok()
                .and_then(|c| c.checked_add(options.class_offset))
                .ok_or_else(|| FormatError::LabelOverflow {
                    path: dir.clone(),
                    class,
                    offset: options.class_offset,
                })?;
            entries.extend(images.into_iter().map(|(_, path)| Entry { path, label }));
            max_class = Some(class);
        }
        if entries.is_empty() {
            return Err(FormatError::Empty {
                path: root.to_owned(),
                what: "no DigiFace1M image (<class>/<n>.png) found",
            });
        }
        let classes = max_class.map_or(0, |m| m as usize + 1);
        Ok(Self {
            entries,
            classes,
            offset: options.class_offset,
        })
    }

    /// The path of image `index`.
    pub fn image_path(&self, index: usize) -> Result<&Path, Error> {
        check_index(index, self.entries.len())?;
        Ok(&self.entries[index].path)
    }
}

/// The class folders of `root`, by class number (a non-number or two
/// folders naming one number are errors naming the folder).
fn class_folders(root: &Path) -> Result<Vec<(u64, PathBuf)>, FormatError> {
    let mut classes = Vec::new();
    for entry in std::fs::read_dir(root).map_err(FormatError::io(root))? {
        let entry = entry.map_err(FormatError::io(root))?;
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        let class = entry
            .file_name()
            .to_str()
            .and_then(number)
            .ok_or(FormatError::BadName {
                path: path.clone(),
                reason: "DigiFace1M class folder name is not a number",
            })?;
        classes.push((class, path));
    }
    classes.sort();
    if let Some(w) = classes.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(FormatError::BadName {
            path: w[1].1.clone(),
            reason: "two DigiFace1M class folders name the same number (e.g. 0 and 00)",
        });
    }
    Ok(classes)
}

/// The `.png` images of a class folder, by image number.
fn images_in(dir: &Path) -> Result<Vec<(u64, PathBuf)>, FormatError> {
    let mut images = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(FormatError::io(dir))? {
        let entry = entry.map_err(FormatError::io(dir))?;
        let path = entry.path();
        if path
            .extension()
            .is_none_or(|e| !e.eq_ignore_ascii_case("png"))
            || !path.is_file()
        {
            continue;
        }
        let n = path
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(number)
            .ok_or(FormatError::BadName {
                path: path.clone(),
                reason: "DigiFace1M image name is not a number",
            })?;
        images.push((n, path));
    }
    images.sort();
    Ok(images)
}

impl Dataset for DigiFace {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        let path = self.image_path(index)?;
        read_rgb_into(path, out)?;
        let expected = Shape::new(DIGIFACE_IMAGE_SIZE, DIGIFACE_IMAGE_SIZE, 3);
        if out.shape != expected {
            return Err(FormatError::UnexpectedShape {
                path: path.to_owned(),
                expected,
                got: out.shape,
            }
            .into());
        }
        out.label = self.entries[index].label;
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            let bytes = read_file(self.image_path(index)?)?;
            let expect = Some(Shape::new(DIGIFACE_IMAGE_SIZE, DIGIFACE_IMAGE_SIZE, 3));
            Ok(Encoded {
                bytes,
                label: self.entries[index].label,
                steps: FixedSteps { crop: None, expect },
            })
        };
        Some(read())
    }
    fn source(&self, index: usize) -> String {
        self.image_path(index)
            .map_or_else(|e| e.to_string(), |p| p.display().to_string())
    }
    fn sample_shape(&self) -> Option<Shape> {
        Some(Shape::new(DIGIFACE_IMAGE_SIZE, DIGIFACE_IMAGE_SIZE, 3))
    }
    fn num_classes(&self) -> Option<usize> {
        // Labels run up to offset + highest class number.
        usize::try_from(self.offset).ok().map(|o| o + self.classes)
    }
}

/// Writes one DigiFace1M image, `<root>/<class>/<n>.png`, from interleaved
/// RGBA pixels.
pub fn write_digiface_image(
    root: &Path,
    class: u64,
    n: u64,
    rgba: &[u8],
    size: u32,
) -> Result<(), FormatError> {
    let dir = root.join(class.to_string());
    std::fs::create_dir_all(&dir).map_err(FormatError::io(&dir))?;
    let path = dir.join(format!("{n}.png"));
    let png = encode_png(&path, rgba, size, size, 4)?;
    write_atomically(&path, |w| w.write_all(&png))
}
