//! WebDataset shards: written by our writer and by hand with the `tar`
//! crate (long names, folders, metadata members), read back equal, and
//! damaged in each way the reader must name.

use crate::pattern;
use adapt_dataset::Dataset;
use adapt_formats::{FormatError, WebDataset, WebDatasetOptions, WebDatasetWriter, encode_png};
use std::path::{Path, PathBuf};

fn png(salt: u32) -> Vec<u8> {
    encode_png(Path::new("x.png"), &pattern(6, 4, 3, salt), 6, 4, 3).unwrap()
}

/// `n` samples `k000000…` in shards of `per_shard`: a PNG, a `cls` of
/// `i % 7`, a caption.
fn write(dir: &Path, n: usize, per_shard: usize) -> Vec<PathBuf> {
    let mut w = WebDatasetWriter::new(dir, "shard", per_shard).unwrap();
    for i in 0..n {
        let image = png(i as u32);
        let cls = (i % 7).to_string();
        let members: [(&str, &[u8]); 3] = [
            ("png", &image),
            ("cls", cls.as_bytes()),
            ("txt", b"a caption"),
        ];
        w.write(&format!("k{i:06}"), &members).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn reads_back_what_was_written_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let shards = write(dir.path(), 25, 10);
    assert_eq!(shards.len(), 3);
    let pattern_spec = format!("{}/shard-{{000000..000002}}.tar", dir.path().display());
    for spec in [dir.path().display().to_string(), pattern_spec] {
        let ds = WebDataset::open(&spec, &WebDatasetOptions::default()).unwrap();
        assert_eq!(ds.len(), 25);
        assert_eq!(ds.num_classes(), Some(7));
        assert_eq!(ds.shard_ranges(), vec![0..10, 10..20, 20..25]);
        for i in [0, 9, 10, 24] {
            let s = ds.get(i).unwrap();
            assert_eq!(s.pixels, pattern(6, 4, 3, i as u32), "sample {i}");
            assert_eq!(s.label, (i % 7) as i64);
            assert_eq!(ds.key(i), Some(format!("k{i:06}").as_str()));
            assert_eq!(ds.encoded(i).unwrap().unwrap().bytes, png(i as u32));
        }
        assert!(ds.source(11).ends_with("shard-000001.tar/k000011.png"));
    }
    // The two shards listed with `::`, as the pipeline passes them.
    let list = format!("{}::{}", shards[0].display(), shards[2].display());
    let ds = WebDataset::open(&list, &WebDatasetOptions::default()).unwrap();
    assert_eq!(ds.len(), 15);
    assert_eq!(ds.label(14), Some((24 % 7) as i64));
}

#[test]
fn unlabelled_and_chosen_members() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 4, 10);
    let spec = dir.path().display().to_string();
    let none = WebDatasetOptions {
        label: None,
        ..WebDatasetOptions::default()
    };
    let ds = WebDataset::open(&spec, &none).unwrap();
    assert_eq!(ds.label(3), Some(-1));
    assert_eq!(ds.num_classes(), None);
    // An image extension the samples lack, then one of alternatives.
    let jpg = WebDatasetOptions {
        image: "jpg".into(),
        ..WebDatasetOptions::default()
    };
    let e = WebDataset::open(&spec, &jpg).err().unwrap().to_string();
    assert!(
        e.contains("shard-000000.tar") && e.contains("k000000") && e.contains(".jpg"),
        "{e}"
    );
    let alt = WebDatasetOptions {
        image: "jpg;PNG".into(),
        ..WebDatasetOptions::default()
    };
    assert_eq!(WebDataset::open(&spec, &alt).unwrap().len(), 4);
    // `txt` is not an integer label: named with its member.
    let txt = WebDatasetOptions {
        label: Some("txt".into()),
        ..WebDatasetOptions::default()
    };
    let e = WebDataset::open(&spec, &txt).err().unwrap().to_string();
    assert!(
        e.contains("k000000.txt") && e.contains("not an integer"),
        "{e}"
    );
}

