//! The fuzz targets: one per parser, each fed through the reader a user
//! would call, on files written to a temporary folder where the reader
//! needs files.

use adapt_dataset::{Dataset, Read, Sample, Shape};
use adapt_formats::{CelebA, CelebAOptions, Cifar10, Cifar100, ImageFolder, Split};
use std::path::Path;
use std::sync::OnceLock;

/// One parser under test.
#[derive(Clone, Copy)]
pub struct Target {
    /// Its name (`cargo xtask fuzz --target NAME`).
    pub name: &'static str,
    /// Valid inputs, the starting points of the mutations.
    pub seeds: fn() -> Vec<Vec<u8>>,
    /// Parses one input: `true` when accepted, `false` when refused with
    /// an error. A panic or a hang is the failure fuzzing looks for.
    pub run: fn(&[u8]) -> bool,
}

/// Every target.
pub fn targets() -> Vec<Target> {
    vec![
        Target {
            name: "cifar10",
            seeds: cifar_seeds,
            run: cifar_run,
        },
        Target {
            name: "cifar-pickle",
            seeds: pickle_seeds,
            run: pickle_run,
        },
        Target {
            name: "celeba-identity",
            seeds: celeba_seeds,
            run: celeba_run,
        },
        Target {
            name: "image",
            seeds: image_seeds,
            run: image_run,
        },
        Target {
            name: "pack-shard",
            seeds: shard_seeds,
            run: shard_run,
        },
        Target {
            name: "pack-manifest",
            seeds: manifest_seeds,
            run: manifest_run,
        },
        Target {
            name: "pack-records",
            seeds: records_seeds,
            run: records_run,
        },
        Target {
            name: "profile",
            seeds: profile_seeds,
            run: profile_run,
        },
        Target {
            name: "report",
            seeds: report_seeds,
            run: report_run,
        },
        Target {
            name: "pipeline-text",
            seeds: pipeline_seeds,
            run: pipeline_run,
        },
        Target {
            name: "checkpoint",
            seeds: checkpoint_seeds,
            run: checkpoint_run,
        },
        Target {
            name: "webdataset-shard",
            seeds: webdataset_seeds,
            run: webdataset_run,
        },
        #[cfg(feature = "parquet")]
        Target {
            name: "parquet-file",
            seeds: parquet_seeds,
            run: parquet_run,
        },
        #[cfg(feature = "parquet")]
        Target {
            name: "arrow-file",
            seeds: arrow_seeds,
            run: arrow_run,
        },
    ]
}

fn tmp() -> tempfile::TempDir {
    // A temp dir that cannot be made is the harness's failure, not the input's.
    tempfile::tempdir().unwrap_or_else(|e| panic!("harness: temp dir: {e}"))
}

fn write(path: &Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("harness: {e}"));
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("harness: {e}"));
}

/// Reads every sample; `false` at the first error.
fn read_all(ds: &dyn Dataset) -> bool {
    let mut s = Sample::default();
    (0..ds.len()).all(|i| match ds.read(i, &mut s) {
        Ok(Read::Lent(v)) => v.validate().is_ok(),
        Ok(Read::Filled) => s.validate().is_ok(),
        Err(_) => false,
    })
}

fn record(label: u8) -> Vec<u8> {
    std::iter::once(label)
        .chain((0..3072).map(|i| (i * 7 % 251) as u8))
        .collect()
}

fn cifar_seeds() -> Vec<Vec<u8>> {
    vec![[record(1), record(9), record(0)].concat(), record(4)]
}

fn cifar_run(input: &[u8]) -> bool {
    let t = tmp();
    write(&t.path().join("data_batch_1.bin"), input);
    for name in [
        "data_batch_2.bin",
        "data_batch_3.bin",
        "data_batch_4.bin",
        "data_batch_5.bin",
        "test_batch.bin",
    ] {
        write(&t.path().join(name), &record(2));
    }
    match Cifar10::open(t.path(), Split::Train) {
        Ok(c) => read_all(&c),
        Err(_) => false,
    }
}

