//! The front on small generated data: one pool rule for every front, the
//! tuner keyed by the pipeline a run opens (split and parts included).

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt::engines::transfer::{CountingAllocator, PinnedPool};
use adapt::{
    DatasetKind, DatasetSpec, Pipeline, Run, RunOptions, Strategy, TrialSpec, TuneOptions,
    pinned_pool_size,
};
use std::path::Path;
use std::sync::Arc;

fn small_cifar(dir: &Path, seed: u64) {
    let request = adapt::generate::Request {
        count: Some(300),
        ..adapt::generate::Request::new(DatasetKind::Cifar10, seed)
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
    let pipeline = Pipeline::new(DatasetSpec::new("cifar10", dir.path()));
    for (workers, prefetch) in [(0, None), (1, Some(1)), (2, Some(3)), (3, None)] {
        let pool = PinnedPool::new(Arc::new(CountingAllocator::default()), 0);
        let options = RunOptions {
            batch_size: 32,
            num_workers: workers,
            prefetch_factor: prefetch,
            pin_memory: true,
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
            pin_memory: false,
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
        ..DatasetSpec::new("cifar10", dir.path())
    });
    let train = Pipeline::new(DatasetSpec::new("cifar10", dir.path()));
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
        DatasetSpec::new("cifar10", a.path()),
        DatasetSpec::new("cifar10", b.path()),
    ]));
    let profile = a.path().join("profile.json");
    let report = adapt::tune(&quick_tune(concat.clone(), &profile), &|_| {}).unwrap();
    assert_eq!(report.dataset["samples"], 600);
    assert!(
        adapt::profile_knobs(&profile, &concat, 16)
            .unwrap()
            .is_some()
    );
    let only_a = Pipeline::new(DatasetSpec::new("cifar10", a.path()));
    assert_eq!(adapt::profile_knobs(&profile, &only_a, 16).unwrap(), None);
}

/// Errors keep their kind through the layers: a tuning run over a missing
/// folder is a data error, a bad batch size a configuration error.
#[test]
fn error_kinds_follow_what_happened() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Pipeline::new(DatasetSpec::new("cifar10", dir.path().join("absent")));
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
    let pipeline = Pipeline::new(DatasetSpec::new("cifar10", dir.path()))
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
        let planar = s.layout == adapt::engines::dataset::Layout::Planar;
        steps
            .write(
                &s.pixels,
                s.shape,
                planar,
                (5, 3, index as u64),
                &mut out,
                &mut scratch,
            )
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
        ..adapt::generate::Request::new(DatasetKind::Cifar10, 0)
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
