//! Integration tests of adapt-pipeline: the text form, building against
//! real layouts, and the determinism promises (knobs, packs vs loose files).
#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_dataset::Dataset;
use adapt_loader::{Loader, LoaderConfig, LoaderKnobs, OutputFormat};
use adapt_pipeline::{DatasetSpec, Pipeline, PipelineError, parse_transforms, transforms_text};
use std::path::Path;

fn cifar(dir: &Path, train: usize) {
    adapt_synth::cifar10(
        dir,
        adapt_synth::Cifar10Spec {
            train,
            test: 1,
            seed: 4,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
}

/// CIFAR-10 of `n` records in `loose`, and a pack of it in `pack_dir`.
fn cifar_and_pack(loose: &Path, pack_dir: &Path, n: usize, shard_size: usize) {
    cifar(loose, n);
    let source = adapt_formats::Cifar10::open(loose, adapt_formats::Split::Train).unwrap();
    adapt_pack::write_pack(
        &source,
        &adapt_pack::SourceInfo {
            dataset: "cifar10".into(),
            path: loose.display().to_string(),
            class_names: None,
        },
        pack_dir,
        &adapt_pack::PackOptions {
            shard_size,
            ..adapt_pack::PackOptions::default()
        },
        &|_| {},
    )
    .unwrap();
}

fn token_of(e: PipelineError) -> String {
    match e {
        PipelineError::Transform { token, .. } => token,
        other => panic!("expected an error naming a step, got {other}"),
    }
}

#[test]
fn the_text_form_round_trips() {
    let text = "random_crop(32,padding=4),hflip,random_vertical_flip(p=0.2),\
                random_resized_crop(224,scale=(0.2,1.0)),center_crop(200x100),resize(256),\
                resize(64x48),color_jitter(0.4,contrast=0.3),normalize(imagenet)";
    let specs = parse_transforms(text).unwrap();
    assert_eq!(specs.len(), 9);
    let canonical = transforms_text(&specs);
    assert_eq!(parse_transforms(&canonical).unwrap(), specs);
    assert!(canonical.starts_with("random_crop(32,padding=4),random_horizontal_flip(p=0.5)"));
    let padded = parse_transforms(
        "random_crop(28,padding=(1,2,3,4),fill=(1,2,3),padding_mode=reflect),normalize(mean=(0.5,0.5,0.5),std=(0.2,0.2,0.2))",
    )
    .unwrap();
    assert_eq!(parse_transforms(&transforms_text(&padded)).unwrap(), padded);
    assert!(parse_transforms("").unwrap().is_empty());
}

#[test]
fn the_augmentation_steps_round_trip_with_torchvision_defaults() {
    let text = "random_resized_crop(224,interpolation=bicubic),resize(256,interpolation=nearest),\
                rand_augment,trivial_augment(interpolation=bilinear,fill=(1,2,3)),\
                auto_augment(policy=cifar10),color_jitter(0.4,0.4,0.4,hue=0.1),\
                random_erasing(p=0.25,value=random),random_erasing(value=mean),\
                random_erasing(value=(1,2,3)),normalize(imagenet)";
    let specs = parse_transforms(text).unwrap();
    let canonical = transforms_text(&specs);
    assert_eq!(parse_transforms(&canonical).unwrap(), specs, "{canonical}");
    for part in [
        "random_resized_crop(224,scale=(0.08,1),ratio=(0.75,1.3333333333333333),interpolation=bicubic)",
        "resize(256,interpolation=nearest)",
        "rand_augment(num_ops=2,magnitude=9,num_magnitude_bins=31)",
        "trivial_augment(num_magnitude_bins=31,interpolation=bilinear,fill=(1,2,3))",
        "auto_augment(policy=cifar10)",
        ",hue=0.1)",
        "random_erasing(p=0.25,scale=(0.02,0.33),ratio=(0.3,3.3),value=random)",
        "random_erasing(p=0.5,scale=(0.02,0.33),ratio=(0.3,3.3),value=mean)",
    ] {
        assert!(canonical.contains(part), "{part} not in {canonical}");
    }
    assert!(specs.iter().filter(|s| s.is_random()).count() >= 8);
    // The JSON of the steps that existed before keeps its shape (profiles
    // and checkpoints name pipelines by it): no new keys at their defaults.
    let old = parse_transforms("resize(256),random_resized_crop(224),color_jitter(0.4)").unwrap();
    let json = serde_json::to_string(&old).unwrap();
    assert!(
        !json.contains("interpolation") && !json.contains("hue"),
        "{json}"
    );
}

#[test]
fn bad_augmentation_steps_are_refused_by_name() {
    for (text, says) in [
        ("rand_augment(magnitude=31)", "magnitude"),
        (
            "rand_augment(num_ops=2,magnitude=9,num_magnitude_bins=1)",
            "num_magnitude_bins",
        ),
        ("auto_augment(policy=mnist)", "imagenet, cifar10 or svhn"),
        (
            "trivial_augment(interpolation=lanczos)",
            "nearest, bilinear or bicubic",
        ),
        ("random_erasing(p=1.5)", "random_erasing"),
        ("random_erasing(scale=(0.5,0.1))", "random_erasing"),
        ("random_erasing(value=mean)", "normalize"),
        ("color_jitter(hue=0.6)", "hue"),
        ("rand_augment(fill=(1,2))", "fill"),
    ] {
        let err = parse_transforms(text).unwrap_err();
        assert!(err.to_string().contains(says), "{text}: {err}");
    }
}

#[test]
fn the_augmentations_run_in_a_pipeline_and_erase_with_the_normalize_mean() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 10);
    let built = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .with_transforms(
            "rand_augment,trivial_augment,auto_augment,random_erasing(p=1,value=mean),normalize(cifar10)",
        )
        .unwrap()
        .build()
        .unwrap();
    assert_eq!(built.sample_shape, adapt_dataset::Shape::new(32, 32, 3));
    assert!(built.is_random());
    let specs =
        parse_transforms("random_erasing(p=1,scale=(0.3,0.33),value=mean),normalize(cifar10)")
            .unwrap();
    let step = specs[0].build_in(&specs).unwrap().unwrap();
    let mut s = adapt_dataset::Sample::hwc(vec![0; 32 * 32 * 3], 32, 32, 3, 0).unwrap();
    step.apply(&mut s, &mut adapt_transform::Scratch::default())
        .unwrap();
    // CIFAR-10's mean (0.4914, 0.4822, 0.4465) × 255, rounded.
    assert!(
        s.pixels.chunks(3).any(|p| p == [125, 123, 114]),
        "the box has the mean colour"
    );
}

