//! The front on small generated data: one pool rule for every front, the
//! tuner keyed by the pipeline a run opens (split and parts included).

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt::engines::transfer::{CountingAllocator, PinnedPool};
use adapt::{
    DatasetSpec, LoaderKnobs, Pipeline, Run, RunOptions, Strategy, TrialSpec, TuneOptions,
    pinned_pool_size,
};
use std::path::Path;
use std::sync::Arc;

fn small_cifar(dir: &Path, seed: u64) {
    let request = adapt::generate::Request {
        count: Some(300),
        ..adapt::generate::Request::new(&adapt::Cifar10Format, seed)
    };
    assert_eq!(adapt::generate(&request, dir, &|_| {}).unwrap(), 360);
}

fn quick_tune(pipeline: Pipeline, profile: &Path) -> TuneOptions {
    TuneOptions {
        batch_sizes: vec![16],
        strategy: Strategy::Avl,
        trial: TrialSpec {
            samples: 64,
            epochs: 2,
            seed: 1,
        },
        final_repeats: 1,
        final_samples: Some(64),
        trial_seconds: None,
        noise_repeats: 0,
        profile: Some(profile.to_owned()),
        ..TuneOptions::new(pipeline)
    }
}

/// The pinned pool of a run is sized by the shared rule (the rule the
/// tuner's trials and the GPU check call), follows the knobs, and every
/// batch of a pinned run is collated into it.
#[test]
fn a_pinned_run_sizes_its_pool_by_the_shared_rule_and_uses_it_for_every_batch() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path(), 0);
    let pipeline = Pipeline::new(DatasetSpec::named("cifar10", dir.path()).unwrap());
    for (workers, prefetch) in [(0, None), (1, Some(1)), (2, Some(3)), (3, None)] {
        let pool = PinnedPool::new(Arc::new(CountingAllocator::default()), 0);
        let options = RunOptions {
            knobs: LoaderKnobs {
                num_workers: workers,
                prefetch_factor: prefetch,
                pin_memory: true,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 32,
            ..RunOptions::default()
        };
        let mut run = Run::open_with_pool(&pipeline, &options, Some(Arc::clone(&pool))).unwrap();
        let rule = pinned_pool_size(run.config());
        assert_eq!(
            pool.bound(),
            rule,
            "{workers} workers, prefetch {prefetch:?}"
        );
        assert_eq!(
            rule,
            (workers * prefetch.unwrap_or(2)).max(1) + adapt::COPY_DEPTH + 2
        );
        assert!(run.info().page_locked);
        let batches = run.start(0).unwrap();
        let (mut n, mut pinned) = (0, 0);
        while let Some(b) = run.next(&mut || false) {
            pinned += usize::from(b.unwrap().host_buffer().is_pinned());
            n += 1;
        }
        assert_eq!(n, batches);
        assert_eq!(pinned, n, "every batch page-locked");
        let stats = pool.stats();
        assert_eq!(stats.pageable_handed, 0, "the pool never ran out");
        assert!(stats.pinned_handed > 0);
        assert!(stats.allocations <= rule, "{} > {rule}", stats.allocations);
        // Without pin_memory the pool is not touched.
        let unpinned = RunOptions {
            knobs: LoaderKnobs {
                pin_memory: false,
                ..LoaderKnobs::DEFAULT
            },
            ..options
        };
        let other = PinnedPool::new(Arc::new(CountingAllocator::default()), 0);
        let mut run = Run::open_with_pool(&pipeline, &unpinned, Some(Arc::clone(&other))).unwrap();
        run.start(0).unwrap();
        while let Some(b) = run.next(&mut || false) {
            b.unwrap();
        }
        assert_eq!(other.stats().allocations, 0);
        assert!(!run.info().page_locked);
    }
}