/// A tar built member by member: `(name, bytes)`, GNU long names allowed.
fn tar_of(path: &Path, members: &[(&str, Vec<u8>)]) {
    let mut b = tar::Builder::new(std::fs::File::create(path).unwrap());
    for (name, bytes) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(bytes.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, bytes.as_slice()).unwrap();
    }
    b.finish().unwrap();
}

#[test]
fn groups_as_webdataset_does() {
    let dir = tempfile::tempdir().unwrap();
    let long = format!("{}/deep", "d".repeat(120));
    let a = dir.path().join("a.tar");
    tar_of(
        &a,
        &[
            ("__index__", b"meta".to_vec()),
            (&format!("{long}/x1.png"), png(1)),
            (&format!("{long}/x1.cls"), b" 3\n".to_vec()),
            ("dir.v2/x2.seg.png", png(9)),
            ("dir.v2/x2.PNG", png(2)),
            ("dir.v2/x2.cls", b"4".to_vec()),
            ("README", b"no extension: skipped".to_vec()),
        ],
    );
    let ds = WebDataset::open(&a.display().to_string(), &WebDatasetOptions::default()).unwrap();
    assert_eq!(ds.len(), 2);
    assert_eq!(ds.key(0), Some(format!("{long}/x1").as_str()));
    assert_eq!(ds.get(0).unwrap().label, 3);
    // Extensions compare lowercased; `seg.png` is another extension.
    assert_eq!(ds.get(1).unwrap().pixels, pattern(6, 4, 3, 2));
    assert_eq!(ds.key(1), Some("dir.v2/x2"));
}

