//! Tuning an external program (a PyTorch training script, say) by its wall
//! time: the knobs are substituted into a shell command line.

use crate::{Dim, KnobSpace, LoaderKnobs};
use adapt_search::{Config, Objective, TrialError};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a `--command` trial may run before it (and its process group)
/// is ended and counted as failed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TrialLimit {
    /// The same limit for every trial (`--trial-timeout`).
    Fixed(Duration),
    /// Follows what was measured: `multiple` × the slowest trial that has
    /// finished, and never under `floor`; `first` while none has finished.
    Measured {
        /// The limit before any trial has finished.
        first: Duration,
        /// The limit as a multiple of the slowest finished trial.
        multiple: f64,
        /// The least limit.
        floor: Duration,
    },
}

impl TrialLimit {
    /// The default: 5× the slowest finished trial, at least a minute; ten
    /// minutes for the first. A configuration 5× slower than one already
    /// measured cannot be the pick, so ending it costs the search nothing,
    /// and a hung program is ended within minutes, not an hour.
    pub const DEFAULT: Self = Self::Measured {
        first: Duration::from_secs(600),
        multiple: 5.0,
        floor: Duration::from_secs(60),
    };

    /// The limit for the next trial, given the slowest finished one.
    pub fn limit(&self, slowest: Option<Duration>) -> Duration {
        match *self {
            Self::Fixed(d) => d,
            Self::Measured {
                first,
                multiple,
                floor,
            } => slowest.map_or(first, |s| s.mul_f64(multiple).max(floor)),
        }
    }

    /// What the limit is and why, for the report: the rule, and the limit
    /// it came to after the slowest finished trial.
    pub fn describe(&self, slowest: Option<Duration>) -> String {
        match *self {
            Self::Fixed(d) => format!("trial limit: {} (--trial-timeout)", seconds_text(d)),
            Self::Measured {
                first,
                multiple,
                floor,
            } => {
                let now = match slowest {
                    Some(s) => format!(
                        "{} after the slowest finished trial's {}",
                        seconds_text(self.limit(slowest)),
                        seconds_text(s)
                    ),
                    None => "no trial finished".to_owned(),
                };
                format!(
                    "trial limit: {multiple}x the slowest finished trial, at least {}, {} before the first finished; {now} (--trial-timeout sets a fixed one)",
                    seconds_text(floor),
                    seconds_text(first)
                )
            }
        }
    }
}

/// The placeholders a command template may use; it must use one at least:
/// each knob's name in braces (`{num_workers}` …) and `{kwargs}`, the
/// knobs as a JSON object of `torch.utils.data.DataLoader` keyword
/// arguments (canonical: no prefetch factor or persistence without
/// workers, as PyTorch requires), for `DataLoader(ds,
/// **json.loads(sys.argv[1]))`.
pub fn placeholders() -> Vec<String> {
    let knobs = Dim::ALL.map(|d| format!("{{{}}}", d.name()));
    knobs.into_iter().chain(["{kwargs}".to_owned()]).collect()
}

/// Seconds as the limit's messages write them: milliseconds under one.
fn seconds_text(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s < 1.0 => format!("{s:.3} s"),
        s => format!("{s:.1} s"),
    }
}

/// Runs `sh -c TEMPLATE` with `{num_workers}`, `{prefetch_factor}`,
/// `{pin_memory}` and `{persistent_workers}` replaced; the cost is its wall
/// time. A non-zero exit is a failed trial that reports the exit status and
/// the last lines of output.
///
/// Each trial runs in its own process group, with a time limit (past it the
/// whole group is killed and the trial fails), and its output is drained
/// and only the tail kept (a program printing gigabytes cannot exhaust the
/// tuner's memory). SIGTERM, SIGINT or SIGHUP to the tuner during a trial
/// ends the trial's group first, then the tuner, as the signal would.
///
/// Clones share the record of the slowest finished trial, so a measured
/// [`TrialLimit`] follows every trial any of them ran.
#[derive(Clone)]
pub struct CommandObjective {
    template: String,
    limit: TrialLimit,
    /// The slowest finished trial's wall time in nanoseconds; 0: none yet.
    slowest_ns: Arc<AtomicU64>,
    metric: Option<regex_lite::Regex>,
}