/// Tuning the test split saves an entry that the test-split loader finds
/// (and the train-split loader does not): the tuner keys the profile by the
/// pipeline a run opens.
#[test]
fn tuning_the_test_split_keys_the_profile_by_the_test_split() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path(), 0);
    let test = Pipeline::new(DatasetSpec {
        test_split: true,
        ..DatasetSpec::named("cifar10", dir.path()).unwrap()
    });
    let train = Pipeline::new(DatasetSpec::named("cifar10", dir.path()).unwrap());
    let profile = dir.path().join("profile.json");
    let report = adapt::tune(&quick_tune(test.clone(), &profile), &|_| {}).unwrap();
    assert_eq!(report.dataset["samples"], 60, "the test split's 60 records");
    let knobs = adapt::profile_knobs(&profile, &test, 16).unwrap();
    assert_eq!(knobs, Some(report.runs[0].adapt.config));
    assert_eq!(adapt::profile_knobs(&profile, &train, 16).unwrap(), None);
    let run = Run::open(
        &test,
        &RunOptions {
            batch_size: 16,
            ..RunOptions::default()
        },
    )
    .unwrap();
    assert_eq!(
        report.dataset["pipeline"]["identity"].as_str(),
        Some(run.info().identity.as_str())
    );
}

/// A concatenation tunes (it used to fail with "a concatenation of no
/// dataset") and its entry is found by the concatenation's loader.
#[test]
fn a_concatenation_tunes_and_its_entry_is_found_by_its_loader() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    small_cifar(a.path(), 1);
    small_cifar(b.path(), 2);
    let concat = Pipeline::new(DatasetSpec::concat(vec![
        DatasetSpec::named("cifar10", a.path()).unwrap(),
        DatasetSpec::named("cifar10", b.path()).unwrap(),
    ]));
    let profile = a.path().join("profile.json");
    let report = adapt::tune(&quick_tune(concat.clone(), &profile), &|_| {}).unwrap();
    assert_eq!(report.dataset["samples"], 600);
    assert!(
        adapt::profile_knobs(&profile, &concat, 16)
            .unwrap()
            .is_some()
    );
    let only_a = Pipeline::new(DatasetSpec::named("cifar10", a.path()).unwrap());
    assert_eq!(adapt::profile_knobs(&profile, &only_a, 16).unwrap(), None);
}

/// Errors keep their kind through the layers: a tuning run over a missing
/// folder is a data error, a bad batch size a configuration error.
#[test]
fn error_kinds_follow_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Pipeline::new(DatasetSpec::named("cifar10", dir.path().join("absent")).unwrap());
    let e = adapt::tune(&TuneOptions::new(missing.clone()), &|_| {}).unwrap_err();
    assert_eq!(e.kind(), adapt::ErrorKind::Data, "{e}");
    let e = Run::open(&missing, &RunOptions::default()).err().unwrap();
    assert_eq!(e.kind(), adapt::ErrorKind::Data, "{e}");
    let zero = TuneOptions {
        batch_sizes: vec![0],
        ..TuneOptions::new(missing)
    };
    let e = adapt::tune(&zero, &|_| {}).unwrap_err();
    assert_eq!(e.kind(), adapt::ErrorKind::Config, "{e}");
    assert!(adapt::step_from_ms(Some(-1.0)).is_err());
    assert_eq!(
        adapt::step_from_ms(Some(2.0)).unwrap(),
        Some(std::time::Duration::from_millis(2))
    );
}

