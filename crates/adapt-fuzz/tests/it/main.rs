//! Every fuzz target, a bounded number of seeded mutations (the CI run;
//! `cargo xtask fuzz` runs for as long as asked), and the inputs that found
//! bugs, kept as regression tests.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_fuzz::{fuzz, run_case, targets};

/// Cases per target here: enough to reach every parser's error paths, few
/// enough for the suite's time on two cores.
const CASES: usize = 150;

#[test]
fn every_target_survives_seeded_mutations() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-failures");
    for t in targets() {
        match fuzz(&t, CASES, 1, None, Some(&dir)) {
            Ok(s) => assert_eq!(s.cases, CASES, "{}", t.name),
            Err(f) => panic!("{f}"),
        }
    }
}

#[test]
fn the_targets_cover_every_parser() {
    let names: Vec<_> = targets().iter().map(|t| t.name).collect();
    for n in [
        "cifar10",
        "cifar-pickle",
        "celeba-identity",
        "image",
        "pack-shard",
        "pack-manifest",
        "pack-records",
        "profile",
        "report",
        "pipeline-text",
        "checkpoint",
        "webdataset-shard",
        #[cfg(feature = "parquet")]
        "parquet-file",
        #[cfg(feature = "parquet")]
        "arrow-file",
    ] {
        assert!(names.contains(&n), "{n}");
    }
}

/// Inputs fuzzing found failing, kept (issue 14).
#[test]
fn regressions() {
    let by_name = |n: &str| targets().into_iter().find(|t| t.name == n).unwrap();
    // A PNG declaring 100000×100000 pixels must not be allocated.
    let mut bomb = (by_name("image").seeds)()[0].clone();
    bomb[16..20].copy_from_slice(&100_000u32.to_be_bytes());
    bomb[20..24].copy_from_slice(&100_000u32.to_be_bytes());
    assert_eq!(run_case(&by_name("image"), &bomb), Ok(false));
    // A frame whose records claim a length that overflowed the allocation
    // ("capacity overflow") before bincode decoded under a limit.
    let overflow = include_bytes!("../regressions/pack-records-capacity-overflow.bin");
    assert_eq!(run_case(&by_name("pack-records"), overflow), Ok(false));
    // A Parquet page the parquet crate asserts on ("Decoder for dict
    // should have been set") instead of returning an error.
    #[cfg(feature = "parquet")]
    {
        let dict = include_bytes!("../regressions/parquet-dictionary-decoder-unset.bin");
        assert_eq!(run_case(&by_name("parquet-file"), dict), Ok(false));
    }
    // Absurd sizes in pipeline text.
    for text in [
        "random_crop(4294967295)",
        "resize(99999999999999999999)",
        "center_crop(0)",
    ] {
        assert_eq!(
            run_case(&by_name("pipeline-text"), text.as_bytes()),
            Ok(false),
            "{text}"
        );
    }
}