fn open_err(spec: &Path) -> String {
    match WebDataset::open(&spec.display().to_string(), &WebDatasetOptions::default()) {
        Ok(ds) => panic!("opened {} samples", ds.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn truncated_shards_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let shards = write(&dir.path().join("w"), 6, 3);
    // Truncated in the middle of the last image: the member is named.
    let cut = dir.path().join("cut.tar");
    let bytes = std::fs::read(&shards[0]).unwrap();
    std::fs::write(&cut, &bytes[..512 * 9 + 20]).unwrap();
    let e = open_err(&cut);
    assert!(e.contains("cut.tar") && e.contains("truncated tar"), "{e}");
    // Cut inside a header.
    std::fs::write(&cut, &bytes[..512 * 2 + 100]).unwrap();
    let e = open_err(&cut);
    assert!(e.contains("cut.tar") && e.contains("tar header"), "{e}");
}

#[test]
fn samples_webdataset_would_not_form_are_named() {
    let dir = tempfile::tempdir().unwrap();
    // A sample without an image.
    let t = dir.path().join("noimage.tar");
    tar_of(
        &t,
        &[
            ("a.png", png(0)),
            ("a.cls", b"1".to_vec()),
            ("b.cls", b"1".to_vec()),
        ],
    );
    let e = open_err(&t);
    assert!(
        e.contains("noimage.tar") && e.contains("member b:") && e.contains("without an image"),
        "{e}"
    );
    // A key met again apart from its members.
    tar_of(
        &t,
        &[
            ("a.png", png(0)),
            ("a.cls", b"1".to_vec()),
            ("b.png", png(1)),
            ("b.cls", b"1".to_vec()),
            ("a.txt", b"x".to_vec()),
        ],
    );
    let e = open_err(&t);
    assert!(e.contains("a.txt") && e.contains("appears again"), "{e}");
    // Two images of one extension in a sample.
    tar_of(
        &t,
        &[
            ("a.png", png(0)),
            ("a.png", png(1)),
            ("a.cls", b"1".to_vec()),
        ],
    );
    assert!(open_err(&t).contains("a second .png member"));
    // A key split across two shards.
    let (s1, s2) = (dir.path().join("s1.tar"), dir.path().join("s2.tar"));
    tar_of(&s1, &[("a.png", png(0)), ("a.cls", b"1".to_vec())]);
    tar_of(
        &s2,
        &[
            ("a.txt", b"more of a".to_vec()),
            ("b.png", png(0)),
            ("b.cls", b"2".to_vec()),
        ],
    );
    let spec = format!("{}::{}", s1.display(), s2.display());
    let e = WebDataset::open(&spec, &WebDatasetOptions::default())
        .err()
        .unwrap();
    assert!(matches!(e, FormatError::SplitKey { .. }), "{e}");
    assert!(e.to_string().contains("s1.tar") && e.to_string().contains("s2.tar"));
    // A blob that is no image opens (nothing is decoded at open) and fails
    // to read, naming the shard and the member.
    tar_of(
        &t,
        &[
            ("a.jpg", b"not a jpeg at all".to_vec()),
            ("a.cls", b"1".to_vec()),
        ],
    );
    let ds = WebDataset::open(&t.display().to_string(), &WebDatasetOptions::default()).unwrap();
    let e = ds.get(0).err().unwrap().to_string();
    assert!(
        e.contains("noimage.tar/a.jpg") && e.contains("decode"),
        "{e}"
    );
    // No shard at all, a missing shard, an empty tar.
    assert!(open_err(&dir.path().join("none-{0..1}.tar")).contains("none-0.tar"));
    tar_of(&t, &[]);
    assert!(open_err(&t).contains("no sample"));
}

/// `tar` gzip-compressed to `to` (one gzip member, as `tar czf` writes).
fn gzip(tar: &Path, to: &Path) {
    let mut enc = flate2::write::GzEncoder::new(
        std::fs::File::create(to).unwrap(),
        flate2::Compression::fast(),
    );
    std::io::copy(&mut std::fs::File::open(tar).unwrap(), &mut enc).unwrap();
    enc.finish().unwrap();
}

/// The names in `dir`, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn gzip_compressed_shards_are_decompressed_once_and_read_as_the_plain_ones() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let (plain, gz, unpacked) = (
        dir.path().join("plain"),
        dir.path().join("gz"),
        dir.path().join("unpacked"),
    );
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::create_dir_all(&gz).unwrap();
    let shards = write(&plain, 25, 10);
    // `.tar.gz` and `.tgz`, listed from the folder in name order.
    let compressed: Vec<PathBuf> = [
        "shard-000000.tar.gz",
        "shard-000001.tgz",
        "shard-000002.TAR.GZ",
    ]
    .iter()
    .map(|n| gz.join(n))
    .collect();
    for (tar, to) in shards.iter().zip(&compressed) {
        gzip(tar, to);
    }
    let options = WebDatasetOptions {
        unpack_dir: Some(unpacked.clone()),
        ..WebDatasetOptions::default()
    };
    let want =
        WebDataset::open(&plain.display().to_string(), &WebDatasetOptions::default()).unwrap();
    let spec = format!(
        "{}/shard-000000.tar.gz::{}/shard-000001.tgz::{}",
        gz.display(),
        gz.display(),
        compressed[2].display()
    );
    for spec in [gz.display().to_string(), spec] {
        let got = WebDataset::open(&spec, &options).unwrap();
        assert_eq!(got.len(), 25);
        assert_eq!(got.shard_ranges(), want.shard_ranges());
        for i in 0..25 {
            assert_eq!(got.get(i).unwrap(), want.get(i).unwrap(), "sample {i}");
            assert_eq!(got.key(i), want.key(i));
        }
        assert!(
            got.source(11).ends_with("shard-000001.tgz/k000011.png"),
            "{}",
            got.source(11)
        );
    }
    // Once: the copies are the same files after more opens, and touching a
    // shard (the shard cache marks use so) is no change.
    let copies = names(&unpacked);
    assert_eq!(
        copies.iter().filter(|n| n.ends_with(".tar")).count(),
        3,
        "{copies:?}"
    );
    let inode = |n: &str| std::fs::metadata(unpacked.join(n)).unwrap().ino();
    let before: Vec<u64> = copies.iter().map(|n| inode(n)).collect();
    std::fs::File::options()
        .append(true)
        .open(&compressed[0])
        .unwrap()
        .set_modified(std::time::SystemTime::now())
        .unwrap();
    WebDataset::open(&gz.display().to_string(), &options).unwrap();
    assert_eq!(names(&unpacked), copies);
    assert_eq!(copies.iter().map(|n| inode(n)).collect::<Vec<_>>(), before);
    // A shard rewritten with other samples is decompressed again.
    let other = dir.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    let other_shards = write(&other, 4, 10);
    gzip(&other_shards[0], &compressed[2]);
    let got = WebDataset::open(&gz.display().to_string(), &options).unwrap();
    assert_eq!(got.len(), 24);
    assert_eq!(got.get(20).unwrap(), want.get(0).unwrap());

    // Cut short: an error naming the shard; no copy, no part file left.
    let cut = gz.join("shard-000003.tar.gz");
    let bytes = std::fs::read(&compressed[0]).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let listed = names(&unpacked);
    let e = WebDataset::open(&cut.display().to_string(), &options)
        .err()
        .unwrap();
    assert!(matches!(e, FormatError::Gunzip { .. }), "{e}");
    let e = e.to_string();
    assert!(
        e.contains("shard-000003.tar.gz") && e.contains("gzip"),
        "{e}"
    );
    let now = names(&unpacked);
    assert!(
        now.iter()
            .all(|n| listed.contains(n) || n.ends_with(".lock")),
        "{now:?}"
    );
    // Not gzip at all, and no folder to decompress into: named.
    let fake = gz.join("fake.tgz");
    std::fs::copy(&shards[0], &fake).unwrap();
    let e = WebDataset::open(&fake.display().to_string(), &options)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("fake.tgz") && e.contains("gzip"), "{e}");
    let e = WebDataset::open(
        &compressed[0].display().to_string(),
        &WebDatasetOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        e.contains("shard-000000.tar.gz") && e.contains("folder"),
        "{e}"
    );
}