#[test]
fn bad_steps_are_errors_naming_the_token() {
    for (text, token) in [
        ("random_crop(32),blur(3)", "blur(3)"),
        ("random_crop(32,padding=-4)", "random_crop(32,padding=-4)"),
        ("hflip(p=2)", "hflip(p=2)"),
        (
            "random_crop(32,padding_mode=wrap)",
            "random_crop(32,padding_mode=wrap)",
        ),
        ("normalize(mnist)", "normalize(mnist)"),
        (
            "normalize(mean=(0.5,0.5),std=(0.1))",
            "normalize(mean=(0.5,0.5),std=(0.1))",
        ),
        ("resize(0)", "resize(0)"),
        ("center_crop(32,extra=1)", "center_crop(32,extra=1)"),
        (
            "random_resized_crop(224,scale=(1.0,0.5))",
            "random_resized_crop(224,scale=(1.0,0.5))",
        ),
        ("random_crop(32", "random_crop(32"),
    ] {
        let err = parse_transforms(text).unwrap_err();
        assert_eq!(token_of(err), token, "{text}");
    }
    let err = parse_transforms("normalize(cifar10),hflip").unwrap_err();
    assert!(err.to_string().contains("last step"), "{err}");
}

#[test]
fn steps_are_checked_against_the_data_they_receive() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 10);
    let p = |text: &str| {
        Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
            .with_transforms(text)
            .unwrap()
            .build()
    };
    let err = p("random_crop(41,padding=4)").err().unwrap();
    assert_eq!(token_of(err), "random_crop(41,padding=4)");
    assert!(p("random_crop(40,padding=4)").is_ok());
    let err = p("normalize(mean=(0.5),std=(0.5))").err().unwrap();
    let text = err.to_string();
    assert!(text.contains("normalize(") && text.contains("3"), "{text}");
    let built = p("random_crop(24),hflip,normalize(cifar10)").unwrap();
    assert_eq!(built.sample_shape, adapt_dataset::Shape::new(24, 24, 3));
    assert!(built.is_random());
    let err = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .with_output("f16")
        .unwrap_err();
    assert!(matches!(err, PipelineError::Output(_)));
}

