//! Class-per-folder image trees: walking, labels, refusals.

use crate::pattern;
use adapt_dataset::Dataset;
use adapt_formats::{FormatError, ImageFolder, encode_png};
use std::path::Path;

fn png(path: &Path, salt: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        encode_png(path, &pattern(5, 4, 3, salt), 5, 4, 3).unwrap(),
    )
    .unwrap();
}

#[test]
fn classes_sorted_by_name_files_found_recursively() {
    let dir = tempfile::tempdir().unwrap();
    png(&dir.path().join("zebra/b.png"), 1);
    png(&dir.path().join("zebra/a.PNG"), 2);
    png(&dir.path().join("ant/deep/x.png"), 3);
    std::fs::write(dir.path().join("ant/readme.txt"), "skip").unwrap();
    let ds = ImageFolder::open(dir.path()).unwrap();
    assert_eq!(ds.classes(), ["ant", "zebra"]);
    assert_eq!(ds.len(), 3);
    let labels: Vec<i64> = (0..3).map(|i| ds.get(i).unwrap().label).collect();
    assert_eq!(labels, [0, 1, 1]);
    assert!(ds.source(1).ends_with("zebra/a.PNG"));
    assert_eq!(ds.get(2).unwrap().pixels, pattern(5, 4, 3, 1));
}

#[test]
fn folder_without_images_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("empty_class")).unwrap();
    assert!(matches!(
        ImageFolder::open(dir.path()),
        Err(FormatError::Empty { .. })
    ));
}