/// Compressed copies of `n` samples in 10-sample shards, in `dir/name`.
fn gzipped(dir: &Path, name: &str, n: usize) -> PathBuf {
    let plain = dir.join(format!("{name}-plain"));
    let gz = dir.join(name);
    std::fs::create_dir_all(&plain).unwrap();
    std::fs::create_dir_all(&gz).unwrap();
    for tar in write(&plain, n, 10) {
        let file = tar.file_name().unwrap().to_string_lossy().into_owned();
        gzip(&tar, &gz.join(format!("{file}.gz")));
    }
    gz
}

#[test]
fn the_unpack_folder_keeps_its_bound_by_removing_other_datasets_copies() {
    let dir = tempfile::tempdir().unwrap();
    let unpacked = dir.path().join("unpacked");
    let (a, b) = (gzipped(dir.path(), "a", 30), gzipped(dir.path(), "b", 20));
    let unbounded = WebDatasetOptions {
        unpack_dir: Some(unpacked.clone()),
        ..WebDatasetOptions::default()
    };
    let copies = |names: Vec<String>| -> Vec<String> {
        names.into_iter().filter(|n| n.ends_with(".tar")).collect()
    };
    let a_set = WebDataset::open(&a.display().to_string(), &unbounded).unwrap();
    let want: Vec<_> = (0..30).map(|i| a_set.get(i).unwrap()).collect();
    let a_copies = copies(names(&unpacked));
    assert_eq!(a_copies.len(), 3);
    // Another process decompressing one of a's copies holds its lock: that
    // copy stays; a part file it left behind would too.
    let held = unpacked.join(format!("{}.lock", a_copies[1]));
    let lock = std::fs::File::options().write(true).open(&held).unwrap();
    lock.lock().unwrap();
    let stale = unpacked.join(format!("{}.part", a_copies[0]));
    std::fs::write(&stale, b"a dead process's part").unwrap();
    // A bound of two copies (b's two and the held one take three): opening
    // b removes what is not b's, keeps b's own past the bound.
    let one = std::fs::metadata(unpacked.join(&a_copies[0]))
        .unwrap()
        .len();
    let bounded = WebDatasetOptions {
        unpack_bytes: 2 * one,
        ..unbounded.clone()
    };
    let b_set = WebDataset::open(&b.display().to_string(), &bounded).unwrap();
    let now = copies(names(&unpacked));
    assert_eq!(now.len(), 2 + 1, "b's two and the held one: {now:?}");
    assert!(now.contains(&a_copies[1]) && !now.contains(&a_copies[0]));
    assert!(
        !stale.exists(),
        "the dead process's part file went with its copy"
    );
    drop(lock);
    // a, opened before, still reads its samples: each copy removed under
    // it is decompressed again when read.
    for (i, w) in want.iter().enumerate() {
        assert_eq!(&a_set.get(i).unwrap(), w, "sample {i}");
    }
    assert_eq!(copies(names(&unpacked)).len(), 3 + 2);
    assert_eq!(b_set.len(), 20);
    // Within the bound nothing goes; past it, the least recently opened.
    let roomy = WebDatasetOptions {
        unpack_bytes: 6 * one,
        ..unbounded.clone()
    };
    WebDataset::open(&b.display().to_string(), &roomy).unwrap();
    assert_eq!(copies(names(&unpacked)).len(), 5);
    // A shard rewritten under an open dataset whose copy went: an error
    // naming the shard, never another shard's samples under the old index.
    WebDataset::open(&b.display().to_string(), &bounded).unwrap();
    let first = a.join("shard-000000.tar.gz");
    let other = gzipped(dir.path(), "other", 7);
    std::fs::copy(other.join("shard-000000.tar.gz"), &first).unwrap();
    let e = a_set.get(0).unwrap_err().to_string();
    assert!(
        e.contains("shard-000000.tar.gz") && e.contains("changed since"),
        "{e}"
    );
}