#[test]
fn a_pipeline_serialises_and_u8_output_leaves_normalisation_to_the_device() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 10);
    let p = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .with_transforms("random_crop(32,padding=4),hflip,normalize(cifar10)")
        .unwrap()
        .with_output("u8-nhwc")
        .unwrap();
    let json = p.to_json().to_string();
    assert_eq!(Pipeline::from_json(&json).unwrap(), p);
    let built = p.build().unwrap();
    assert!(built.normalize.is_none());
    let (mean, _) = built.device_normalize.clone().unwrap();
    assert_eq!(mean, [0.4914, 0.4822, 0.4465]);
    assert!(built.identity().ends_with("|u8-nhwc"));
    // The default pipeline is the dataset's usual normalisation.
    let default = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .build()
        .unwrap();
    assert!(
        default
            .transforms_text()
            .starts_with("normalize(mean=(0.4914")
    );
    assert!(!default.is_random());
    assert_ne!(
        default.identity(),
        built.identity(),
        "profiles tell pipelines apart"
    );
}

/// What the loader batches for sample `i` equals `Built::sample` (what
/// `inspect --epoch` shows), whatever the knobs.
#[test]
fn the_loader_batches_what_inspect_shows() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 40);
    let built = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .with_transforms(
            "random_crop(32,padding=4,padding_mode=reflect),hflip,color_jitter(0.3,0.3,0.3)",
        )
        .unwrap()
        .with_output("u8-nhwc")
        .unwrap()
        .build()
        .unwrap();
    for workers in [0, 2] {
        let config = built.loader_config(LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: workers,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 7,
            shuffle: true,
            seed: 9,
            ..LoaderConfig::default()
        });
        let mut loader = Loader::new(built.dataset(), config).unwrap();
        for epoch in [0, 3] {
            for batch in loader.epoch(epoch).unwrap() {
                let batch = batch.unwrap();
                let per = 32 * 32 * 3;
                for (k, &i) in batch.indices().iter().enumerate() {
                    let s = built.sample(i, epoch, 9).unwrap();
                    assert_eq!(&*s.hwc_bytes(), &batch.bytes()[k * per..(k + 1) * per]);
                }
            }
        }
    }
}

/// A pack shuffles its source; augmentation draws by the source index, so a
/// sample read from the pack is augmented exactly as from the loose files.
#[test]
fn a_pack_augments_as_the_loose_files_it_was_made_from() {
    let t = tempfile::tempdir().unwrap();
    let (loose, pack_dir) = (t.path().join("c"), t.path().join("p"));
    cifar_and_pack(&loose, &pack_dir, 30, 8);
    let text = "random_crop(32,padding=4),hflip,color_jitter(0.4,0.4,0.4)";
    let build = |kind: &str, path: &Path| {
        Pipeline::new(DatasetSpec::named(kind, path).unwrap())
            .with_transforms(text)
            .unwrap()
            .build()
            .unwrap()
    };
    let (from_loose, from_pack) = (build("cifar10", &loose), build("pack", &pack_dir));
    let pack = from_pack.opened.pack.clone().unwrap();
    for i in 0..pack.len() {
        let origin = pack.origin(i).unwrap();
        for epoch in [0, 1] {
            assert_eq!(
                from_pack.sample(i, epoch, 5).unwrap(),
                from_loose.sample(origin, epoch, 5).unwrap(),
                "pack sample {i} (origin {origin}), epoch {epoch}"
            );
        }
    }
}