/// torchvision's CIFAR-100 test pickle as numpy and pickle write it, of
/// three records and of one.
fn pickle_seeds() -> Vec<Vec<u8>> {
    let t = tmp();
    let (a, b) = (record(0), record(0));
    let images = [(3u8, &a[1..]), (99, &b[1..]), (0, &a[1..])];
    [&images[..], &images[..1]]
        .iter()
        .map(|records| {
            let path = t.path().join("test");
            adapt_formats::write_batch_pickle(&path, true, records)
                .unwrap_or_else(|e| panic!("harness: {e}"));
            std::fs::read(&path).unwrap_or_else(|e| panic!("harness: {e}"))
        })
        .collect()
}

/// The input as `cifar-100-python/test`, beside a valid training pickle
/// and meta file, read by the reader that runs nothing.
fn pickle_run(input: &[u8]) -> bool {
    let t = tmp();
    let dir = t.path().join("cifar-100-python");
    write(&dir.join("test"), input);
    let r = record(0);
    adapt_formats::write_batch_pickle(&dir.join("train"), true, &[(5, &r[1..])])
        .and_then(|()| adapt_formats::write_meta_pickle(&dir, true, &["apple"; 100]))
        .unwrap_or_else(|e| panic!("harness: {e}"));
    match Cifar100::open(t.path(), Split::Test) {
        Ok(c) => read_all(&c),
        Err(_) => false,
    }
}

fn jpeg(w: u32, h: u32) -> Vec<u8> {
    let px: Vec<u8> = (0..w * h * 3).map(|i| (i * 13 % 256) as u8).collect();
    adapt_formats::encode_jpeg(Path::new("seed.jpg"), &px, w, h, 80)
        .unwrap_or_else(|e| panic!("harness: {e}"))
}

fn celeba_seeds() -> Vec<Vec<u8>> {
    vec![
        b"000001.jpg 5\n000002.jpg 7\n".to_vec(),
        b"000002.jpg 1\r\n".to_vec(),
    ]
}

fn celeba_run(input: &[u8]) -> bool {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    let image = IMAGE.get_or_init(|| jpeg(178, 218));
    let t = tmp();
    for name in ["000001.jpg", "000002.jpg"] {
        write(&t.path().join("img_align_celeba").join(name), image);
    }
    write(&t.path().join("identity_CelebA.txt"), input);
    match CelebA::open(t.path(), CelebAOptions::default()) {
        Ok(c) => read_all(&c),
        Err(_) => false,
    }
}

fn image_seeds() -> Vec<Vec<u8>> {
    let png = |c: u32| {
        let px: Vec<u8> = (0..8 * 6 * c).map(|i| (i * 31 % 256) as u8).collect();
        adapt_formats::encode_png(Path::new("seed.png"), &px, 8, 6, c)
            .unwrap_or_else(|e| panic!("harness: {e}"))
    };
    vec![png(3), png(4), png(1), jpeg(16, 12), jpeg(40, 24)]
}

/// The image read as a folder's one file, and checked whole as packing
/// checks it (the JPEG scan reader).
fn image_run(input: &[u8]) -> bool {
    let t = tmp();
    write(&t.path().join("a").join("x.png"), input);
    let whole = adapt_formats::check_whole(Path::new("x.png"), input).is_ok();
    let read = match ImageFolder::open(t.path()) {
        Ok(f) => read_all(&f),
        Err(_) => false,
    };
    whole && read
}

/// WebDataset shards written by our writer: a PNG and a JPEG sample with
/// labels and captions, and one of a long (GNU) member name.
fn webdataset_seeds() -> Vec<Vec<u8>> {
    let shard = |samples: &[(&str, &str, Vec<u8>)]| {
        let t = tmp();
        let mut w = adapt_formats::WebDatasetWriter::new(t.path(), "s", 100)
            .unwrap_or_else(|e| panic!("harness: {e}"));
        for (key, ext, image) in samples {
            w.write(key, &[(ext, image), ("cls", b"3"), ("txt", b"a caption")])
                .unwrap_or_else(|e| panic!("harness: {e}"));
        }
        let written = w.finish().unwrap_or_else(|e| panic!("harness: {e}"));
        std::fs::read(&written[0]).unwrap_or_else(|e| panic!("harness: {e}"))
    };
    let png = image_seeds().swap_remove(0);
    let long = format!("{}/x", "d".repeat(150));
    vec![
        shard(&[("a", "png", png.clone()), ("b", "jpg", jpeg(16, 12))]),
        shard(&[(&long, "png", png)]),
    ]
}