/// A sample read elsewhere (a Python dataset) through `SampleSteps` gives
/// the loader's own bytes for it; `Data` answers lengths, labels and names
/// as the reader does.
#[test]
fn per_sample_steps_give_the_loaders_bytes_and_data_answers_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path(), 2);
    let recipe = "random_crop(32,padding=4),hflip,normalize(cifar10)";
    let pipeline = Pipeline::new(DatasetSpec::named("cifar10", dir.path()).unwrap())
        .with_transforms(recipe)
        .unwrap();
    let options = RunOptions {
        batch_size: 16,
        seed: 5,
        ..RunOptions::default()
    };
    let mut run = Run::open(&pipeline, &options).unwrap();
    run.start(3).unwrap();
    let batch = run.batches().next().unwrap().unwrap();
    let data = adapt::Data::open(&pipeline.dataset).unwrap();
    assert_eq!(data.len(), 300);
    assert_eq!(data.classes().unwrap().len(), 10);
    let steps = adapt::SampleSteps::new(recipe, "f32", adapt::Shape::new(32, 32, 3)).unwrap();
    let per = steps.sample_bytes();
    let mut scratch = adapt::StepScratch::default();
    let mut out = vec![0u8; per];
    for (j, &index) in batch.indices().iter().enumerate() {
        let s = data.sample(index).unwrap();
        assert_eq!(data.label(index).unwrap(), s.label);
        assert_eq!(batch.labels()[j], s.label);
        steps
            .write(s.view(), (5, 3, index as u64), &mut out, &mut scratch)
            .unwrap();
        assert_eq!(
            &batch.bytes()[j * per..(j + 1) * per],
            &out[..],
            "sample {index}"
        );
    }
    assert!(adapt::SampleSteps::new("blur(3)", "f32", adapt::Shape::new(32, 32, 3)).is_err());
}

/// A report with no run, or whose costs are all null, is refused naming
/// the file (it replayed as an empty table or a table of zeros).
#[test]
fn nonsense_reports_are_refused_naming_the_file() {
    let good = include_str!("../../../../docs/reports/cifar10-2cores.json");
    let dir = tempfile::tempdir().unwrap();
    let mut no_runs: serde_json::Value = serde_json::from_str(good).unwrap();
    no_runs["runs"] = serde_json::json!([]);
    let mut nulls: serde_json::Value = serde_json::from_str(good).unwrap();
    for run in nulls["runs"].as_array_mut().unwrap() {
        for c in run["grid"].as_array_mut().unwrap() {
            c["seconds"] = serde_json::Value::Null;
        }
    }
    let mut negative: serde_json::Value = serde_json::from_str(good).unwrap();
    negative["runs"][0]["grid"][3]["seconds"] = serde_json::json!(-0.25);
    for (name, report, says) in [
        ("no-runs.json", no_runs, "no run"),
        ("nulls.json", nulls, "no finite time"),
        ("negative.json", negative, "-0.25 s"),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, report.to_string()).unwrap();
        let err = adapt::replay(&path, 2, 0.0).unwrap_err().to_string();
        assert!(err.contains(name) && err.contains(says), "{err}");
    }
    let path = dir.path().join("good.json");
    std::fs::write(&path, good).unwrap();
    assert!(!adapt::replay(&path, 2, 0.0).unwrap().is_empty());
}

/// Generation refuses a folder that already holds files (over a larger
/// dataset the old extra files stayed, and the count was the old one).
#[test]
fn generation_refuses_a_non_empty_folder_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path(), 0);
    let request = adapt::generate::Request {
        count: Some(120),
        ..adapt::generate::Request::new(&adapt::Cifar10Format, 0)
    };
    let err = adapt::generate(&request, dir.path(), &|_| {})
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&dir.path().display().to_string()) && err.contains("new or empty folder"),
        "{err}"
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert_eq!(adapt::generate(&request, &empty, &|_| {}).unwrap(), 144);
}

/// 90 generated JPEGs (one shard, as `gen` writes shards of 1000) rewritten
/// as 7 uneven shards.
fn small_webdataset(dir: &Path) -> std::path::PathBuf {
    let loose = dir.join("loose");
    let request = adapt::generate::Request {
        count: Some(90),
        size: Some((24, 20)),
        classes: Some(3),
        ..adapt::generate::Request::new(&adapt::WebDatasetFormat, 5)
    };
    adapt::generate(&request, &loose, &|_| {}).unwrap();
    let whole = adapt::engines::formats::WebDataset::open(
        &loose.display().to_string(),
        &Default::default(),
    )
    .unwrap();
    let out = dir.join("wds");
    // Shards of 20, 1, 9, 30, 5, 15, 10 samples, each through a writer of
    // its own prefix (`pN-000000.tar`).
    let sizes = [20, 1, 9, 30, 5, 15, 10];
    let mut i = 0;
    for (s, n) in sizes.iter().enumerate() {
        let mut w =
            adapt::engines::formats::WebDatasetWriter::new(&out, &format!("p{s}"), *n).unwrap();
        for _ in 0..*n {
            use adapt::engines::dataset::Dataset;
            let e = whole.encoded(i).unwrap().unwrap();
            let cls = e.label.to_string();
            w.write(
                whole.key(i).unwrap(),
                &[("jpg", &e.bytes), ("cls", cls.as_bytes())],
            )
            .unwrap();
            i += 1;
        }
        w.finish().unwrap();
    }
    out
}

