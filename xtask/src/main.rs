//! `cargo xtask <verb>`: the project's command line, thin over the library
//! crates (see <https://github.com/matklad/cargo-xtask/>). Each verb parses
//! its arguments, makes the library calls and prints; nothing a library user
//! would need lives only here.

mod bench;
mod fuzz;
mod gen_cmd;
mod gpu_check;
mod inspect;
mod load;
mod remote_args;
mod shard;
mod tune;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "adapt: a self-tuning data loader")]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

#[derive(Subcommand)]
enum Verb {
    /// Generate a synthetic dataset in a real on-disk layout.
    Gen(gen_cmd::Args),
    /// Print one sample as a JSON line (shape, label, sha256 of its pixels).
    Inspect(inspect::Args),
    /// Run epochs through the loader and print one JSON line per epoch.
    Load(load::Args),
    /// The prepared GPU check: bandwidth, pinned vs pageable, batches copied back.
    GpuCheck(gpu_check::Args),
    /// Pack a dataset into shuffled, checksummed shards (or --verify a pack).
    Shard(shard::Args),
    /// Fuzz every parser with seeded mutations of valid inputs.
    Fuzz(fuzz::Args),
    /// Run the criterion benchmarks (formats, loader, search).
    Bench(bench::Args),
    /// Tune the loader's knobs with the ADaPT search (the main job).
    Tune(Box<tune::Args>),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().verb {
        Verb::Gen(a) => gen_cmd::run(a),
        Verb::Bench(a) => bench::run(a),
        Verb::Fuzz(a) => fuzz::run(a),
        Verb::Shard(a) => shard::run(a),
        Verb::GpuCheck(a) => gpu_check::run(a),
        Verb::Inspect(a) => inspect::run(a),
        Verb::Load(a) => load::run(a),
        Verb::Tune(a) => tune::run(*a),
    }
}

/// A progress bar on stderr for `len` items.
pub(crate) fn progress_bar(len: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar.set_message(what.to_owned());
    bar
}