#[test]
fn f32_and_u8_outputs_batch_the_same_pixels() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 16);
    let batch = |output: &str| {
        let built = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
            .with_transforms("random_crop(32,padding=4),hflip")
            .unwrap()
            .with_output(output)
            .unwrap()
            .build()
            .unwrap();
        let mut l = Loader::new(
            built.dataset(),
            built.loader_config(LoaderConfig {
                batch_size: 16,
                ..LoaderConfig::default()
            }),
        )
        .unwrap();
        let b = l.epoch(2).unwrap().next().unwrap().unwrap();
        assert_eq!(b.output(), output.parse::<OutputFormat>().unwrap());
        b.bytes().to_vec()
    };
    let (f32s, u8s) = (batch("f32"), batch("u8"));
    assert_eq!(f32s.len(), 4 * u8s.len());
    for (f, &u) in f32s.chunks_exact(4).zip(&u8s) {
        let f = f32::from_le_bytes([f[0], f[1], f[2], f[3]]);
        assert_eq!(f, f32::from(u) * (1.0 / 255.0));
    }
}
/// `celeba/` (`count` images of `identities`) and `digiface/` (2 classes of
/// `per_class`) in a new folder, as the seed's `celeba+digiface` reads them.
fn celeba_and_digiface(count: usize, identities: usize, per_class: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let spec = adapt_synth::CelebASpec {
        count,
        identities,
        quality: 90,
        seed: 1,
    };
    adapt_synth::celeba(&dir.path().join("celeba"), spec, &adapt_synth::no_progress).unwrap();
    let spec = adapt_synth::DigiFaceSpec {
        classes: 2,
        per_class,
        seed: 1,
    };
    adapt_synth::digiface(
        &dir.path().join("digiface"),
        spec,
        &adapt_synth::no_progress,
    )
    .unwrap();
    dir
}

#[test]
fn celeba_and_digiface_concatenate_with_offset_labels_and_one_shape() {
    let dir = celeba_and_digiface(4, 3, 2);
    let opened = DatasetSpec::named("celeba+digiface", dir.path())
        .unwrap()
        .open()
        .unwrap();
    let ds = &opened.dataset;
    assert_eq!(ds.len(), 8);
    assert_eq!(
        ds.sample_shape(),
        Some(adapt_dataset::Shape::new(112, 112, 3))
    );
    let celeba_max = (0..4).map(|i| ds.get(i).unwrap().label).max().unwrap();
    let digiface: Vec<i64> = (4..8).map(|i| ds.get(i).unwrap().label).collect();
    // DigiFace class 0 lands just past CelebA's highest identity.
    assert!(digiface.iter().all(|&l| l > celeba_max), "{digiface:?}");
    assert_eq!(
        ds.get(0).unwrap().shape,
        adapt_dataset::Shape::new(112, 112, 3)
    );
}

/// CelebA identities so large that DigiFace1M's labels cannot follow them
/// are refused naming the identity file (it named the folder, or a
/// DigiFace class folder).
#[test]
fn identities_that_leave_no_room_for_digiface_labels_name_the_identity_file() {
    let dir = celeba_and_digiface(2, 1, 1);
    let ids = dir
        .path()
        .join("celeba")
        .join(adapt_formats::CELEBA_IDENTITY_FILE);
    // i64::MAX - 1: the offset fits, DigiFace's class 1 overflows past it;
    // i64::MAX: the class count itself does not fit a label.
    for top in [i64::MAX - 1, i64::MAX] {
        std::fs::write(&ids, format!("000001.jpg 0\n000002.jpg {top}\n")).unwrap();
        let err = DatasetSpec::named("celeba+digiface", dir.path())
            .unwrap()
            .open()
            .err()
            .expect("refused")
            .to_string();
        assert!(
            err.contains("identity_CelebA.txt") && err.contains("no room"),
            "{top}: {err}"
        );
    }
}