fn epoch_of(run: &mut Run, epoch: u64) -> Vec<(Vec<usize>, Vec<u8>)> {
    run.start(epoch).unwrap();
    let mut out = Vec::new();
    while let Some(b) = run.next(&mut || false) {
        let b = b.unwrap();
        out.push((b.indices().to_vec(), b.bytes().to_vec()));
    }
    out
}

/// 90 generated JPEGs (the same bytes as [`small_webdataset`]'s, in the
/// same order) rewritten as Parquet files of 40 rows in row groups of 7:
/// groups of 7, 7, 7, 7, 7, 5, …, 7, 3 rows.
#[cfg(feature = "parquet")]
fn small_parquet(dir: &Path) -> std::path::PathBuf {
    use adapt::engines::dataset::Dataset;
    use adapt::engines::formats::{Parquet, ParquetWriter, ParquetWriterOptions};
    let loose = dir.join("loose-parquet");
    let request = adapt::generate::Request {
        count: Some(90),
        size: Some((24, 20)),
        classes: Some(3),
        ..adapt::generate::Request::new(&adapt::ParquetFormat, 5)
    };
    adapt::generate(&request, &loose, &|_| {}).unwrap();
    let whole = Parquet::open(&loose.display().to_string(), &Default::default()).unwrap();
    let out = dir.join("parquet");
    let options = ParquetWriterOptions {
        rows_per_file: 40,
        rows_per_group: 7,
        class_names: whole.class_names().map(<[String]>::to_vec),
    };
    let mut w = ParquetWriter::new(&out, "train", options).unwrap();
    for i in 0..whole.len() {
        let e = whole.encoded(i).unwrap().unwrap();
        w.write(&e.bytes, None, e.label).unwrap();
    }
    w.finish().unwrap();
    out
}

/// WebDataset shards and Parquet row groups through the front: the same
/// batches for any worker count, random access and streamed; streamed
/// across 2 ranks × 3 workers every sample is seen and the ranks run the
/// same number of batches (uneven shards padded); exact resume at three
/// cut points. Both hold the same images in the same order, so their
/// shuffled random-access epochs are the same batches. (`cargo test
/// --workspace` builds the `parquet` feature.)
#[cfg(feature = "parquet")]
#[test]
fn sharded_loose_data_loads_streams_shares_and_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let shards = small_webdataset(dir.path());
    let tars = format!("{}/p{{0..6}}-000000.tar", shards.display());
    let parquet = small_parquet(dir.path());
    let mut random = Vec::new();
    for spec in [
        DatasetSpec::named("webdataset", &tars).unwrap(),
        DatasetSpec::named("parquet", &parquet).unwrap(),
    ] {
        let opened = spec.open().unwrap();
        assert!(
            opened.shards.as_ref().unwrap().ranges.len() >= 7,
            "{}",
            spec.kind
        );
        let pipeline = Pipeline::new(spec)
            .with_transforms("random_resized_crop(16),hflip")
            .unwrap()
            .with_output("u8")
            .unwrap();
        packs_as_the_source(&pipeline.dataset, dir.path());
        random.push(loads_streams_shares_and_resumes(&pipeline));
    }
    assert!(
        random[0] == random[1],
        "WebDataset and Parquet epochs differ"
    );
}