impl CommandObjective {
    /// An objective from a command template.
    pub fn new(template: &str) -> Self {
        Self {
            template: template.to_owned(),
            limit: TrialLimit::DEFAULT,
            slowest_ns: Arc::new(AtomicU64::new(0)),
            metric: None,
        }
    }

    /// The same objective whose cost is what the program prints: the last
    /// match of `pattern` in its output (stdout and stderr), the number in
    /// its first group (or the whole match), e.g. `adapt-seconds: ([0-9.]+)`.
    /// Interpreter start-up and imports then do not drown the signal.
    pub fn with_metric(mut self, pattern: &str) -> Result<Self, crate::TuneError> {
        let re = regex_lite::Regex::new(pattern).map_err(|e| crate::TuneError::Metric {
            pattern: pattern.to_owned(),
            reason: e.to_string(),
        })?;
        self.metric = Some(re);
        Ok(self)
    }

    /// The metric's value in `text`: its last match.
    fn metric_in(&self, re: &regex_lite::Regex, text: &str) -> Result<f64, String> {
        let found = re
            .captures_iter(text)
            .last()
            .ok_or_else(|| format!("printed no line matching {:?}", re.as_str()))?;
        let m = found
            .get(1)
            .or_else(|| found.get(0))
            .map_or("", |m| m.as_str());
        match m.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => Err(format!(
                "the metric {:?} matched {m:?}, not a positive number",
                re.as_str()
            )),
        }
    }

    /// The command line for some knobs: each knob as Python writes it
    /// ([`Dim::python_value`]), `{kwargs}` as JSON.
    pub fn command_line(&self, k: &LoaderKnobs) -> String {
        let kwargs = serde_json::to_string(&k.canonical()).unwrap_or_default();
        let line = Dim::ALL.iter().fold(self.template.clone(), |line, d| {
            line.replace(&format!("{{{}}}", d.name()), &d.python_value(k))
        });
        line.replace("{kwargs}", &kwargs)
    }

    /// The same objective with another per-trial time limit.
    #[must_use]
    pub fn with_limit(mut self, limit: TrialLimit) -> Self {
        self.limit = limit;
        self
    }

    /// The slowest trial that finished (exit status 0), by wall time.
    pub fn slowest_finished(&self) -> Option<Duration> {
        match self.slowest_ns.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(Duration::from_nanos(ns)),
        }
    }

    /// The limit the next trial runs under.
    pub fn limit_now(&self) -> Duration {
        self.limit.limit(self.slowest_finished())
    }

    /// The limit and its reason, as the report says it.
    pub fn describe_limit(&self) -> String {
        self.limit.describe(self.slowest_finished())
    }

    fn record_finished(&self, wall: Duration) {
        let ns = u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX).max(1);
        self.slowest_ns.fetch_max(ns, Ordering::Relaxed);
    }

    fn run(&self, k: &LoaderKnobs) -> Result<f64, TrialError> {
        let line = self.command_line(k);
        let timeout = self.limit_now();
        let watch = SignalWatch::new();
        let start = Instant::now();
        // Its own process group, so a time-out ends the whole tree (the
        // shell, the interpreter, its data-loader workers).
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|e| format!("cannot run `{line}`: {e}"))?;
        // Output is drained as it comes (a full pipe would stall the
        // program) and only its last OUTPUT_TAIL bytes are kept.
        let tails: Vec<_> = [
            child
                .stdout
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        .map(|r| std::thread::spawn(move || tail_of(r)))
        .collect();
        let status = loop {
            if let Some(sig) = watch.received() {
                return Err(end_by_signal(&mut child, watch, sig));
            }
            match child.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) if start.elapsed() >= timeout => break Err(()),
                Ok(None) => std::thread::sleep(Duration::from_millis(5)),
                Err(e) => {
                    kill_group(&child);
                    return Err(format!("waiting for `{line}`: {e}").into());
                }
            }
        };
        let wall = start.elapsed();
        let secs = wall.as_secs_f64();
        if matches!(&status, Ok(s) if s.success()) {
            self.record_finished(wall);
        }
        if status.is_err() {
            kill_group(&child);
            // Reaped after the kill; its pipes close with the group.
            let _ = child.wait();
        }
        let text: String = tails
            .into_iter()
            .map(|t| t.join().unwrap_or_default())
            .collect();
        let last: Vec<&str> = text.lines().rev().take(5).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        match status {
            Ok(s) if s.success() => match &self.metric {
                Some(re) => self
                    .metric_in(re, &text)
                    .map_err(|e| format!("`{line}`: {e}; last output: {}", last.join(" | ")).into()),
                None => Ok(secs),
            },
            Ok(s) => Err(format!("`{line}` exited with {s}; last output: {}", last.join(" | ")).into()),
            Err(()) => Err(format!(
                "`{line}` ran past the trial limit of {} and was ended (with its process group; {}); last output: {}",
                seconds_text(timeout),
                self.describe_limit(),
                last.join(" | ")
            )
            .into()),
        }
    }
}

