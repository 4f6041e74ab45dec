//! Tuning an external program (a PyTorch training script, say) by its wall
//! time: the knobs are substituted into a shell command line.

use crate::{KnobSpace, Knobs};
use adapt_search::{Config, Objective, TrialError};
use std::process::Command;
use std::time::Instant;

/// Runs `sh -c TEMPLATE` with `{num_workers}`, `{prefetch_factor}`,
/// `{pin_memory}` and `{persistent_workers}` replaced; the cost is its wall
/// time. A non-zero exit is a failed trial that reports the exit status and
/// the last lines of output.
pub struct CommandObjective {
    template: String,
}

impl CommandObjective {
    /// An objective from a command template.
    pub fn new(template: &str) -> Self {
        Self {
            template: template.to_owned(),
        }
    }

    /// The command line for some knobs (PyTorch spelling of booleans).
    pub fn command_line(&self, k: &Knobs) -> String {
        let py = |b: bool| if b { "True" } else { "False" };
        self.template
            .replace("{num_workers}", &k.num_workers.to_string())
            .replace(
                "{prefetch_factor}",
                &if k.num_workers == 0 {
                    "None".into()
                } else {
                    k.prefetch_factor.to_string()
                },
            )
            .replace("{pin_memory}", py(k.pin_memory))
            .replace("{persistent_workers}", py(k.persistent_workers))
    }

    fn run(&self, k: &Knobs) -> Result<f64, TrialError> {
        let line = self.command_line(k);
        let start = Instant::now();
        let out = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .output()
            .map_err(|e| format!("cannot run `{line}`: {e}"))?;
        let secs = start.elapsed().as_secs_f64();
        if out.status.success() {
            return Ok(secs);
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        Err(format!(
            "`{line}` exited with {}; last output: {}",
            out.status,
            tail.join(" | ")
        )
        .into())
    }
}

impl Objective for CommandObjective {
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        self.run(&KnobSpace::knobs(config))
    }
}