/// `interleave` sets the shards a WebDataset stream reads at once: every
/// value visits each sample once, 1 and 7 give different orders, the
/// default is 64's order, a checkpoint taken under one value is refused
/// under another naming both, and the knob is refused without a stream and
/// for a pack.
#[test]
fn the_interleave_knob_sets_the_shards_a_stream_reads_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let shards = small_webdataset(dir.path());
    let tars = format!("{}/p{{0..6}}-000000.tar", shards.display());
    let pipeline = Pipeline::new(DatasetSpec::named("webdataset", &tars).unwrap())
        .with_transforms("random_resized_crop(16)")
        .unwrap()
        .with_output("u8")
        .unwrap();
    let opts = |stream, interleave| RunOptions {
        knobs: LoaderKnobs {
            num_workers: 2,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 8,
        seed: 9,
        stream,
        interleave,
        ..RunOptions::default()
    };
    let order = |interleave| -> Vec<usize> {
        let mut run = Run::open(&pipeline, &opts(Some(12), interleave)).unwrap();
        epoch_of(&mut run, 1)
            .into_iter()
            .flat_map(|b| b.0)
            .collect()
    };
    let (one, seven) = (order(Some(1)), order(Some(7)));
    for o in [&one, &seven] {
        let mut seen = o.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..90).collect::<Vec<_>>());
    }
    assert_ne!(one, seven, "interleave 1 and 7 give the same order");
    assert_eq!(order(None), order(Some(64)), "the default is 64 shards");

    let mut run = Run::open(&pipeline, &opts(Some(12), Some(7))).unwrap();
    run.start(1).unwrap();
    run.next(&mut || false).unwrap().unwrap();
    let state = run.state().unwrap();
    let mut other = Run::open(&pipeline, &opts(Some(12), Some(1))).unwrap();
    let err = other.resume(&state).unwrap_err().to_string();
    assert!(
        err.contains("1 at once") && err.contains("7 at once"),
        "{err}"
    );
    let mut same = Run::open(&pipeline, &opts(Some(12), Some(7))).unwrap();
    same.resume(&state).unwrap();

    let refusal = |p: &Pipeline, o: &RunOptions| match Run::open(p, o) {
        Ok(_) => panic!("{o:?} opened"),
        Err(e) => e.to_string(),
    };
    let err = refusal(&pipeline, &opts(None, Some(4)));
    assert!(
        err.contains("--interleave") && err.contains("--stream"),
        "{err}"
    );
    packs_as_the_source(&pipeline.dataset, dir.path());
    let pack =
        Pipeline::new(DatasetSpec::named("pack", dir.path().join("pack-webdataset")).unwrap());
    let err = refusal(&pack, &opts(Some(12), Some(4)));
    assert!(err.contains("a pack streams one shard at a time"), "{err}");
}

/// `spec` packed with its images kept encoded: every packed sample equals
/// its source sample (pixels and label), and `pack --verify`'s check
/// finds the pack made from the source as it is.
fn packs_as_the_source(spec: &DatasetSpec, dir: &Path) {
    use adapt::engines::dataset::Dataset;
    use adapt::engines::pack::{PackOptions, Payload};
    let source = adapt::pack::Source::open(spec).unwrap();
    let dest = dir.join(format!("pack-{}", spec.kind));
    let options = PackOptions {
        shard_size: 16,
        store: Payload::Encoded,
        ..PackOptions::default()
    };
    let remote = adapt::engines::remote::RemoteOptions::default();
    adapt::pack::write(
        &source,
        &dest.display().to_string(),
        &options,
        &remote,
        &|_| {},
    )
    .unwrap();
    let packed = DatasetSpec::named("pack", &dest).unwrap().open().unwrap();
    let pack = packed.pack.unwrap();
    let loose = spec.open().unwrap().dataset;
    assert_eq!(pack.len(), loose.len(), "{}", spec.kind);
    for i in 0..pack.len() {
        let (got, want) = (
            pack.get(i).unwrap(),
            loose.get(pack.origin(i).unwrap()).unwrap(),
        );
        assert!(
            got.pixels == want.pixels && got.label == want.label,
            "{} sample {i}",
            spec.kind
        );
    }
    adapt::pack::verify(&dest.display().to_string(), Some(spec), &remote).unwrap();
}

