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
