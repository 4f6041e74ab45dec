//! `cargo xtask bench`: the criterion benchmarks, by area.

use anyhow::{Context, bail};
use std::process::Command;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// formats, loader or search; all of them when absent.
    area: Option<String>,
    /// Passed to criterion as a filter (e.g. `cifar10`).
    #[arg(long)]
    filter: Option<String>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let areas = match args.area.as_deref() {
        None => vec!["formats", "loader", "search"],
        Some(a @ ("formats" | "loader" | "search")) => vec![a],
        Some(other) => bail!("unknown bench area {other:?}; expected formats, loader or search"),
    };
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    for area in areas {
        let mut cmd = Command::new(&cargo);
        cmd.args(["bench", "-p", "adapt-benches", "--bench", area]);
        if let Some(f) = &args.filter {
            cmd.args(["--", f]);
        }
        let status = cmd
            .status()
            .with_context(|| format!("running cargo bench for {area}"))?;
        if !status.success() {
            bail!("cargo bench --bench {area} failed: {status}");
        }
    }
    Ok(())
}