/// The checks of [`sharded_loose_data_loads_streams_shares_and_resumes`]
/// on one pipeline of 90 samples; returns its shuffled random-access epoch.
fn loads_streams_shares_and_resumes(pipeline: &Pipeline) -> Vec<(Vec<usize>, Vec<u8>)> {
    let kind = pipeline.dataset.kind;
    let opts = |workers, stream, rank: Option<(usize, usize)>| RunOptions {
        knobs: LoaderKnobs {
            num_workers: workers,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 8,
        shuffle: true,
        seed: 9,
        stream,
        distributed: rank.map(|(rank, world_size)| adapt::Distributed { rank, world_size }),
        ..RunOptions::default()
    };
    let mut random = Vec::new();
    for stream in [None, Some(12)] {
        let base = epoch_of(&mut Run::open(pipeline, &opts(0, stream, None)).unwrap(), 1);
        let mut seen: Vec<usize> = base.iter().flat_map(|b| b.0.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..90).collect::<Vec<_>>(), "{kind} {stream:?}");
        for workers in [1, 3] {
            let got = epoch_of(
                &mut Run::open(pipeline, &opts(workers, stream, None)).unwrap(),
                1,
            );
            assert!(got == base, "{kind}: {workers} workers, stream {stream:?}");
        }
        if stream.is_none() {
            random = base;
        }
    }
    // Two ranks streamed with 3 workers each.
    let ranks: Vec<Vec<(Vec<usize>, Vec<u8>)>> = (0..2)
        .map(|r| {
            epoch_of(
                &mut Run::open(pipeline, &opts(3, Some(12), Some((r, 2)))).unwrap(),
                2,
            )
        })
        .collect();
    assert_eq!(
        ranks[0].len(),
        ranks[1].len(),
        "{kind}: the ranks run as many batches"
    );
    let mut all: Vec<usize> = ranks.iter().flatten().flat_map(|b| b.0.clone()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all, (0..90).collect::<Vec<_>>(), "{kind}");
    // Exact resume, streamed and shuffled, at three cut points.
    for stream in [None, Some(12)] {
        let o = opts(2, stream, None);
        let whole = epoch_of(&mut Run::open(pipeline, &o).unwrap(), 3);
        for cut in [1, whole.len() / 2, whole.len() - 1] {
            let mut run = Run::open(pipeline, &o).unwrap();
            run.start(3).unwrap();
            for _ in 0..cut {
                run.next(&mut || false).unwrap().unwrap();
            }
            let state = run.state().unwrap();
            let mut resumed = Run::open(pipeline, &o).unwrap();
            resumed.resume(&state).unwrap();
            let mut rest = Vec::new();
            while let Some(b) = resumed.next(&mut || false) {
                let b = b.unwrap();
                rest.push((b.indices().to_vec(), b.bytes().to_vec()));
            }
            assert!(rest == whole[cut..], "{kind}: cut {cut}, stream {stream:?}");
        }
    }
    random
}

/// The samples of `spec`, opened, in index order: (HWC pixels, label).
fn samples_of(spec: &DatasetSpec) -> Vec<(Vec<u8>, i64)> {
    use adapt::engines::dataset::Dataset;
    let opened = spec.open().unwrap();
    (0..opened.dataset.len())
        .map(|i| {
            let s = opened.dataset.get(i).unwrap();
            (s.hwc_bytes().into_owned(), s.label)
        })
        .collect()
}