/// The signals that end a tuner (`kill`, Ctrl-C, a closed terminal). While
/// a trial runs they are caught: the trial's process group is ended first,
/// then the tuner ends as the signal would have ended it, so no trial
/// outlives the tuner.
const ENDING: [i32; 3] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGHUP,
];

/// Catches the ending signals for as long as it lives.
struct SignalWatch {
    ids: Vec<signal_hook::SigId>,
    got: Arc<AtomicUsize>,
}

impl SignalWatch {
    fn new() -> Self {
        let got = Arc::new(AtomicUsize::new(0));
        // A signal that cannot be caught here keeps its default action.
        let ids = ENDING
            .iter()
            .filter_map(|&sig| {
                signal_hook::flag::register_usize(sig, Arc::clone(&got), sig as usize).ok()
            })
            .collect();
        Self { ids, got }
    }

    /// The ending signal received, if one was.
    fn received(&self) -> Option<i32> {
        match self.got.load(Ordering::SeqCst) {
            0 => None,
            sig => i32::try_from(sig).ok(),
        }
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// Ends the trial's group, then the tuner, as signal `sig` would have.
fn end_by_signal(child: &mut std::process::Child, watch: SignalWatch, sig: i32) -> TrialError {
    kill_group(child);
    let _ = child.wait();
    drop(watch);
    // Returns only where the default action is to carry on.
    let _ = signal_hook::low_level::emulate_default_handler(sig);
    format!("the tuner received signal {sig}; the trial was ended").into()
}

/// Bytes of a trial's output kept for its error message.
const OUTPUT_TAIL: usize = 64 << 10;

/// Reads `r` to its end, keeping only the last [`OUTPUT_TAIL`] bytes.
fn tail_of(mut r: Box<dyn std::io::Read + Send>) -> String {
    let mut kept: std::collections::VecDeque<u8> = std::collections::VecDeque::new();
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend(&buf[..n]);
                let over = kept.len().saturating_sub(OUTPUT_TAIL);
                kept.drain(..over);
            }
        }
    }
    String::from_utf8_lossy(kept.make_contiguous()).into_owned()
}

/// Ends the process group `child` leads (SIGKILL to every member).
fn kill_group(child: &std::process::Child) {
    // `kill -KILL -- -PGID`: the group's id is the child's pid
    // (`process_group(0)`). Failing means it is already gone.
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

impl Objective for CommandObjective {
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        self.run(&KnobSpace::knobs(config))
    }
}

#[cfg(test)]
mod tests {
    use super::TrialLimit;
    use std::time::Duration;

    #[test]
    fn a_measured_limit_is_a_multiple_of_the_slowest_with_a_floor() {
        let l = TrialLimit::DEFAULT;
        assert_eq!(l.limit(None), Duration::from_secs(600));
        assert_eq!(
            l.limit(Some(Duration::from_secs(1))),
            Duration::from_secs(60)
        );
        assert_eq!(
            l.limit(Some(Duration::from_secs(30))),
            Duration::from_secs(150)
        );
        let fixed = TrialLimit::Fixed(Duration::from_secs(7));
        assert_eq!(
            fixed.limit(Some(Duration::from_secs(100))),
            Duration::from_secs(7)
        );
        assert!(fixed.describe(None).contains("--trial-timeout"));
        let said = l.describe(Some(Duration::from_secs(30)));
        assert!(
            said.contains("150.0 s after the slowest finished trial's 30.0 s"),
            "{said}"
        );
    }
}
