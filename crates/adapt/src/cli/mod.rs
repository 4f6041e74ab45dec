//! The command line's shared verbs — `gen`, `inspect`, `load`, `pack`,
//! `tune` — with their flags, for both binaries that offer them: `cargo
//! xtask` (which adds `bench`, `fuzz` and `gpu-check`) and the Python
//! package's `python -m adapt` / `adapt` script. One definition, so a user
//! who only ran `pip install` has the same verbs and flags.
//!
//! Each verb parses its flags (clap), makes one call into this crate and
//! prints; behind the `cli` feature, so library users do not build clap.

mod args;
mod gen_cmd;
mod inspect;
mod load;
mod pack;
mod remote_args;
mod tune;

use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// The verbs both command lines share.
#[derive(Subcommand)]
pub enum Verb {
    /// Generate a synthetic dataset in a real on-disk layout.
    Gen(gen_cmd::Args),
    /// Print one sample as a JSON line (shape, label, sha256 of its pixels).
    Inspect(inspect::Args),
    /// Run epochs through the loader and print one JSON line per epoch.
    Load(load::Args),
    /// Pack a dataset into shuffled, checksummed shards (or --verify a pack).
    #[command(alias = "shard")]
    Pack(pack::Args),
    /// Tune the loader's knobs with the ADaPT search (the main job).
    Tune(Box<tune::Args>),
}

/// What differs between the two command lines.
#[derive(Clone, Debug)]
pub struct Defaults {
    /// Where `tune` without `--dataset` keeps the main job's CIFAR-10.
    pub cifar10: PathBuf,
}

impl Verb {
    /// Runs the verb.
    pub fn run(self, defaults: &Defaults) -> anyhow::Result<()> {
        match self {
            Verb::Gen(a) => gen_cmd::run(a),
            Verb::Inspect(a) => inspect::run(a),
            Verb::Load(a) => load::run(a),
            Verb::Pack(a) => pack::run(a),
            Verb::Tune(a) => tune::run(*a, defaults),
        }
    }
}

#[derive(Parser)]
#[command(name = "adapt", about = "adapt: a self-tuning data loader")]
struct Cli {
    #[command(subcommand)]
    verb: Verb,
}

/// The whole command line over `args` (the program's name first), as
/// `python -m adapt` runs it: returns the exit status (0, 1 on an error,
/// 2 on a usage error) after printing what clap or the verb printed.
pub fn main(args: Vec<String>, defaults: &Defaults) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = e.exit_code();
            // Help and version go to stdout with status 0; usage errors to stderr.
            let _ = e.print();
            return code;
        }
    };
    match cli.verb.run(defaults) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("Error: {e:?}");
            1
        }
    }
}

/// A progress bar on stderr for `len` items.
pub fn progress_bar(len: u64, what: &str) -> indicatif::ProgressBar {
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

#[cfg(test)]
mod tests {
    use super::Cli;
    use clap::{CommandFactory, Parser};

    /// The help of `verb --dataset`, long form.
    fn long_help(verb: &str) -> String {
        let mut cmd = Cli::command();
        let sub = cmd.find_subcommand_mut(verb).expect("verb");
        sub.render_long_help().to_string()
    }

    #[test]
    fn every_format_is_in_the_help_and_the_unknown_format_error() {
        for verb in ["load", "inspect", "tune", "pack"] {
            let help = long_help(verb);
            for format in crate::FORMATS {
                assert!(
                    help.contains(format.name()),
                    "{verb} --help lacks {}",
                    format.name()
                );
                assert!(
                    help.contains(format.describe()),
                    "{verb}: {}",
                    format.name()
                );
            }
        }
        let args = ["adapt", "load", "--dataset", "nosuch", "--path", "."];
        let error = Cli::try_parse_from(args)
            .err()
            .expect("refused")
            .to_string();
        for format in crate::FORMATS {
            assert!(
                error.contains(format.name()),
                "{} not in {error}",
                format.name()
            );
        }
    }

    #[test]
    fn gen_lists_the_formats_it_writes_and_refuses_the_others_by_name() {
        let help = long_help("gen");
        assert!(help.contains(&crate::generate::generated()), "{help}");
        let args = ["adapt", "gen", "--dataset", "pack", "--out", "x"];
        let error = Cli::try_parse_from(args)
            .err()
            .expect("refused")
            .to_string();
        assert!(
            error.contains("no synthetic writer") && error.contains("parquet"),
            "{error}"
        );
    }
}
