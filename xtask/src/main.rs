//! `cargo xtask <verb>`: the project's command line, thin over the front
//! crate `adapt` (see <https://github.com/matklad/cargo-xtask/>). The verbs
//! a user needs — `gen`, `inspect`, `load`, `shard`, `tune` — are
//! `adapt::cli`'s, the same ones `python -m adapt` offers; this binary adds
//! the developer's verbs: `bench`, `fuzz` and `gpu-check`.

mod bench;
mod fuzz;
mod gpu_check;

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
    /// Run the criterion benchmarks (formats, loader, search).
    Bench(bench::Args),
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !adapt::S3_ENABLED && needs_s3(&args) {
        return with_s3(&args);
    }
    let defaults = adapt::cli::Defaults {
        cifar10: concat!(env!("CARGO_MANIFEST_DIR"), "/../datasets/cifar10").into(),
    };
    match Cli::parse().verb {
        Verb::Shared(v) => v.run(&defaults),
        Verb::Bench(a) => bench::run(a),
        Verb::Fuzz(a) => fuzz::run(a),
        Verb::GpuCheck(a) => gpu_check::run(a),
    }
}

/// Whether a command names an object store (`s3://…`).
fn needs_s3(args: &[String]) -> bool {
    args.iter().any(|a| a.contains("s3://"))
}

/// Runs the same command through cargo with the `s3` feature (the S3
/// client is built the first time, then cached beside this build), waits
/// for it and exits with its status.
fn with_s3(args: &[String]) -> anyhow::Result<()> {
    eprintln!(
        "an s3:// path: running with the S3 client (cargo run --release -p xtask --features s3; built once)"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args(["run", "--release", "--quiet", "--manifest-path"])
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"))
        .args(["--features", "s3", "--"])
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
    }
}