#[test]
fn a_dataset_written_as_webdataset_shards_reads_back_as_its_samples() {
    let t = tempfile::tempdir().unwrap();
    small_cifar(&t.path().join("cifar"), 4);
    let folder = t.path().join("folder");
    let request = adapt::generate::Request {
        count: Some(40),
        size: Some((20, 16)),
        classes: Some(4),
        ..adapt::generate::Request::new(&adapt::ImageFolderFormat, 6)
    };
    adapt::generate(&request, &folder, &|_| {}).unwrap();
    // CIFAR-10 (pixels, written as PNG) and JPEGs (their files' bytes).
    for (kind, path) in [("cifar10", t.path().join("cifar")), ("imagefolder", folder)] {
        let spec = DatasetSpec::named(kind, &path).unwrap();
        let source = adapt::pack::Source::open(&spec).unwrap();
        let out = t.path().join(format!("wds-{kind}"));
        let o = adapt::pack::WebDatasetOut {
            shard_size: 64,
            seed: 9,
            prefix: "train".into(),
            overwrite: false,
        };
        let shards = adapt::pack::write_webdataset(&source, &out, &o, &|_| {}).unwrap();
        let want = samples_of(&spec);
        assert_eq!(shards.len(), want.len().div_ceil(64), "{kind}");
        let got = samples_of(&DatasetSpec::named("webdataset", &out).unwrap());
        let order = adapt::engines::dataset::permutation(want.len(), 9, 0);
        assert_eq!(got.len(), want.len());
        for (at, &i) in order.iter().enumerate() {
            assert!(
                got[at] == want[i],
                "{kind}: shard sample {at} is not source sample {i}"
            );
        }
        // Another write is refused; with overwrite, fewer shards replace
        // the old ones and the extra old ones go.
        let err = adapt::pack::write_webdataset(&source, &out, &o, &|_| {}).unwrap_err();
        assert!(err.to_string().contains("--overwrite"), "{err}");
        let bigger = adapt::pack::WebDatasetOut {
            shard_size: 1000,
            overwrite: true,
            ..o
        };
        let one = adapt::pack::write_webdataset(&source, &out, &bigger, &|_| {}).unwrap();
        assert_eq!(one.len(), 1);
        let left = std::fs::read_dir(&out).unwrap().count();
        assert_eq!(left, 1, "{kind}: only the new shard is left");
        assert_eq!(
            samples_of(&DatasetSpec::named("webdataset", &out).unwrap()).len(),
            want.len()
        );
    }
}

/// Every format in the table opens its synthetic layout by name (written
/// by `gen`, or made of other formats' layouts), and its normalisation is
/// the format's own.
#[test]
fn every_format_in_the_table_opens_its_synthetic_layout() {
    use adapt::Format;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, to: &Path| {
        let request = adapt::generate::Request {
            count: Some(20),
            size: Some((40, 30)),
            classes: Some(2),
            ..adapt::generate::Request::new(name.parse::<adapt::FormatName>().unwrap(), 3)
        };
        adapt::generate(&request, to, &|_| {}).unwrap();
    };
    for format in adapt::FORMATS {
        let name = format.name();
        let path = dir.path().join(name);
        let spec = match name {
            "celeba+digiface" => {
                write("celeba", &path.join("celeba"));
                write("digiface", &path.join("digiface"));
                DatasetSpec::named(name, &path).unwrap()
            }
            "pack" => {
                write("cifar10", &dir.path().join("for-pack"));
                let source = DatasetSpec::named("cifar10", dir.path().join("for-pack")).unwrap();
                let source = adapt::pack::Source::open(&source).unwrap();
                let (options, remote) = (
                    adapt::PackOptions::default(),
                    adapt::RemoteOptions::default(),
                );
                let dest = path.to_str().unwrap();
                adapt::pack::write(&source, dest, &options, &remote, &|_| {}).unwrap();
                DatasetSpec::named(name, &path).unwrap()
            }
            "concat" => {
                write("cifar10", &path);
                let part = DatasetSpec::named("cifar10", &path).unwrap();
                DatasetSpec::concat(vec![part.clone(), part])
            }
            "parquet" | "arrow" if !adapt::PARQUET_ENABLED => continue,
            _ => {
                write(name, &path);
                DatasetSpec::named(name, &path).unwrap()
            }
        };
        let opened = spec.open().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            opened.dataset.len() >= 20,
            "{name}: {}",
            opened.dataset.len()
        );
        opened
            .dataset
            .get(0)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let expected = match name {
            "pack" | "concat" => adapt::Cifar10Format.statistics(),
            _ => format.statistics(),
        };
        assert_eq!(opened.normalize.0, expected.0.to_vec(), "{name}");
    }
}
