//! Packs written and read back, damaged, interrupted and streamed.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_dataset::{Dataset, Error, Sample, Shape};
use adapt_formats::{CelebA, CelebAOptions, Cifar10, DigiFace, DigiFaceOptions, Split};
use adapt_pack::{
    Codec, Manifest, PackDataset, PackError, PackOptions, Payload, ShardStream, SourceInfo, verify,
    write_pack,
};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

fn none(_: u64) {}

fn source(name: &str) -> SourceInfo {
    SourceInfo {
        dataset: name.into(),
        path: "test".into(),
        class_names: None,
    }
}

/// The file of shard `k`, as the manifest names it.
fn shard_file(dir: &Path, k: usize) -> String {
    Manifest::load(dir).unwrap().shards[k].file.clone()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

fn opts(shard_size: usize, store: Payload) -> PackOptions {
    PackOptions {
        shard_size,
        store,
        seed: 9,
        frame_bytes: 8 << 10,
        ..PackOptions::default()
    }
}

/// Every source sample comes back exactly once, byte for byte.
fn round_trip(ds: &dyn Dataset, dir: &Path, o: &PackOptions) -> PackDataset {
    let m = write_pack(ds, &source("cifar10"), dir, o, &none).unwrap();
    assert_eq!(m.samples, ds.len());
    let pack = PackDataset::open(dir).unwrap();
    assert_eq!(pack.len(), ds.len());
    let mut seen = vec![false; ds.len()];
    for i in 0..pack.len() {
        let origin = pack.origin(i).unwrap();
        assert!(!seen[origin], "origin {origin} twice");
        seen[origin] = true;
        assert_eq!(
            pack.get(i).unwrap(),
            ds.get(origin).unwrap(),
            "pack index {i}, origin {origin}"
        );
    }
    assert!(seen.iter().all(|&s| s));
    verify(dir).unwrap();
    pack
}

fn cifar(dir: &Path, train: usize) -> Cifar10 {
    adapt_synth::cifar10(
        dir,
        adapt_synth::Cifar10Spec {
            train,
            test: 1,
            seed: 1,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    Cifar10::open(dir, Split::Train).unwrap()
}

#[test]
fn round_trip_on_each_source_format() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 53);
    let pack = round_trip(&c, &t.path().join("pc"), &opts(20, Payload::Raw));
    assert_eq!(
        pack.manifest()
            .shards
            .iter()
            .map(|s| s.samples)
            .collect::<Vec<_>>(),
        [20, 20, 13]
    );
    assert_eq!(pack.sample_shape(), Some(Shape::new(32, 32, 3)));

    adapt_synth::celeba(
        &t.path().join("ce"),
        adapt_synth::CelebASpec {
            count: 9,
            identities: 2,
            quality: 90,
            seed: 2,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    let ce = CelebA::open(&t.path().join("ce"), CelebAOptions::default()).unwrap();
    round_trip(&ce, &t.path().join("pce-raw"), &opts(4, Payload::Raw));
    let enc = round_trip(&ce, &t.path().join("pce-enc"), &opts(4, Payload::Encoded));
    assert!(enc.encoded(0).is_some());

    adapt_synth::digiface(
        &t.path().join("d"),
        adapt_synth::DigiFaceSpec {
            classes: 2,
            per_class: 3,
            seed: 3,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    let d = DigiFace::open(&t.path().join("d"), DigiFaceOptions { class_offset: 100 }).unwrap();
    round_trip(&d, &t.path().join("pd-raw"), &opts(5, Payload::Raw));
    round_trip(&d, &t.path().join("pd-enc"), &opts(5, Payload::Encoded));

    // CIFAR-10 has no encoded form.
    let err = write_pack(
        &c,
        &source("cifar10"),
        &t.path().join("x"),
        &opts(5, Payload::Encoded),
        &none,
    )
    .unwrap_err();
    assert!(matches!(err, PackError::InvalidOption(_)), "{err}");
}

#[test]
fn one_sample_and_uneven_counts() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 7);
    round_trip(&c, &t.path().join("p1"), &opts(1, Payload::Raw));
    round_trip(&c, &t.path().join("p3"), &opts(3, Payload::Raw));
    round_trip(&c, &t.path().join("p100"), &opts(100, Payload::Raw));
    let one = adapt_pack_one_sample(&t.path().join("one"));
    assert_eq!(one.len(), 1);
}

fn adapt_pack_one_sample(dir: &Path) -> PackDataset {
    struct One;
    impl Dataset for One {
        fn len(&self) -> usize {
            1
        }
        fn read<'a>(
            &'a self,
            i: usize,
            buf: &mut Sample,
        ) -> Result<adapt_dataset::Read<'a>, Error> {
            adapt_dataset::check_index(i, 1)?;
            *buf = Sample::hwc(vec![1, 2, 3], 1, 1, 3, 5)?;
            Ok(adapt_dataset::Read::Filled)
        }
    }
    round_trip(&One, dir, &opts(10, Payload::Raw))
}

#[test]
fn a_flipped_byte_is_found_by_verify_and_by_the_reader() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 40);
    let dir = t.path().join("p");
    write_pack(&c, &source("cifar10"), &dir, &opts(20, Payload::Raw), &none).unwrap();
    let (name0, name1) = (shard_file(&dir, 0), shard_file(&dir, 1));
    let shard = dir.join(&name1);
    let mut bytes = std::fs::read(&shard).unwrap();
    bytes[100] ^= 0x40; // inside the first frame
    std::fs::write(&shard, bytes).unwrap();
    let err = verify(&dir).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&name1) && text.contains("frame 0"), "{text}");
    assert!(!text.contains(&name0), "{text}");
    let pack = PackDataset::open(&dir).unwrap();
    let e = pack.get(20).unwrap_err();
    assert!(
        matches!(
            e.reader_error::<PackError>(),
            Some(PackError::BadFrame { frame: 0, .. })
        ),
        "{e}"
    );
    assert!(pack.get(0).is_ok(), "the undamaged shard still reads");
}