fn webdataset_run(input: &[u8]) -> bool {
    let t = tmp();
    let path = t.path().join("shard.tar");
    write(&path, input);
    let options = adapt_formats::WebDatasetOptions::default();
    match adapt_formats::WebDataset::open(&path.display().to_string(), &options) {
        Ok(ds) => read_all(&ds),
        Err(_) => false,
    }
}

/// Parquet files written by our writer in the Hugging Face layout: a PNG
/// and a JPEG row with `ClassLabel` names, in one and in two row groups.
#[cfg(feature = "parquet")]
fn parquet_seeds() -> Vec<Vec<u8>> {
    let file = |rows_per_group| {
        let t = tmp();
        let options = adapt_formats::ParquetWriterOptions {
            rows_per_file: 100,
            rows_per_group,
            class_names: Some(vec!["a".into(), "b".into()]),
        };
        let mut w = adapt_formats::ParquetWriter::new(t.path(), "train", options)
            .unwrap_or_else(|e| panic!("harness: {e}"));
        let png = image_seeds().swap_remove(0);
        for (i, image) in [png, jpeg(16, 12)].iter().enumerate() {
            w.write(image, Some("x.png"), i as i64)
                .unwrap_or_else(|e| panic!("harness: {e}"));
        }
        let written = w.finish().unwrap_or_else(|e| panic!("harness: {e}"));
        std::fs::read(&written[0]).unwrap_or_else(|e| panic!("harness: {e}"))
    };
    vec![file(100), file(1)]
}

#[cfg(feature = "parquet")]
fn parquet_run(input: &[u8]) -> bool {
    let t = tmp();
    let path = t.path().join("train-00000-of-00001.parquet");
    write(&path, input);
    let options = adapt_formats::ParquetOptions::default();
    match adapt_formats::Parquet::open(&path.display().to_string(), &options) {
        Ok(ds) => read_all(&ds),
        Err(_) => false,
    }
}

/// Arrow files as `save_to_disk` writes them (our writer): a PNG and a
/// JPEG row with `ClassLabel` names, in one and in two record batches.
#[cfg(feature = "parquet")]
fn arrow_seeds() -> Vec<Vec<u8>> {
    let file = |rows_per_batch| {
        let t = tmp();
        let names = Some(vec!["a".into(), "b".into()]);
        let mut w = adapt_formats::ArrowWriter::new(t.path(), rows_per_batch, names)
            .unwrap_or_else(|e| panic!("harness: {e}"));
        let png = image_seeds().swap_remove(0);
        for (i, image) in [png, jpeg(16, 12)].iter().enumerate() {
            w.write(image, Some("x.png"), i as i64)
                .unwrap_or_else(|e| panic!("harness: {e}"));
        }
        let written = w.finish().unwrap_or_else(|e| panic!("harness: {e}"));
        std::fs::read(written).unwrap_or_else(|e| panic!("harness: {e}"))
    };
    vec![file(100), file(1)]
}

#[cfg(feature = "parquet")]
fn arrow_run(input: &[u8]) -> bool {
    let t = tmp();
    let path = t.path().join("data-00000-of-00001.arrow");
    write(&path, input);
    let options = adapt_formats::ParquetOptions::default();
    match adapt_formats::ArrowFiles::open_files(vec![path], &options) {
        Ok(ds) => read_all(&ds),
        Err(_) => false,
    }
}

/// A small in-memory source for the pack seeds.
struct Tiny;

