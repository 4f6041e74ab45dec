//! A generic image tree as torchvision's `ImageFolder`: one sub-folder per
//! class, classes numbered in sorted name order, images found recursively in
//! sorted order. Only JPEG and PNG are read; other files are skipped, as
//! torchvision skips files without an image extension.

use crate::FormatError;
use crate::image_io::{read_file, read_rgb_into};
use adapt_dataset::{Dataset, Encoded, Error, FixedSteps, Read, Sample, check_index};
use std::path::{Path, PathBuf};

/// Extensions read (compared without case).
pub const IMAGE_EXTENSIONS: [&str; 3] = ["jpg", "jpeg", "png"];

/// An image folder dataset. Images may differ in size: put a `Resize` after
/// it (`adapt_transform::Mapped`) before batching.
pub struct ImageFolder {
    classes: Vec<String>,
    entries: Vec<(PathBuf, i64)>,
}

impl ImageFolder {
    /// Opens `root`, whose sub-folders are the classes.
    pub fn open(root: &Path) -> Result<Self, FormatError> {
        if !root.is_dir() {
            return Err(FormatError::Missing {
                path: root.to_owned(),
                what: "image folder",
            });
        }
        let mut classes = Vec::new();
        for entry in std::fs::read_dir(root).map_err(FormatError::io(root))? {
            let entry = entry.map_err(FormatError::io(root))?;
            if entry.path().is_dir() {
                let name = entry
                    .file_name()
                    .into_string()
                    .map_err(|_| FormatError::BadName {
                        path: entry.path(),
                        reason: "class folder name is not UTF-8",
                    })?;
                classes.push(name);
            }
        }
        classes.sort();
        let mut entries = Vec::new();
        for (label, class) in classes.iter().enumerate() {
            let mut files = Vec::new();
            let dir = root.join(class);
            walk(&dir, &mut files, &mut Vec::new())?;
            if files.is_empty() {
                // torchvision refuses it too: an empty class would shift
                // every later label silently.
                return Err(FormatError::Empty {
                    path: dir,
                    what: "class folder without any image (jpg, jpeg, png)",
                });
            }
            files.sort();
            entries.extend(files.into_iter().map(|p| (p, label as i64)));
        }
        if entries.is_empty() {
            return Err(FormatError::Empty {
                path: root.to_owned(),
                what: "no class folder holds a JPEG or PNG image",
            });
        }
        Ok(Self { classes, entries })
    }

    /// Class names, in label order.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
}

/// Collects image files under `dir`, following symbolic links as
/// torchvision does, but refusing a folder reached again from inside itself
/// (`ancestors`: the canonical folders on the way down).
fn walk(
    dir: &Path,
    out: &mut Vec<PathBuf>,
    ancestors: &mut Vec<PathBuf>,
) -> Result<(), FormatError> {
    let canonical = dir.canonicalize().map_err(FormatError::io(dir))?;
    if ancestors.contains(&canonical) {
        return Err(FormatError::LinkLoop {
            path: dir.to_owned(),
        });
    }
    ancestors.push(canonical);
    for entry in std::fs::read_dir(dir).map_err(FormatError::io(dir))? {
        let path = entry.map_err(FormatError::io(dir))?.path();
        if path.is_dir() {
            walk(&path, out, ancestors)?;
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| IMAGE_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
        {
            out.push(path);
        }
    }
    ancestors.pop();
    Ok(())
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.entries.len()
    }
    fn label(&self, index: usize) -> Option<i64> {
        self.entries.get(index).map(|(_, label)| *label)
    }
    fn read<'a>(&'a self, index: usize, out: &mut Sample) -> Result<Read<'a>, Error> {
        check_index(index, self.entries.len())?;
        let (path, label) = &self.entries[index];
        read_rgb_into(path, out)?;
        out.label = *label;
        Ok(Read::Filled)
    }
    fn encoded(&self, index: usize) -> Option<Result<Encoded, Error>> {
        let read = || -> Result<Encoded, Error> {
            check_index(index, self.entries.len())?;
            let (path, label) = &self.entries[index];
            Ok(Encoded {
                bytes: read_file(path)?,
                label: *label,
                steps: FixedSteps::default(),
            })
        };
        Some(read())
    }
    fn source(&self, index: usize) -> String {
        match check_index(index, self.entries.len()) {
            Ok(()) => self.entries[index].0.display().to_string(),
            Err(e) => e.to_string(),
        }
    }
    fn num_classes(&self) -> Option<usize> {
        Some(self.classes.len())
    }
}
