//! `cargo xtask bench`: the criterion benchmarks, by area, or (with
//! `--compare REV`) this tree's loading speed against REV's.

use anyhow::{Context, bail};
use std::process::Command;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// formats, loader or search; all of them when absent.
    area: Option<String>,
    /// Passed to criterion as a filter (e.g. `cifar10`).
    #[arg(long)]
    filter: Option<String>,
    /// Instead of criterion: build REV's release xtask into its own target
    /// folder and time a fixed short set of loads with both builds,
    /// alternated; prints new/old ratios and names a slowdown.
    #[arg(long, value_name = "REV", conflicts_with_all = ["area", "filter"])]
    compare: Option<String>,
    /// With --compare: runs per side.
    #[arg(long, default_value_t = 3, requires = "compare")]
    runs: usize,
    /// With --compare: where the fixed set's data is generated and kept
    /// (default: target/bench-compare/data).
    #[arg(long, requires = "compare")]
    data: Option<std::path::PathBuf>,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    if let Some(rev) = args.compare {
        return crate::bench_compare::run(&crate::bench_compare::Compare {
            rev,
            runs: args.runs,
            data: args.data,
        });
    }
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