impl Dataset for Tiny {
    fn len(&self) -> usize {
        6
    }
    fn read<'a>(
        &'a self,
        index: usize,
        buf: &mut Sample,
    ) -> Result<Read<'a>, adapt_dataset::Error> {
        adapt_dataset::check_index(index, 6)?;
        *buf = Sample::hwc(
            vec![index as u8 * 40; 16 * 16 * 3],
            16,
            16,
            3,
            index as i64 % 3,
        )?;
        Ok(Read::Filled)
    }
    fn sample_shape(&self) -> Option<Shape> {
        Some(Shape::new(16, 16, 3))
    }
}

/// A valid pack's (manifest, first shard) bytes.
fn pack() -> &'static (Vec<u8>, Vec<u8>, String) {
    static PACK: OnceLock<(Vec<u8>, Vec<u8>, String)> = OnceLock::new();
    PACK.get_or_init(|| {
        let t = tmp();
        let options = adapt_pack::PackOptions {
            shard_size: 6,
            // One frame per shard, so `pack-records` can rebuild it.
            frame_bytes: 1 << 20,
            ..adapt_pack::PackOptions::default()
        };
        let source = adapt_pack::SourceInfo {
            dataset: "tiny".into(),
            path: "memory".into(),
            class_names: None,
        };
        let m = adapt_pack::write_pack(&Tiny, &source, t.path(), &options, &|_| {})
            .unwrap_or_else(|e| panic!("harness: {e}"));
        let shard = m.shards[0].file.clone();
        let read = |p: &Path| std::fs::read(p).unwrap_or_else(|e| panic!("harness: {e}"));
        (
            read(&t.path().join("manifest.json")),
            read(&t.path().join(&shard)),
            shard,
        )
    })
}

fn open_pack(manifest: &[u8], shard: &[u8]) -> bool {
    let (_, _, name) = pack();
    let t = tmp();
    write(&t.path().join("manifest.json"), manifest);
    write(&t.path().join(name), shard);
    // Verification reads everything; its verdict is the answer.
    let verified = adapt_pack::verify(t.path()).is_ok();
    let read = match adapt_pack::PackDataset::open(t.path()) {
        Ok(p) => read_all(&p),
        Err(_) => false,
    };
    verified && read
}

fn shard_seeds() -> Vec<Vec<u8>> {
    vec![pack().1.clone()]
}

fn shard_run(input: &[u8]) -> bool {
    open_pack(&pack().0, input)
}

fn manifest_seeds() -> Vec<Vec<u8>> {
    vec![pack().0.clone()]
}

fn manifest_run(input: &[u8]) -> bool {
    open_pack(input, &pack().1)
}

fn records_seeds() -> Vec<Vec<u8>> {
    vec![adapt_pack::fuzzing::payload_of(&pack().1).unwrap_or_else(|| panic!("harness: payload"))]
}

/// The records of a frame, mutated behind valid checksums: the record
/// decoder's lengths are what is under test.
fn records_run(input: &[u8]) -> bool {
    let (manifest, shard, _) = pack();
    let Some(rebuilt) = adapt_pack::fuzzing::shard_with_payload(shard, input, 6) else {
        return false;
    };
    let mut m: serde_json::Value =
        serde_json::from_slice(manifest).unwrap_or_else(|e| panic!("harness: {e}"));
    m["shards"][0]["xxh3"] = adapt_pack::fuzzing::file_hash(&rebuilt).into();
    m["shards"][0]["bytes"] = rebuilt.len().into();
    open_pack(m.to_string().as_bytes(), &rebuilt)
}

fn profile_seeds() -> Vec<Vec<u8>> {
    let machine = adapt_tune::Machine::detect();
    let text = serde_json::json!({
        "version": 1,
        "entries": [{
            "key": { "dataset": "cifar10-50000-x|normalize(cifar10)|f32", "batch_size": 128, "machine": machine },
            "knobs": { "num_workers": 2, "prefetch_factor": 4, "pin_memory": false, "persistent_workers": true },
            "seconds": 0.05,
        }],
    });
    vec![text.to_string().into_bytes()]
}

