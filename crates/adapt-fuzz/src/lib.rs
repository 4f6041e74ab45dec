//! Fuzzing on stable Rust: seeded mutations of valid inputs, fed to every
//! parser adapt has (CIFAR-10 batch files, the CelebA identity file, images
//! through the readers, pack shards and manifests, profiles, tune reports,
//! the pipeline text form, loader checkpoints, WebDataset tar shards, Parquet files). A case fails when the parser
//! panics or takes longer than a bound; errors are the right answer to bad
//! input. `.ci/run` runs a bounded number of cases per target through the
//! tests; `cargo xtask fuzz` runs for as long as asked, and writes every
//! failing input to a folder so it can become a regression test.
//!
//! It is not coverage-guided (cargo-fuzz needs a nightly toolchain; the
//! targets are plain `fn(&[u8])`, easy to wrap there) and not a proof:
//! mutations start from valid inputs so they reach deep into each format.

mod mutate;
mod targets;

pub use mutate::mutate;
pub use targets::{Target, targets};

use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::SeedableRng;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A case that failed: the target, why, and the input.
#[derive(Debug, thiserror::Error)]
#[error("{target}: {reason} (input of {} bytes{})", input.len(), saved.as_ref().map(|p| format!(", saved to {}", p.display())).unwrap_or_default())]
pub struct Failure {
    /// The target's name.
    pub target: &'static str,
    /// A panic's message, or a time-out.
    pub reason: String,
    /// The failing input.
    pub input: Vec<u8>,
    /// Where it was written, when asked to.
    pub saved: Option<PathBuf>,
}

/// What a fuzzing run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Cases run.
    pub cases: usize,
    /// Cases the target accepted (the rest were errors, as they should be
    /// for most mutations).
    pub accepted: usize,
}

/// How long one case may take before it counts as a hang.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs one input through `target` on a watchdog thread: a panic or a
/// case past [`CASE_TIMEOUT`] is a failure.
pub fn run_case(target: &Target, input: &[u8]) -> Result<bool, String> {
    let (tx, rx) = mpsc::channel();
    let run = target.run;
    let data = input.to_vec();
    let handle = std::thread::Builder::new()
        .name(format!("fuzz-{}", target.name))
        .spawn(move || {
            let r = catch_unwind(AssertUnwindSafe(|| run(&data)));
            // The receiver may have given up (a hang): nothing to tell.
            let _ = tx.send(r);
        })
        .map_err(|e| format!("cannot start the case: {e}"))?;
    match rx.recv_timeout(CASE_TIMEOUT) {
        Ok(Ok(accepted)) => {
            // The thread has sent its result and is ending.
            let _ = handle.join();
            Ok(accepted)
        }
        Ok(Err(payload)) => {
            let _ = handle.join();
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            Err(format!("panicked: {msg}"))
        }
        Err(_) => Err(format!("no answer within {CASE_TIMEOUT:?} (a hang)")),
    }
}

/// Runs `target` on `cases` mutations (seeded by `seed`) of its valid
/// inputs, or until `until` passes; the first failure ends the run and, with
/// `save` set, its input is written there.
pub fn fuzz(
    target: &Target,
    cases: usize,
    seed: u64,
    until: Option<Instant>,
    save: Option<&std::path::Path>,
) -> Result<Summary, Failure> {
    let seeds = (target.seeds)();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut summary = Summary::default();
    let fail = |reason: String, input: Vec<u8>| {
        let saved = save.and_then(|dir| {
            std::fs::create_dir_all(dir).ok()?;
            let p = dir.join(format!(
                "{}-{:016x}.bin",
                target.name,
                adapt_dataset::fnv1a(&input)
            ));
            std::fs::write(&p, &input).ok().map(|()| p)
        });
        Failure {
            target: target.name,
            reason,
            input,
            saved,
        }
    };
    // The valid inputs themselves first: they must be accepted.
    for s in &seeds {
        match run_case(target, s) {
            Ok(true) => {}
            Ok(false) => return Err(fail("a valid input was refused".into(), s.clone())),
            Err(reason) => return Err(fail(reason, s.clone())),
        }
    }
    for i in 0..cases {
        if until.is_some_and(|t| Instant::now() >= t) {
            break;
        }
        let base = &seeds[i % seeds.len()];
        let input = mutate(&mut rng, base);
        match run_case(target, &input) {
            Ok(accepted) => {
                summary.cases += 1;
                summary.accepted += usize::from(accepted);
            }
            Err(reason) => return Err(fail(reason, input)),
        }
    }
    Ok(summary)
}