#[test]
fn an_image_folder_of_mixed_sizes_batches_once_resized() {
    let dir = tempfile::tempdir().unwrap();
    for (class, name, w, h) in [
        ("a", "1.png", 20, 10),
        ("a", "2.png", 7, 9),
        ("b", "x.png", 16, 16),
    ] {
        let path = dir.path().join(class).join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let px = vec![100u8; (w * h * 3) as usize];
        std::fs::write(
            &path,
            adapt_formats::encode_png(&path, &px, w, h, 3).unwrap(),
        )
        .unwrap();
    }
    let opened = DatasetSpec::named("imagefolder", dir.path())
        .unwrap()
        .open()
        .unwrap();
    let config = || adapt_loader::LoaderConfig {
        batch_size: 3,
        ..Default::default()
    };
    assert!(
        adapt_loader::Loader::new(opened.dataset.clone(), config()).is_err(),
        "mixed sizes need a resize"
    );
    let resized = opened.resized(8, 6).unwrap();
    let mut loader = adapt_loader::Loader::new(resized.dataset, config()).unwrap();
    let batch = loader.epoch(0).unwrap().next().unwrap().unwrap();
    assert_eq!(batch.shape(), [3, 3, 6, 8]);
    assert_eq!(batch.labels(), [0, 0, 1]);
}

