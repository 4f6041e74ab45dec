//! `cargo xtask soak`: the flags of the soak ([`adapt_soak`] runs it);
//! ends with the report as one JSON line and exits non-zero on a failure.

use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// How long to run.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// Seed of the mix.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the data and caches go (a temporary folder by default).
    #[arg(long)]
    dir: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let options = adapt_soak::SoakOptions {
        seconds: args.seconds,
        seed: args.seed,
        dir: args.dir,
    };
    let report = adapt_soak::run(&options)?;
    println!("{}", report.to_json());
    match report.failure() {
        Some(why) => anyhow::bail!(why),
        None => Ok(()),
    }
}