#[test]
fn text_members_are_read_beside_each_sample_and_named_when_bad() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = WebDatasetWriter::new(dir.path(), "cap", 4).unwrap();
    for i in 0..6u32 {
        let image = png(i);
        let caption = format!("a photo of sample {i} ✓");
        let members: [(&str, &[u8]); 3] =
            [("png", &image), ("cls", b"1"), ("TXT", caption.as_bytes())];
        w.write(&format!("k{i:03}"), &members).unwrap();
    }
    w.finish().unwrap();
    let spec = dir.path().display().to_string();
    let with_text = WebDatasetOptions {
        text: Some("txt".into()),
        ..WebDatasetOptions::default()
    };
    let ds = WebDataset::open(&spec, &with_text).unwrap();
    for i in [0, 3, 5] {
        let t = ds.text(i).unwrap().unwrap();
        assert_eq!(t, format!("a photo of sample {i} ✓"));
        assert_eq!(ds.get(i).unwrap().pixels, pattern(6, 4, 3, i as u32));
    }
    assert!(ds.text(6).unwrap().is_err());
    // Forwarded by the wrappers: a subset answers its parent's text.
    let sub = adapt_dataset::Subset::new(std::sync::Arc::new(ds), vec![4]).unwrap();
    assert_eq!(sub.text(0).unwrap().unwrap(), "a photo of sample 4 ✓");
    // Without a text field: none.
    let plain = WebDataset::open(&spec, &WebDatasetOptions::default()).unwrap();
    assert!(plain.text(0).is_none());
    // A sample without the member, and a member that is not UTF-8: named.
    let json = WebDatasetOptions {
        text: Some("json".into()),
        ..WebDatasetOptions::default()
    };
    let e = WebDataset::open(&spec, &json).err().unwrap().to_string();
    assert!(
        e.contains("cap-000000.tar") && e.contains("k000") && e.contains(".json text member"),
        "{e}"
    );
    let bad = dir.path().join("bad.tar");
    tar_of(
        &bad,
        &[
            ("x.png", png(0)),
            ("x.cls", b"0".to_vec()),
            ("x.txt", vec![0xff, 0xfe]),
        ],
    );
    let ds = WebDataset::open(&bad.display().to_string(), &with_text).unwrap();
    let e = ds.text(0).unwrap().unwrap_err().to_string();
    assert!(
        e.contains("bad.tar") && e.contains("x.txt") && e.contains("UTF-8"),
        "{e}"
    );
}