#[test]
fn damaged_files_are_clear_errors() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 10);
    let dir = t.path().join("p");
    write_pack(&c, &source("cifar10"), &dir, &opts(10, Payload::Raw), &none).unwrap();
    let name = shard_file(&dir, 0);
    let shard = dir.join(&name);
    let good = std::fs::read(&shard).unwrap();
    let cases: [(&str, Vec<u8>, &str); 3] = [
        (
            "magic",
            [b"NOTAPACK".as_slice(), &good[8..]].concat(),
            "wrong magic",
        ),
        (
            "version",
            {
                let mut b = good.clone();
                b[8] = 9;
                b
            },
            "version 9",
        ),
        ("truncated", good[..good.len() - 10].to_vec(), "end marker"),
    ];
    for (what, bytes, expect) in cases {
        std::fs::write(&shard, &bytes).unwrap();
        let err = PackDataset::open(&dir).err().unwrap();
        assert!(
            err.to_string().contains(expect) && err.to_string().contains(&name),
            "{what}: {err}"
        );
        assert!(verify(&dir).is_err(), "{what}");
    }
    std::fs::write(&shard, &good).unwrap();
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("\"samples\": 10", "\"samples\": 11");
    std::fs::write(&manifest, text).unwrap();
    let err = PackDataset::open(&dir).err().unwrap();
    assert!(matches!(err, PackError::Manifest { .. }), "{err}");
}

/// A source that fails at one origin until told otherwise, counting reads.
struct Flaky<'a> {
    inner: &'a dyn Dataset,
    fail_at: Option<usize>,
    /// Reads that succeed whatever the index (the source digest's pass).
    fail_after: usize,
    reads: AtomicUsize,
}
impl<'a> Flaky<'a> {
    fn new(inner: &'a dyn Dataset, fail_at: Option<usize>, fail_after: usize) -> Self {
        Self {
            inner,
            fail_at,
            fail_after,
            reads: AtomicUsize::new(0),
        }
    }
}
impl Dataset for Flaky<'_> {
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn read<'a>(&'a self, i: usize, buf: &mut Sample) -> Result<adapt_dataset::Read<'a>, Error> {
        let n = self.reads.fetch_add(1, Ordering::Relaxed);
        if Some(i) == self.fail_at && n >= self.fail_after {
            return Err(Error::InvalidParameter("disk went away".into()));
        }
        self.inner.read(i, buf)
    }
    fn source(&self, i: usize) -> String {
        self.inner.source(i)
    }
}

