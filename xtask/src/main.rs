//! `cargo xtask <verb>`: the project's command line, thin over the front
//! crate `adapt` (see <https://github.com/matklad/cargo-xtask/>). The verbs
//! a user needs — `gen`, `inspect`, `load`, `shard`, `tune` — are
//! `adapt::cli`'s, the same ones `python -m adapt` offers; this binary adds
//! the developer's verbs: `bench`, `fuzz`, `gpu-check` and `soak`.

mod bench;
mod bench_compare;
mod fuzz;
mod gpu_check;
#[cfg(feature = "soak")]
mod soak;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "adapt: a self-tuning data loader")]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

// One per process: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Verb {
    #[command(flatten)]
    Shared(adapt::cli::Verb),
    /// The prepared GPU check: bandwidth, pinned vs pageable, batches copied back.
    GpuCheck(gpu_check::Args),
    /// Fuzz every parser with seeded mutations of valid inputs.
    Fuzz(fuzz::Args),
    /// Run the criterion benchmarks (formats, loader, search), or
    /// --compare REV: this tree's loading speed against REV's.
    Bench(bench::Args),
    /// Epochs for a given time over a random mix of pipelines, sources,
    /// knobs, resumes and object-store faults, checked as they go.
    #[cfg(feature = "soak")]
    Soak(soak::Args),
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(features) = features_to_add(&args) {
        return with_features(&features, &args);
    }
    let defaults = adapt::cli::Defaults {
        cifar10: concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/cifar10").into(),
    };
    match Cli::parse().verb {
        Verb::Shared(v) => v.run(&defaults),
        Verb::Bench(a) => bench::run(a),
        Verb::Fuzz(a) => fuzz::run(a),
        Verb::GpuCheck(a) => gpu_check::run(a),
        #[cfg(feature = "soak")]
        Verb::Soak(a) => soak::run(a),
    }
}

/// When a command needs a feature this build lacks (`s3` for an object
/// store, `s3://…`; `parquet` for `--dataset parquet` and for `fuzz`, whose
/// targets include Parquet files): the features to re-run it with, those
/// this build has included, so a re-run never lacks what started it.
fn features_to_add(args: &[String]) -> Option<Vec<&'static str>> {
    let wanted = [
        ("s3", adapt::S3_ENABLED, needs_s3(args)),
        ("parquet", adapt::PARQUET_ENABLED, needs_parquet(args)),
        ("soak", cfg!(feature = "soak"), needs_soak(args)),
    ];
    wanted
        .iter()
        .any(|&(_, built, needed)| needed && !built)
        .then(|| {
            let on = wanted.iter().filter(|&&(_, built, needed)| built || needed);
            on.map(|&(name, ..)| name).collect()
        })
}

/// Whether the command is the soak (the S3 test server is its feature).
fn needs_soak(args: &[String]) -> bool {
    args.first().is_some_and(|v| v == "soak")
}

/// Whether a command names an object store: `s3://…` anywhere, or an
/// argument that is an `https://…`/`http://…` URL (`--path URL`,
/// `--path=URL`; not one inside a `--command`'s text).
fn needs_s3(args: &[String]) -> bool {
    let url = |a: &str| {
        let value = a.split_once('=').map_or(a, |(_, v)| v);
        value.starts_with("https://") || value.starts_with("http://")
    };
    args.iter().any(|a| a.contains("s3://") || url(a))
}

/// Whether a command reads or writes Parquet or Arrow (one feature):
/// `--dataset parquet|arrow` (or `--dataset=…`), or the `fuzz` verb.
fn needs_parquet(args: &[String]) -> bool {
    let parquet = |a: &str| a.eq_ignore_ascii_case("parquet") || a.eq_ignore_ascii_case("arrow");
    let named = args
        .windows(2)
        .any(|w| w[0] == "--dataset" && parquet(&w[1]));
    let joined = args
        .iter()
        .any(|a| a.strip_prefix("--dataset=").is_some_and(parquet));
    named || joined || args.first().is_some_and(|v| v == "fuzz")
}

/// Runs the same command through cargo with `features` (built the first
/// time, then cached beside this build), waits for it and exits with its
/// status.
fn with_features(features: &[&str], args: &[String]) -> anyhow::Result<()> {
    let features = features.join(",");
    eprintln!(
        "running with the `{features}` feature (cargo run --release -p xtask --features \
         {features}; built once)"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["run", "--release", "--quiet", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .args(["--features", &features, "--"])
        .args(args)
        .status()?;
    std::process::exit(status.code().unwrap_or(1))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_s3_path_anywhere_in_the_command_asks_for_the_client() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(super::needs_s3(&args(&["pack", "--out", "s3://b/p"])));
        assert!(super::needs_s3(&args(&["load", "--path=s3://b/p"])));
        assert!(!super::needs_s3(&args(&["tune", "--path", "datasets/s3"])));
        assert!(super::needs_s3(&args(&["load", "--path", "https://h/p"])));
        assert!(super::needs_s3(&args(&[
            "load",
            "--path=http://127.0.0.1:8/p"
        ])));
        assert!(!super::needs_s3(&args(&[
            "tune",
            "--command",
            "curl https://h/x"
        ])));
    }

    #[test]
    fn the_soak_verb_asks_for_its_feature() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(super::needs_soak(&args(&["soak", "--seconds", "5"])));
        assert!(!super::needs_soak(&args(&["load", "--path", "soak"])));
    }

    #[test]
    fn parquet_as_the_dataset_or_fuzzing_asks_for_the_reader() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(super::needs_parquet(&args(&[
            "load",
            "--dataset",
            "parquet"
        ])));
        assert!(super::needs_parquet(&args(&["gen", "--dataset=parquet"])));
        assert!(super::needs_parquet(&args(&["load", "--dataset", "arrow"])));
        assert!(super::needs_parquet(&args(&["fuzz", "--seconds", "5"])));
        assert!(!super::needs_parquet(&args(&["tune", "--path", "parquet"])));
        assert!(!super::needs_parquet(&args(&[
            "load",
            "--dataset",
            "webdataset"
        ])));
    }
}
