//! `cargo xtask fuzz`: seeded mutations of valid inputs through every parser
//! for as long as asked; a failing input is written under `--out`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub(crate) struct Args {
    /// A target name, or `all`.
    #[arg(long, default_value = "all")]
    target: String,
    /// Seconds per target.
    #[arg(long, default_value_t = 60)]
    seconds: u64,
    /// Seed of the mutations.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where failing inputs are written.
    #[arg(long, default_value = "target/fuzz-failures")]
    out: PathBuf,
}

pub(crate) fn run(args: Args) -> anyhow::Result<()> {
    let all = adapt_fuzz::targets();
    let chosen: Vec<_> = all
        .iter()
        .filter(|t| args.target == "all" || t.name == args.target)
        .collect();
    if chosen.is_empty() {
        let names: Vec<_> = all.iter().map(|t| t.name).collect();
        anyhow::bail!(
            "unknown target {:?}; expected all or one of {}",
            args.target,
            names.join(", ")
        );
    }
    let mut failed = false;
    for t in chosen {
        let until = Instant::now() + Duration::from_secs(args.seconds);
        let line = match adapt_fuzz::fuzz(t, usize::MAX, args.seed, Some(until), Some(&args.out)) {
            Ok(s) => {
                serde_json::json!({ "target": t.name, "cases": s.cases, "accepted": s.accepted, "failure": null })
            }
            Err(f) => {
                failed = true;
                serde_json::json!({ "target": t.name, "failure": f.to_string() })
            }
        };
        println!("{line}");
    }
    if failed {
        anyhow::bail!(
            "fuzzing found failures (inputs under {})",
            args.out.display()
        );
    }
    Ok(())
}