#[test]
fn an_interrupted_write_looks_incomplete_and_a_rerun_finishes_it() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 30);
    let dir = t.path().join("p");
    let o = opts(10, Payload::Raw);
    // The origin packed first in shard 2 (pack indices 20..30).
    let order = adapt_dataset::permutation(30, o.seed, 0);
    let flaky = Flaky::new(&c, Some(order[25]), 30);
    let err = write_pack(&flaky, &source("cifar10"), &dir, &o, &none).unwrap_err();
    assert!(matches!(err, PackError::Source { .. }), "{err}");
    assert!(
        !dir.join("manifest.json").exists(),
        "no manifest: the pack does not look complete"
    );
    assert!(PackDataset::open(&dir).is_err());
    let names = names_in(&dir);
    assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
    // A leftover temporary file from a killed run (cut before its header)
    // is replaced; a user's file that merely looks like one is not touched.
    let shard0 = names.iter().find(|n| n.ends_with("-00000.adpk")).unwrap();
    let killed = shard0.replace("-00000.adpk", "-00002.adpk.partial");
    std::fs::write(dir.join(&killed), b"").unwrap();
    std::fs::write(dir.join("shard-00002.partial"), b"my notes").unwrap();

    let good = Flaky::new(&c, None, 0);
    write_pack(&good, &source("cifar10"), &dir, &o, &none).unwrap();
    // The source digest reads all 30; then shards 0 and 1 were kept
    // (verified): only shard 2 (+1 size probe) was read again.
    assert_eq!(good.reads.load(Ordering::Relaxed), 30 + 11);
    verify(&dir).unwrap();
    round_trip(&c, &dir, &o);
    assert_eq!(
        std::fs::read(dir.join("shard-00002.partial")).unwrap(),
        b"my notes"
    );
    assert!(!dir.join(&killed).exists());
}

#[test]
fn another_pack_is_not_overwritten_unless_asked() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 10);
    let dir = t.path().join("p");
    write_pack(&c, &source("cifar10"), &dir, &opts(5, Payload::Raw), &none).unwrap();
    let other = PackOptions {
        seed: 10,
        ..opts(5, Payload::Raw)
    };
    let err = write_pack(&c, &source("cifar10"), &dir, &other, &none).unwrap_err();
    assert!(matches!(err, PackError::Exists { .. }), "{err}");
    write_pack(
        &c,
        &source("cifar10"),
        &dir,
        &PackOptions {
            overwrite: true,
            ..other
        },
        &none,
    )
    .unwrap();
    assert_eq!(PackDataset::open(&dir).unwrap().manifest().seed, 10);
}

#[test]
fn streaming_covers_each_sample_once_per_epoch_across_ranks() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 200);
    let dir = t.path().join("p");
    write_pack(&c, &source("cifar10"), &dir, &opts(50, Payload::Raw), &none).unwrap();
    let pack = std::sync::Arc::new(PackDataset::open(&dir).unwrap());
    for world in [1, 2, 3] {
        let mut all = Vec::new();
        let mut lengths = Vec::new();
        for rank in 0..world {
            let s = ShardStream::new(&pack, 4, 8).with_rank(rank, world);
            let o = s.order(1);
            assert_eq!(o, s.order(1), "deterministic");
            assert_ne!(o, s.order(2), "reshuffled per epoch");
            lengths.push(o.len());
            all.extend(o);
        }
        // Ranks of fewer shards are padded, so every rank runs as long.
        assert!(lengths.iter().all(|&l| l == lengths[0]), "{lengths:?}");
        all.sort_unstable();
        all.dedup();
        assert_eq!(all, (0..200).collect::<Vec<_>>(), "world {world}");
    }
    // Locality and shuffle quality, per batch of 16: shards touched, and
    // how far apart in the source order its samples are.
    let stats = |order: &[usize]| {
        let (mut shards, mut spread, mut n) = (0usize, 0usize, 0usize);
        for b in order.chunks_exact(16) {
            let mut s: Vec<usize> = b.iter().map(|i| i / 50).collect();
            s.sort_unstable();
            s.dedup();
            shards += s.len();
            let origins: Vec<usize> = b.iter().map(|&i| pack.origin(i).unwrap()).collect();
            spread += origins.iter().max().unwrap() - origins.iter().min().unwrap();
            n += 1;
        }
        (shards as f64 / n as f64, spread as f64 / n as f64)
    };
    let (stream_shards, stream_spread) = stats(&ShardStream::new(&pack, 4, 8).order(0));
    let (random_shards, random_spread) = stats(&adapt_dataset::permutation(200, 4, 0));
    println!(
        "per batch of 16 from 200 samples in shards of 50: streaming touches {stream_shards:.1} shards, source spread {stream_spread:.0}; random access {random_shards:.1} shards, spread {random_spread:.0}"
    );
    assert!(stream_shards < 2.0 && random_shards > 3.0);
    assert!(
        stream_spread > 100.0,
        "packing shuffled the source: batches still span it"
    );
}