fn jpeg_folder(dir: &Path, width: u32, height: u32, count: usize) {
    adapt_synth::imagefolder(
        dir,
        adapt_synth::ImageFolderSpec {
            classes: 2,
            per_class: count.div_ceil(2),
            width,
            height,
            quality: 90,
            seed: 3,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
}

/// Reduced-scale decoding changes the resampling, not the content: the
/// same crop of the same image, within a few levels per pixel of the full
/// decode, and exactly what `inspect` shows.
#[test]
fn reduced_decoding_is_close_to_the_exact_path_and_consistent() {
    let t = tempfile::tempdir().unwrap();
    jpeg_folder(t.path(), 320, 240, 6);
    let build = |exact: bool, text: &str| {
        let mut p = Pipeline::new(DatasetSpec::named("imagefolder", t.path()).unwrap())
            .with_transforms(text)
            .unwrap()
            .with_output("u8-nhwc")
            .unwrap();
        p.exact_decode = exact;
        p.build().unwrap()
    };
    for text in [
        "resize(64),center_crop(56)",
        "random_resized_crop(48,scale=(0.5,1.0))",
    ] {
        let (reduced, exact) = (build(false, text), build(true, text));
        assert!(exact.decoder.is_none());
        assert_eq!(
            reduced.decoder.is_some(),
            adapt_formats::reduced_decoder().is_some(),
            "reduced decoding exactly when this build has the decoder"
        );
        let mut loader = Loader::new(
            reduced.dataset(),
            reduced.loader_config(LoaderConfig {
                knobs: LoaderKnobs {
                    num_workers: 2,
                    ..LoaderKnobs::DEFAULT
                },
                batch_size: 6,
                ..LoaderConfig::default()
            }),
        )
        .unwrap();
        let batch = loader.epoch(1).unwrap().next().unwrap().unwrap();
        let per = batch.bytes().len() / 6;
        for i in 0..6 {
            let (r, e) = (
                reduced.sample(i, 1, 0).unwrap(),
                exact.sample(i, 1, 0).unwrap(),
            );
            assert_eq!(
                &*r.hwc_bytes(),
                &batch.bytes()[i * per..(i + 1) * per],
                "{text}: inspect = loader"
            );
            assert_eq!((r.shape, r.label), (e.shape, e.label));
            let mean_diff = r
                .pixels
                .iter()
                .zip(&e.pixels)
                .map(|(a, b)| f64::from(a.abs_diff(*b)))
                .sum::<f64>()
                / r.pixels.len() as f64;
            assert!(
                mean_diff < 3.0,
                "{text}: sample {i} differs by {mean_diff} levels on average"
            );
        }
    }
}

/// A checkpoint of a pack's shard-streaming epoch resumes into exactly the
/// batches the uninterrupted epoch yields after it.
#[test]
fn a_streaming_epoch_resumes_exactly() {
    let t = tempfile::tempdir().unwrap();
    let (loose, pack_dir) = (t.path().join("c"), t.path().join("p"));
    cifar_and_pack(&loose, &pack_dir, 60, 16);
    let built = Pipeline::new(DatasetSpec::named("pack", &pack_dir).unwrap())
        .with_transforms("random_crop(32,padding=4),hflip")
        .unwrap()
        .build()
        .unwrap();
    let loader = |workers: usize| {
        let mut config = built.loader_config(LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: workers,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 7,
            seed: 3,
            ..LoaderConfig::default()
        });
        config.sampler = built
            .opened
            .stream_sampler(Some(20), None, &config)
            .unwrap();
        Loader::new(built.dataset(), config).unwrap()
    };
    let bytes = |b: adapt_loader::Batch| (b.bytes().to_vec(), b.indices().to_vec());
    let all: Vec<_> = loader(2)
        .epoch(1)
        .unwrap()
        .map(|b| bytes(b.unwrap()))
        .collect();
    let mut first = loader(0);
    let mut e = first.epoch(1).unwrap();
    let head: Vec<_> = e.by_ref().take(4).map(|b| bytes(b.unwrap())).collect();
    let state = e.state();
    drop(e);
    let tail: Vec<_> = loader(1)
        .resume(&state)
        .unwrap()
        .map(|b| bytes(b.unwrap()))
        .collect();
    assert_eq!([head, tail].concat(), all);
}

/// Issue 14: sizes from the user that cannot fit are refused when the
/// pipeline is built, before anything is allocated.
#[test]
fn absurd_sizes_are_refused_at_build() {
    let t = tempfile::tempdir().unwrap();
    cifar(t.path(), 10);
    for text in [
        "resize(100000x100000),center_crop(32)",
        "random_resized_crop(60000)",
    ] {
        let err = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
            .with_transforms(text)
            .unwrap()
            .build()
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("one sample may take"),
            "{text}: {err}"
        );
    }
    let spec = DatasetSpec {
        resize: Some((100_000, 100_000)),
        ..DatasetSpec::named("cifar10", t.path()).unwrap()
    };
    assert!(Pipeline::new(spec).build().is_err());
    let built = Pipeline::new(DatasetSpec::named("cifar10", t.path()).unwrap())
        .build()
        .unwrap();
    for config in [
        LoaderConfig {
            batch_size: 1_000_000_000,
            ..LoaderConfig::default()
        },
        LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: 100_000,
                ..LoaderKnobs::DEFAULT
            },
            ..LoaderConfig::default()
        },
    ] {
        assert!(Loader::new(built.dataset(), built.loader_config(config)).is_err());
    }
}

/// A build without the `parquet` feature (the main job's: `cargo xtask`
/// re-runs a Parquet command with it) refuses Parquet files at open,
/// naming the path and the feature.
#[cfg(not(feature = "parquet"))]
#[test]
fn a_build_without_parquet_names_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("train-00000-of-00001.parquet");
    std::fs::write(&file, b"PAR1").unwrap();
    let e = DatasetSpec::named("parquet", &file)
        .unwrap()
        .open()
        .err()
        .unwrap();
    let message = e.to_string();
    assert!(
        message.contains("train-00000-of-00001.parquet"),
        "{message}"
    );
    assert!(message.contains("`parquet` feature"), "{message}");
}