/// #24: with an index folder, each shard's member list is kept there once
/// listed; an open from the kept lists equals one that lists every header,
/// and a shard rewritten in place of the old one is listed again.
#[test]
fn member_lists_are_kept_once_listed_and_a_rewritten_shard_is_listed_again() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    write(&data, 25, 10);
    let spec = data.display().to_string();
    let index = dir.path().join("index");
    let cached = WebDatasetOptions {
        index_dir: Some(index.clone()),
        text: Some("txt".into()),
        ..WebDatasetOptions::default()
    };
    let listed = WebDataset::open(&spec, &WebDatasetOptions::default()).unwrap();
    let first = WebDataset::open(&spec, &cached).unwrap();
    let lists = || std::fs::read_dir(&index).unwrap().count();
    assert_eq!(lists(), 3, "one list per shard");
    // A list written again is a new file (a part file renamed): the same
    // inodes after the second open say it read the kept lists.
    let inodes = || {
        use std::os::unix::fs::MetadataExt;
        let mut v: Vec<u64> = std::fs::read_dir(&index)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().ino())
            .collect();
        v.sort_unstable();
        v
    };
    let written = inodes();
    let kept = WebDataset::open(&spec, &cached).unwrap();
    assert_eq!(inodes(), written, "the second open read the kept lists");
    for ds in [&first, &kept] {
        assert_eq!(ds.len(), listed.len());
        assert_eq!(ds.shard_ranges(), listed.shard_ranges());
        for i in [0, 9, 10, 24] {
            assert_eq!(ds.get(i).unwrap().pixels, listed.get(i).unwrap().pixels);
            assert_eq!(ds.label(i), listed.label(i));
            assert_eq!(ds.key(i), listed.key(i));
            assert_eq!(ds.text(i).unwrap().unwrap(), "a caption");
        }
    }
    // The last shard rewritten with other samples (and other labels).
    let mut w = WebDatasetWriter::new(&data.join("new"), "shard", 10).unwrap();
    for i in 0..3 {
        let cls = (6 - i).to_string();
        w.write(
            &format!("z{i}"),
            &[
                ("png", &png(100 + i)),
                ("cls", cls.as_bytes()),
                ("txt", b"new"),
            ],
        )
        .unwrap();
    }
    let new = w.finish().unwrap();
    std::fs::rename(&new[0], data.join("shard-000002.tar")).unwrap();
    std::fs::remove_dir(data.join("new")).unwrap();
    let rewritten = WebDataset::open(&spec, &cached).unwrap();
    assert_eq!(rewritten.len(), 23);
    assert_eq!(rewritten.key(20), Some("z0"));
    assert_eq!(rewritten.label(20), Some(6));
    assert_eq!(rewritten.get(22).unwrap().pixels, pattern(6, 4, 3, 102));
    assert_eq!(lists(), 4, "the rewritten shard's list is another file");
}

/// A tar written block by block, as a hostile writer would (the `tar`
/// crate's builder refuses `..` and absolute names): one good sample, then
/// the member `name` of `kind` claiming `size` bytes with `data` after it.
fn hostile_tar(path: &Path, name: &[u8], kind: tar::EntryType, size: u64, data: &[u8]) {
    let mut out = Vec::new();
    let mut member = |name: &[u8], kind: tar::EntryType, size: u64, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_size(size);
        h.set_mode(0o644);
        if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
            h.set_link_name("../../etc/passwd").unwrap();
        }
        h.set_cksum();
        out.extend_from_slice(h.as_bytes());
        out.extend_from_slice(data);
        out.resize(out.len().next_multiple_of(512), 0);
    };
    let image = png(1);
    member(
        b"k0.png",
        tar::EntryType::Regular,
        image.len() as u64,
        &image,
    );
    member(b"k0.cls", tar::EntryType::Regular, 1, b"3");
    member(name, kind, size, data);
    out.extend_from_slice(&[0u8; 1024]);
    std::fs::write(path, out).unwrap();
}