#[test]
fn every_codec_round_trips_and_is_recorded() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 25);
    let mut sizes = Vec::new();
    for codec in [Codec::Zstd, Codec::Lz4, Codec::None] {
        let o = PackOptions {
            codec,
            ..opts(10, Payload::Raw)
        };
        let dir = t.path().join(format!("p-{codec}"));
        let pack = round_trip(&c, &dir, &o);
        assert_eq!(pack.manifest().codec, codec);
        sizes.push(pack.manifest().shards.iter().map(|s| s.bytes).sum::<u64>());
    }
    // zstd is the smallest (the synthetic pixels compress a little; LZ4's
    // framing can exceed the raw size on noise).
    assert!(sizes[0] <= sizes[1] && sizes[0] <= sizes[2], "{sizes:?}");
    assert!("snappy".parse::<Codec>().is_err());
}

/// A copy of `c`'s files with every pixel of sample `i` changed: the same
/// names, counts and sizes, other content.
fn regenerate(c: &Path, to: &Path) -> Cifar10 {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(c).unwrap() {
        let e = e.unwrap();
        let mut bytes = std::fs::read(e.path()).unwrap();
        if e.file_name().to_string_lossy().starts_with("data_batch") && bytes.len() > 3000 {
            for b in &mut bytes[1..3073] {
                *b = b.wrapping_add(1);
            }
        }
        std::fs::write(to.join(e.file_name()), bytes).unwrap();
    }
    Cifar10::open(to, Split::Train).unwrap()
}

#[test]
fn a_pack_is_tied_to_its_source_content_not_its_path() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("c");
    let c = cifar(&src, 30);
    let dir = t.path().join("p");
    let o = opts(10, Payload::Raw);
    let m = write_pack(&c, &source("cifar10"), &dir, &o, &none).unwrap();
    assert!(m.source_digest.is_some());
    // The same content elsewhere is the same pack: kept as is.
    let moved = t.path().join("moved");
    std::fs::rename(&src, &moved).unwrap();
    let c = Cifar10::open(&moved, Split::Train).unwrap();
    let moved_src = SourceInfo {
        path: "elsewhere".into(),
        ..source("cifar10")
    };
    let again = write_pack(&c, &moved_src, &dir, &o, &none).unwrap();
    assert_eq!(again.pack_id, m.pack_id);

    // Regenerated in place (same names and counts, other pixels): refused
    // with the reason, then replaced on request, old shards gone after.
    let regen = regenerate(&moved, &t.path().join("regen"));
    assert_ne!(
        adapt_pack::source_digest(&regen).unwrap(),
        adapt_pack::source_digest(&c).unwrap()
    );
    let err = write_pack(&regen, &source("cifar10"), &dir, &o, &none).unwrap_err();
    assert!(
        matches!(err, PackError::Exists { .. }) && err.to_string().contains("source has changed"),
        "{err}"
    );
    verify(&dir).unwrap();
    let err = adapt_pack::check_source(&Manifest::load(&dir).unwrap(), &dir, &regen).unwrap_err();
    assert!(matches!(err, PackError::Stale { .. }), "{err}");
    adapt_pack::check_source(&Manifest::load(&dir).unwrap(), &dir, &c).unwrap();

    let old_files: Vec<String> = m.shards.iter().map(|s| s.file.clone()).collect();
    let over = PackOptions {
        overwrite: true,
        ..o.clone()
    };
    let new = write_pack(&regen, &source("cifar10"), &dir, &over, &none).unwrap();
    assert_ne!(new.pack_id, m.pack_id);
    round_trip(&regen, &dir, &over);
    let names = names_in(&dir);
    assert!(old_files.iter().all(|f| !names.contains(f)), "{names:?}");
    assert_eq!(names.len(), new.shards.len() + 1, "{names:?}");
}