fn profile_run(input: &[u8]) -> bool {
    let t = tmp();
    let path = t.path().join("profile.json");
    write(&path, input);
    adapt_tune::Profile::load(&path).is_ok()
}

fn report_seeds() -> Vec<Vec<u8>> {
    vec![include_bytes!("../../../docs/reports/cifar10-2cores.json").to_vec()]
}

fn report_run(input: &[u8]) -> bool {
    let Ok(report) = serde_json::from_slice::<adapt_tune::Report>(input) else {
        return false;
    };
    let strategies = [("plain", adapt_search_plain())];
    adapt_tune::replay(&report, &strategies, 2, 0.05).is_ok()
}

fn adapt_search_plain() -> adapt_search::AvlOptions {
    adapt_search::AvlOptions::plain()
}

fn pipeline_seeds() -> Vec<Vec<u8>> {
    [
        "random_crop(32,padding=4),hflip,normalize(cifar10)",
        "random_resized_crop(224,scale=(0.08,1.0),ratio=(0.75,1.3333)),vflip(p=0.2),color_jitter(0.4,0.4,0.4)",
        "resize(256),center_crop(224x200),normalize(mean=(0.5,0.5,0.5),std=(0.2,0.2,0.2))",
        "random_crop(28,padding=(1,2,3,4),fill=(1,2,3),padding_mode=reflect)",
        "rand_augment(num_ops=3,magnitude=30),trivial_augment(interpolation=bicubic,fill=(1,2,3)),auto_augment(policy=svhn,interpolation=bilinear)",
        "resize(40,interpolation=bicubic),color_jitter(0.4,0.4,0.4,hue=0.5),random_erasing(p=1,value=random),normalize(imagenet)",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect()
}

fn pipeline_run(input: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(input) else {
        return false;
    };
    let Ok(steps) = adapt_pipeline::parse_transforms(text) else {
        return false;
    };
    // The canonical text reads back to the same steps.
    let canonical = adapt_pipeline::transforms_text(&steps);
    match adapt_pipeline::parse_transforms(&canonical) {
        Ok(again) => assert_eq!(
            again, steps,
            "canonical text {canonical:?} reads back differently"
        ),
        Err(e) => panic!("canonical text {canonical:?} of {text:?} does not parse: {e}"),
    }
    // Every step builds, applies its shape rule to a CIFAR-sized sample and
    // then its pixels (small outputs only), giving the shape it promised.
    let mut shape = Shape::new(32, 32, 3);
    let mut sample = adapt_dataset::Sample::hwc(vec![90; 32 * 32 * 3], 32, 32, 3, 0).ok();
    let mut scratch = adapt_transform::Scratch::default();
    for s in &steps {
        match s.build_in(&steps) {
            Ok(Some(t)) => match t.output_shape(shape) {
                Ok(next) => {
                    shape = next;
                    if shape.len() > 1 << 20 {
                        sample = None;
                    }
                    if let Some(px) = sample.as_mut() {
                        if t.apply(px, &mut scratch).is_err() {
                            return false;
                        }
                        assert_eq!(px.shape, shape, "{s} made another shape than it said");
                    }
                }
                Err(_) => return false,
            },
            Ok(None) => {}
            Err(_) => return false,
        }
    }
    true
}

fn checkpoint_seeds() -> Vec<Vec<u8>> {
    let state = adapt_loader::LoaderState {
        format: 1,
        epoch: 3,
        batches: 7,
        segments: vec![adapt_loader::Segment {
            world_size: 4,
            batches: 2,
        }],
        rank: 1,
        world_size: 2,
        seed: 9,
        batch_size: 32,
        shuffle: true,
        drop_last: false,
        dataset_len: 50_000,
        identity: "cifar10-50000-x|hflip|f32".into(),
        custom_sampler: false,
        sampler: String::new(),
    };
    vec![state.to_text().into_bytes()]
}

fn checkpoint_run(input: &[u8]) -> bool {
    std::str::from_utf8(input).is_ok_and(|t| adapt_loader::LoaderState::from_text(t).is_ok())
}