#[test]
fn hostile_members_are_refused_naming_the_shard_and_member() {
    let dir = tempfile::tempdir().unwrap();
    let image = png(2);
    let n = image.len() as u64;
    use tar::EntryType as T;
    // (name, kind, size claimed, data, what the error says)
    type Case<'a> = (&'a [u8], T, u64, &'a [u8], &'a str);
    let cases: [Case; 8] = [
        (b"../evil.png", T::Regular, n, &image, "climbs out"),
        (b"sub/../../evil.png", T::Regular, n, &image, "climbs out"),
        (b"/tmp/evil.png", T::Regular, n, &image, "absolute"),
        (b"k1.png", T::Symlink, 0, b"", "symbolic link"),
        (b"k1.png", T::Link, 0, b"", "hard link"),
        (b"k1.png", T::Char, 0, b"", "character device"),
        (b"k1.png", T::Fifo, 0, b"", "FIFO"),
        // A member claiming 2^40 bytes (GNU base-256 size) over 512 real
        // ones: named as running past the file, nothing allocated for it.
        (
            b"k1.png",
            T::Regular,
            1 << 40,
            &[7u8; 512],
            "run past the file",
        ),
    ];
    for (i, (name, kind, size, data, want)) in cases.into_iter().enumerate() {
        let shard = dir.path().join(format!("hostile-{i}.tar"));
        hostile_tar(&shard, name, kind, size, data);
        let e = open_err(&shard);
        let name = String::from_utf8_lossy(name);
        assert!(
            e.contains(want) && e.contains(&*name) && e.contains(&format!("hostile-{i}.tar")),
            "case {i} ({name}): {e}"
        );
    }
    // A folder member is skipped, as WebDataset skips it.
    let shard = dir.path().join("folder.tar");
    hostile_tar(&shard, b"sub/", T::Directory, 0, b"");
    let ds = WebDataset::open(&shard.display().to_string(), &WebDatasetOptions::default()).unwrap();
    assert_eq!(ds.len(), 1);
}

#[test]
fn duplicate_keys_and_members_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (png(1), png(2));
    let apart = dir.path().join("apart.tar");
    tar_of(
        &apart,
        &[
            ("k0.png", a.clone()),
            ("k0.cls", b"1".to_vec()),
            ("k1.png", b.clone()),
            ("k1.cls", b"2".to_vec()),
            ("k0.txt", b"again".to_vec()),
        ],
    );
    let e = open_err(&apart);
    assert!(
        e.contains("apart.tar") && e.contains("appears again"),
        "{e}"
    );
    let twice = dir.path().join("twice.tar");
    tar_of(
        &twice,
        &[("k0.png", a), ("k0.png", b), ("k0.cls", b"1".to_vec())],
    );
    let e = open_err(&twice);
    assert!(
        e.contains("twice.tar") && e.contains("a second .png"),
        "{e}"
    );
}

#[test]
fn a_gzip_bomb_past_the_unpack_bound_is_refused_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (gz, unpacked) = (dir.path().join("gz"), dir.path().join("unpacked"));
    std::fs::create_dir_all(&gz).unwrap();
    // 16 MiB of zeros in one member: under 1/64 of it compressed.
    let tar = dir.path().join("bomb.tar");
    tar_of(&tar, &[("k0.bin", vec![0u8; 16 << 20])]);
    let bomb = gz.join("bomb.tar.gz");
    gzip(&tar, &bomb);
    assert!(std::fs::metadata(&bomb).unwrap().len() < 256 << 10);
    let options = WebDatasetOptions {
        unpack_dir: Some(unpacked.clone()),
        unpack_bytes: 1 << 20,
        ..WebDatasetOptions::default()
    };
    let e = WebDataset::open(&bomb.display().to_string(), &options)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("bomb.tar.gz") && e.contains("more than 1048576 bytes"),
        "{e}"
    );
    let left: Vec<String> = names(&unpacked)
        .into_iter()
        .filter(|n| !n.ends_with(".lock"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