#[test]
fn overwrite_keeps_the_old_pack_until_the_new_one_is_complete() {
    let t = tempfile::tempdir().unwrap();
    let c = cifar(&t.path().join("c"), 30);
    let dir = t.path().join("p");
    let o = opts(10, Payload::Raw);
    let m = write_pack(&c, &source("cifar10"), &dir, &o, &none).unwrap();
    // The user's own files in the pack folder, one named like a shard of
    // the old layout, one like a temporary file.
    std::fs::write(dir.join("README.txt"), b"mine").unwrap();
    std::fs::write(dir.join("shard-00000.adpk"), b"mine too").unwrap();
    std::fs::write(
        dir.join("shard-0123456789abcdef-00001.adpk.partial"),
        b"also mine",
    )
    .unwrap();
    // The new source has a bad sample: the overwrite fails midway.
    let other = PackOptions {
        seed: 10,
        overwrite: true,
        ..o.clone()
    };
    let order = adapt_dataset::permutation(30, other.seed, 0);
    let flaky = Flaky::new(&c, Some(order[25]), 0);
    // The digest pass reads every sample first: the failure shows there.
    let err = write_pack(&flaky, &source("cifar10"), &dir, &other, &none).unwrap_err();
    assert!(matches!(err, PackError::Source { .. }), "{err}");
    // The old pack is whole and the same.
    verify(&dir).unwrap();
    assert_eq!(Manifest::load(&dir).unwrap(), m);
    round_trip(&c, &dir, &o);
    // A clean overwrite replaces it, and leaves the user's files alone.
    write_pack(&c, &source("cifar10"), &dir, &other, &none).unwrap();
    assert_eq!(Manifest::load(&dir).unwrap().seed, 10);
    assert_eq!(std::fs::read(dir.join("README.txt")).unwrap(), b"mine");
    assert_eq!(
        std::fs::read(dir.join("shard-00000.adpk")).unwrap(),
        b"mine too"
    );
    assert_eq!(
        std::fs::read(dir.join("shard-0123456789abcdef-00001.adpk.partial")).unwrap(),
        b"also mine"
    );
    assert!(m.shards.iter().all(|s| !dir.join(&s.file).exists()));
}

#[test]
fn a_failure_while_writing_shards_leaves_the_old_pack_readable() {
    // A source that digests fine but fails when a shard is built (the
    // digest reads encoded bytes, the raw store decodes them): the old
    // pack must survive a failure in the shard-writing phase too.
    let t = tempfile::tempdir().unwrap();
    adapt_synth::celeba(
        &t.path().join("ce"),
        adapt_synth::CelebASpec {
            count: 12,
            identities: 2,
            quality: 90,
            seed: 2,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    let ce = CelebA::open(&t.path().join("ce"), CelebAOptions::default()).unwrap();
    let dir = t.path().join("p");
    let o = opts(5, Payload::Raw);
    let m = write_pack(&ce, &source("celeba"), &dir, &o, &none).unwrap();
    // One image replaced by bytes that are not a JPEG.
    let img = std::fs::read_dir(t.path().join("ce/img_align_celeba"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .min()
        .unwrap();
    std::fs::write(&img, b"not a jpeg at all").unwrap();
    let ce = CelebA::open(&t.path().join("ce"), CelebAOptions::default()).unwrap();
    let over = PackOptions {
        overwrite: true,
        ..o
    };
    let err = write_pack(&ce, &source("celeba"), &dir, &over, &none).unwrap_err();
    assert!(matches!(err, PackError::Source { .. }), "{err}");
    assert_eq!(Manifest::load(&dir).unwrap(), m);
    verify(&dir).unwrap();
    let names = names_in(&dir);
    assert!(names.iter().all(|n| !n.ends_with(".partial")), "{names:?}");
}

#[test]
fn a_missing_or_oversized_manifest_is_a_typed_error_naming_the_file() {
    let t = tempfile::tempdir().unwrap();
    let Err(err) = PackDataset::open(t.path()) else {
        panic!("opened");
    };
    assert!(
        matches!(&err, PackError::Manifest { path, message } if path.ends_with("manifest.json") && message.contains("no manifest")),
        "{err}"
    );
    // A sparse 65 MiB manifest: refused before it is read whole.
    let f = std::fs::File::create(t.path().join("manifest.json")).unwrap();
    f.set_len(65 << 20).unwrap();
    let Err(err) = PackDataset::open(t.path()) else {
        panic!("opened");
    };
    assert!(
        matches!(&err, PackError::TooLarge { path, limit } if path.ends_with("manifest.json") && *limit == 64 << 20),
        "{err}"
    );
}

fn celeba_set(dir: &Path, count: usize) -> CelebA {
    adapt_synth::celeba(
        dir,
        adapt_synth::CelebASpec {
            count,
            identities: 2,
            quality: 90,
            seed: 4,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    CelebA::open(dir, CelebAOptions::default()).unwrap()
}

#[test]
fn an_undecodable_image_is_refused_when_packing_naming_its_file() {
    // Cut in half: the file reads fine, the image does not decode; cut in
    // half and closed with an end marker: the decoder fills the rest with
    // grey and reports success, the scan check finds it short.
    type Cut = fn(&[u8]) -> Vec<u8>;
    let cuts: [(&str, Cut); 2] = [
        ("cut", |j| j[..j.len() / 2].to_vec()),
        ("cut and closed", |j| {
            [&j[..j.len() / 2], &[0xFF, 0xD9][..]].concat()
        }),
    ];
    for (what, cut) in cuts {
        let t = tempfile::tempdir().unwrap();
        let ce = celeba_set(&t.path().join("ce"), 6);
        let file = t.path().join("ce/img_align_celeba/000003.jpg");
        let jpeg = std::fs::read(&file).unwrap();
        std::fs::write(&file, cut(&jpeg)).unwrap();
        let out = t.path().join("pack");
        let err = write_pack(
            &ce,
            &source("celeba"),
            &out,
            &opts(4, Payload::Encoded),
            &none,
        )
        .unwrap_err();
        assert!(
            matches!(&err, PackError::Undecodable { index: 2, .. })
                && err.to_string().contains("000003.jpg"),
            "{what}: {err}"
        );
        assert!(
            !out.join("manifest.json").exists(),
            "{what}: no pack was published"
        );
    }
}

/// Rewrites `dir`'s manifest through `edit`.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
}

#[test]
fn verify_checks_the_manifest_against_every_shard() {
    let t = tempfile::tempdir().unwrap();
    let ce = celeba_set(&t.path().join("ce"), 9);
    let good = t.path().join("good");
    write_pack(
        &ce,
        &source("celeba"),
        &good,
        &opts(4, Payload::Encoded),
        &none,
    )
    .unwrap();
    verify(&good).unwrap();
    type Edit = fn(&mut serde_json::Value);
    let cases: [(&str, Edit); 4] = [
        ("samples", |m| m["samples"] = 10.into()),
        ("shape", |m| m["shape"] = serde_json::json!([64, 64, 3])),
        ("classes", |m| m["classes"] = 1.into()),
        ("shard size", |m| m["shard_size"] = 3.into()),
    ];
    for (what, edit) in cases {
        let dir = t.path().join(what.replace(' ', "-"));
        std::fs::create_dir(&dir).unwrap();
        for e in std::fs::read_dir(&good).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        edit_manifest(&dir, edit);
        let err = verify(&dir).unwrap_err();
        assert!(
            matches!(err, PackError::Damaged { .. } | PackError::Manifest { .. }),
            "{what}: {err}"
        );
    }
}
