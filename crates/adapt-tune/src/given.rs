//! Tuning a knob space the caller names — Ray Data's read `concurrency`,
//! rows per read block and `prefetch_batches`, say — over trials the caller
//! runs: a warm-up, the noise measured on repeated trials, the AVL descent
//! with its race and pruning, and the final comparison with the default,
//! as the loader's own four knobs get them.

use crate::TuneError;
use crate::noise::{measured_avl, median_and_spread};
use crate::options::{Progress, TuneOptions};
use crate::trials::{TrialFailure, TrialPurpose, checked};
use adapt_search::{
    AvlOptions, Config, Measured, Objective, Outcome, Param, Prior, Space, TrialError, Value,
    avl_search_from,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// One knob of a given space: its name, the values searched (ascending,
/// distinct) and the value used when it is not tuned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GivenKnob {
    /// The knob's name, as the caller's trials read it.
    pub name: String,
    /// The values searched, ascending.
    pub values: Vec<i64>,
    /// The value of the untuned configuration (one of `values`).
    pub default: i64,
}

/// A configuration of a given space: each knob's value by name.
pub type GivenConfig = BTreeMap<String, i64>;

/// A space of named integer knobs, searched outermost first as given (the
/// last knob is the innermost: the one searched first, under every other).
#[derive(Clone, Debug)]
pub struct GivenSpace {
    knobs: Vec<GivenKnob>,
    space: Space,
}

impl GivenSpace {
    /// At most this many knobs.
    pub const MAX_KNOBS: usize = 8;
    /// At most this many values per knob.
    pub const MAX_VALUES: usize = 4096;

    /// The space of `knobs` (outermost first); an error names the knob
    /// whose name repeats, whose values are empty, unsorted, repeated or
    /// too many, or whose default is not among them.
    pub fn new(knobs: Vec<GivenKnob>) -> Result<Self, TuneError> {
        let bad = |k: &GivenKnob, why: &str| {
            TuneError::InvalidOption(format!("knob {:?}: {why}", k.name))
        };
        if knobs.is_empty() || knobs.len() > Self::MAX_KNOBS {
            return Err(TuneError::InvalidOption(format!(
                "a given space holds 1 to {} knobs, not {}",
                Self::MAX_KNOBS,
                knobs.len()
            )));
        }
        for (i, k) in knobs.iter().enumerate() {
            if k.name.is_empty() || knobs[..i].iter().any(|o| o.name == k.name) {
                return Err(bad(k, "empty or named twice"));
            }
            if k.values.is_empty() || k.values.len() > Self::MAX_VALUES {
                return Err(bad(k, &format!("1 to {} values", Self::MAX_VALUES)));
            }
            if k.values.windows(2).any(|w| w[0] >= w[1]) {
                return Err(bad(k, "values must be ascending and distinct"));
            }
            if !k.values.contains(&k.default) {
                return Err(bad(
                    k,
                    &format!("default {} is not among its values", k.default),
                ));
            }
        }
        let params = knobs
            .iter()
            .map(|k| Param::ints(&k.name, k.values.clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TuneError::InvalidOption(e.to_string()))?;
        let names: Vec<&str> = knobs.iter().map(|k| k.name.as_str()).collect();
        let space = Space::new(params)
            .and_then(|s| s.with_priority(&names))
            .map_err(|e| TuneError::InvalidOption(e.to_string()))?;
        Ok(Self { knobs, space })
    }

    /// The knobs, outermost first.
    pub fn knobs(&self) -> &[GivenKnob] {
        &self.knobs
    }

    /// How many configurations the space holds.
    pub fn len(&self) -> usize {
        self.knobs.iter().map(|k| k.values.len()).product()
    }

    /// Whether it holds none (never: every knob has a value).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every knob at its default.
    pub fn default_config(&self) -> GivenConfig {
        self.knobs
            .iter()
            .map(|k| (k.name.clone(), k.default))
            .collect()
    }

    /// Every knob at its largest value: the busiest configuration, whose
    /// trials scatter most on a loaded machine.
    pub fn busiest(&self) -> GivenConfig {
        self.knobs
            .iter()
            .map(|k| (k.name.clone(), k.values[k.values.len() - 1]))
            .collect()
    }

    fn config(&self, c: &GivenConfig) -> Config {
        Config(
            self.knobs
                .iter()
                .map(|k| Value::Int(c.get(&k.name).copied().unwrap_or(k.default)))
                .collect(),
        )
    }

    fn named(&self, c: &Config) -> GivenConfig {
        self.knobs
            .iter()
            .enumerate()
            .map(|(i, k)| (k.name.clone(), c.int(i)))
            .collect()
    }
}

/// Runs the caller's trials of a given space.
pub trait GivenTrials {
    /// Runs one trial of `config` (the same work every time: the same
    /// samples, the same consumer); its cost in seconds. With `bound`
    /// (pruning) a runner that can stops once past it and returns
    /// [`Measured::CutShort`] with the whole trial's cost estimated.
    fn run(
        &mut self,
        config: &GivenConfig,
        purpose: TrialPurpose,
        bound: Option<f64>,
    ) -> Result<Measured, TrialFailure>;
}

/// How a given space is tuned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GivenOptions {
    /// The descent, its race and pruning.
    pub avl: AvlOptions,
    /// Trials of each noise probe (under 2: not measured, the race keeps
    /// its fixed threshold).
    pub noise_repeats: usize,
    /// Measurements of the default and the pick in the final comparison.
    pub final_repeats: usize,
}

impl Default for GivenOptions {
    fn default() -> Self {
        Self {
            avl: TuneOptions::DEFAULT_AVL,
            noise_repeats: 5,
            final_repeats: 5,
        }
    }
}

/// A configuration and its median time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GivenTime {
    /// The configuration.
    pub config: GivenConfig,
    /// Its median seconds (infinite when every measurement failed).
    pub seconds: f64,
}

/// One trial, in the order they ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GivenTrial {
    /// Why it ran: `warm-up`, `noise`, `search` or `final`.
    pub purpose: String,
    /// The configuration.
    pub config: GivenConfig,
    /// Its seconds (estimated for a trial cut short), or none.
    pub seconds: Option<f64>,
    /// Why it has no time, or was cut short.
    pub note: Option<String>,
}

/// The repeated trials of one configuration that measured the noise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GivenNoise {
    /// The configuration.
    pub config: GivenConfig,
    /// Its trials' seconds.
    pub seconds: Vec<f64>,
    /// Their median.
    pub median: f64,
    /// (slowest − fastest) / median, without the extremes from 5 trials on.
    pub relative_spread: f64,
}

/// What tuning a given space found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GivenReport {
    /// The knobs searched, outermost first.
    pub knobs: Vec<GivenKnob>,
    /// Configurations in the space.
    pub configurations: usize,
    /// The noise probes.
    pub noise: Vec<GivenNoise>,
    /// The race's threshold (relative) the search ran with: from the
    /// noisiest probe, or the fixed one where none was measured (0: no race).
    pub threshold: f64,
    /// The search's pick.
    pub searched: GivenConfig,
    /// The default in the final comparison (median).
    pub default: GivenTime,
    /// The search's pick in the final comparison (median).
    pub adapt: GivenTime,
    /// What to use: the search's pick, or the default where the pick was
    /// not faster in the final comparison.
    pub pick: GivenConfig,
    /// default / pick, of the final medians.
    pub speedup_vs_default: f64,
    /// Trials the search ran (its race included).
    pub search_trials: usize,
    /// Distinct configurations it measured.
    pub distinct: usize,
    /// Seconds the whole tuning took.
    pub seconds: f64,
    /// Every trial.
    pub trace: Vec<GivenTrial>,
    /// Trials that failed, with why.
    pub failures: Vec<String>,
}

/// The caller's trials as the search's objective; after a
/// [`TrialFailure::Stop`] nothing more runs.
struct GivenObjective<'r> {
    space: &'r GivenSpace,
    trials: &'r mut dyn GivenTrials,
    stopped: Option<String>,
}

impl GivenObjective<'_> {
    fn time(
        &mut self,
        config: &GivenConfig,
        purpose: TrialPurpose,
        bound: Option<f64>,
    ) -> Result<Measured, TuneError> {
        if let Some(why) = &self.stopped {
            return Err(TuneError::Stopped(why.clone()));
        }
        let r = self.trials.run(config, purpose, bound);
        checked(r, &show(config), &mut self.stopped)
    }

    fn check_stopped(&self) -> Result<(), TuneError> {
        self.stopped
            .as_ref()
            .map_or(Ok(()), |why| Err(TuneError::Stopped(why.clone())))
    }
}

impl Objective for GivenObjective<'_> {
    fn measure(&mut self, config: &Config) -> Result<f64, TrialError> {
        let c = self.space.named(config);
        Ok(self.time(&c, TrialPurpose::Search, None)?.value())
    }
    fn measure_until(&mut self, config: &Config, bound: f64) -> Result<Measured, TrialError> {
        let c = self.space.named(config);
        Ok(self.time(&c, TrialPurpose::Search, Some(bound))?)
    }
}

/// `name=value, …` of a configuration.
fn show(c: &GivenConfig) -> String {
    let parts: Vec<String> = c.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(", ")
}

/// Tunes `space` over the caller's `trials`: a warm-up of the default
/// (thrown away), `noise_repeats` trials each of the default and the
/// busiest configuration, round by round (the noisier sets the race's
/// threshold; both count as the search's first measurements), the AVL
/// descent, then the default and the pick measured `final_repeats` times,
/// interleaved. A failed trial is recorded and never picked; a
/// [`TrialFailure::Stop`] ends the run with [`TuneError::Stopped`].
pub fn tune_given(
    space: &GivenSpace,
    trials: &mut dyn GivenTrials,
    options: &GivenOptions,
    progress: Progress<'_>,
) -> Result<GivenReport, TuneError> {
    let started = Instant::now();
    let mut run = GivenRun {
        objective: GivenObjective {
            space,
            trials,
            stopped: None,
        },
        trace: Vec::new(),
        failures: Vec::new(),
        progress,
    };
    let default = space.default_config();
    run.trial(&default, TrialPurpose::WarmUp)?;
    let noise = run.noise(options.noise_repeats)?;
    let spread = noise
        .iter()
        .map(|n| n.relative_spread)
        .max_by(f64::total_cmp);
    let avl = measured_avl(options.avl, spread);
    let (searched, search_trials, distinct) = run.search(&noise, &avl)?;
    let [d, a] = run.final_comparison([&default, &searched], options.final_repeats)?;
    let pick = if a.seconds <= d.seconds {
        a.config.clone()
    } else {
        d.config.clone()
    };
    Ok(GivenReport {
        knobs: space.knobs().to_vec(),
        configurations: space.len(),
        threshold: avl.noise.threshold,
        speedup_vs_default: crate::report::speedup(d.seconds, a.seconds),
        noise,
        searched,
        default: d,
        adapt: a,
        pick,
        search_trials,
        distinct,
        seconds: started.elapsed().as_secs_f64(),
        trace: run.trace,
        failures: run.failures,
    })
}

/// One tuning run's trials and what they recorded.
struct GivenRun<'r, 'p> {
    objective: GivenObjective<'r>,
    trace: Vec<GivenTrial>,
    failures: Vec<String>,
    progress: Progress<'p>,
}

impl GivenRun<'_, '_> {
    /// One whole trial outside the search, recorded; a failure is `None`
    /// (a stop is an error).
    fn trial(
        &mut self,
        config: &GivenConfig,
        purpose: TrialPurpose,
    ) -> Result<Option<f64>, TuneError> {
        (self.progress)(&format!("{}: {}", purpose.name(), show(config)));
        let r = self.objective.time(config, purpose, None);
        self.objective.check_stopped()?;
        let (seconds, note) = match r {
            Ok(m) => (Some(m.value()), None),
            Err(e) => {
                self.failures
                    .push(format!("{} ({}): {e}", show(config), purpose.name()));
                (None, Some(format!("failed: {e}")))
            }
        };
        self.trace.push(GivenTrial {
            purpose: purpose.name().into(),
            config: config.clone(),
            seconds,
            note,
        });
        Ok(seconds)
    }

    /// The default and (where it differs) the busiest configuration,
    /// `repeats` trials each, round by round; a probe with a failed trial
    /// is left out.
    fn noise(&mut self, repeats: usize) -> Result<Vec<GivenNoise>, TuneError> {
        if repeats < 2 {
            return Ok(Vec::new());
        }
        let space = self.objective.space;
        let mut probes = vec![space.default_config()];
        if space.busiest() != probes[0] {
            probes.push(space.busiest());
        }
        let mut times: Vec<Option<Vec<f64>>> = vec![Some(Vec::new()); probes.len()];
        for _ in 0..repeats {
            for (p, t) in probes.iter().zip(times.iter_mut()) {
                if t.is_some() {
                    let s = self.trial(p, TrialPurpose::Noise)?;
                    match (s, t.as_mut()) {
                        (Some(s), Some(v)) => v.push(s),
                        _ => *t = None,
                    }
                }
            }
        }
        Ok(probes
            .into_iter()
            .zip(times)
            .filter_map(|(config, t)| {
                let seconds = t?;
                let (median, relative_spread) = median_and_spread(&seconds);
                Some(GivenNoise {
                    config,
                    seconds,
                    median,
                    relative_spread,
                })
            })
            .collect())
    }

    /// The AVL descent from the noise probes' trials: its pick, trials and
    /// distinct configurations.
    fn search(
        &mut self,
        noise: &[GivenNoise],
        avl: &AvlOptions,
    ) -> Result<(GivenConfig, usize, usize), TuneError> {
        let space = self.objective.space;
        let before: Vec<Prior> = noise
            .iter()
            .map(|n| Prior {
                config: space.config(&n.config),
                costs: n.seconds.clone(),
            })
            .collect();
        (self.progress)(&format!(
            "searching {} configurations (race threshold {:.1}%)",
            space.len(),
            avl.noise.threshold * 100.0
        ));
        let found = avl_search_from(&space.space, &mut self.objective, avl, &before);
        self.objective.check_stopped()?;
        for t in &found.trace {
            self.record_search(t);
        }
        let best = found.best.ok_or_else(|| {
            TuneError::NothingMeasured(self.failures.first().cloned().unwrap_or_default())
        })?;
        Ok((space.named(&best), found.trials, found.distinct))
    }

    fn record_search(&mut self, t: &adapt_search::Trial) {
        let config = self.objective.space.named(&t.config);
        let (seconds, note) = match &t.outcome {
            Outcome::Cost { cost } => (Some(*cost), None),
            Outcome::CutShort { estimate, bound } => (
                Some(*estimate),
                Some(format!(
                    "cut short past {bound:.3} s (pruned), its whole time estimated"
                )),
            ),
            Outcome::Infeasible { reason } => (None, Some(format!("infeasible: {reason}"))),
            Outcome::Failed { message } => {
                self.failures
                    .push(format!("{} (search): {message}", show(&config)));
                (None, Some(format!("failed: {message}")))
            }
            Outcome::Skipped { reason } => (None, Some(format!("skipped (pruned): {reason}"))),
        };
        (self.progress)(&format!(
            "search: {} -> {}",
            show(&config),
            seconds.map_or("no time".into(), |s| format!("{s:.3} s"))
        ));
        self.trace.push(GivenTrial {
            purpose: TrialPurpose::Search.name().into(),
            config,
            seconds,
            note,
        });
    }

    /// Each contender measured `repeats` times, round by round: their
    /// medians (infinite where every trial failed).
    fn final_comparison(
        &mut self,
        contenders: [&GivenConfig; 2],
        repeats: usize,
    ) -> Result<[GivenTime; 2], TuneError> {
        let mut times = [Vec::new(), Vec::new()];
        for _ in 0..repeats.max(1) {
            for (c, t) in contenders.iter().zip(times.iter_mut()) {
                if let Some(s) = self.trial(c, TrialPurpose::Final)? {
                    t.push(s);
                }
            }
        }
        Ok([0, 1].map(|i| GivenTime {
            config: contenders[i].clone(),
            seconds: if times[i].is_empty() {
                f64::INFINITY
            } else {
                median_and_spread(&times[i]).0
            },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knob(name: &str, values: &[i64], default: i64) -> GivenKnob {
        GivenKnob {
            name: name.into(),
            values: values.to_vec(),
            default,
        }
    }

    /// Ray-like knobs: prefetch outermost, rows per block, concurrency innermost.
    fn ray_space() -> GivenSpace {
        GivenSpace::new(vec![
            knob("prefetch_batches", &[1, 2, 4, 8], 1),
            knob("batch_size", &[16, 32, 64, 128, 256], 256),
            knob("concurrency", &[1, 2, 3, 4], 4),
        ])
        .unwrap()
    }

    /// A cost with one optimum (concurrency 3, rows 64, prefetch 4) and a
    /// deterministic ±2% jitter; configurations in `fails` fail, and the
    /// trial after `stop_after` asks the run to stop.
    struct Analytic {
        calls: Vec<(GivenConfig, TrialPurpose)>,
        fails: Vec<i64>,
        stop_after: Option<usize>,
    }

    impl Analytic {
        fn new() -> Self {
            Self {
                calls: Vec::new(),
                fails: Vec::new(),
                stop_after: None,
            }
        }
    }

    impl GivenTrials for Analytic {
        fn run(
            &mut self,
            c: &GivenConfig,
            purpose: TrialPurpose,
            _bound: Option<f64>,
        ) -> Result<Measured, TrialFailure> {
            self.calls.push((c.clone(), purpose));
            if self.stop_after.is_some_and(|n| self.calls.len() > n) {
                return Err(TrialFailure::Stop("interrupted".into()));
            }
            let (k, b, p) = (c["concurrency"], c["batch_size"], c["prefetch_batches"]);
            if self.fails.contains(&k) {
                return Err(TrialFailure::Failed(format!(
                    "concurrency {k} ran out of memory"
                )));
            }
            let log = |x: i64| (x as f64).log2();
            let cost = 1.0
                + 0.3 * (k - 3).abs() as f64
                + 0.2 * (log(b) - 6.0).abs()
                + 0.1 * (log(p) - 2.0).abs();
            let jitter = 1.0 + 0.02 * ((self.calls.len() * 7919 % 11) as f64 / 5.0 - 1.0);
            Ok(Measured::Whole(cost * jitter))
        }
    }

    #[test]
    fn a_space_names_the_knob_that_is_wrong() {
        let cases = [
            (
                vec![knob("a", &[1, 2], 1), knob("a", &[1], 1)],
                "\"a\": empty or named twice",
            ),
            (
                vec![knob("b", &[2, 1], 1)],
                "\"b\": values must be ascending",
            ),
            (vec![knob("c", &[1, 2], 3)], "\"c\": default 3 is not among"),
            (vec![knob("d", &[], 0)], "\"d\": 1 to 4096 values"),
            (vec![], "1 to 8 knobs, not 0"),
        ];
        for (knobs, says) in cases {
            let e = GivenSpace::new(knobs).unwrap_err().to_string();
            assert!(e.contains(says), "{e}");
        }
        let s = ray_space();
        assert_eq!(s.len(), 80);
        assert_eq!(s.default_config()["batch_size"], 256);
        assert_eq!(s.busiest()["prefetch_batches"], 8);
    }

    #[test]
    fn the_search_finds_the_optimum_within_the_noise_and_reports_every_trial() {
        let space = ray_space();
        let mut trials = Analytic::new();
        let r = tune_given(&space, &mut trials, &GivenOptions::default(), &|_: &str| {}).unwrap();
        let want: GivenConfig = [
            ("batch_size", 64),
            ("concurrency", 3),
            ("prefetch_batches", 4),
        ]
        .map(|(k, v)| (k.to_owned(), v))
        .into();
        assert_eq!(r.pick, want, "{:?}", r.trace);
        assert!(r.speedup_vs_default > 1.5, "{}", r.speedup_vs_default);
        assert!(
            r.search_trials < space.len() / 2,
            "{} trials",
            r.search_trials
        );
        // The warm-up first; 5 noise trials each of the default and the
        // busiest; 5 final trials each of the default and the pick.
        assert_eq!(trials.calls[0].1, TrialPurpose::WarmUp);
        let count = |p: TrialPurpose| trials.calls.iter().filter(|c| c.1 == p).count();
        assert_eq!(
            (count(TrialPurpose::Noise), count(TrialPurpose::Final)),
            (10, 10)
        );
        let skipped = |t: &&GivenTrial| t.note.as_deref().is_some_and(|n| n.starts_with("skipped"));
        let ran = r.trace.iter().filter(|t| !skipped(t)).count();
        assert_eq!(
            ran,
            trials.calls.len(),
            "the trace holds every trial run (and the skipped)"
        );
        assert_eq!(r.noise.len(), 2);
        assert!(
            r.threshold >= 0.01 && r.threshold <= 0.05,
            "{}",
            r.threshold
        );
        assert!(r.failures.is_empty());
    }

    #[test]
    fn a_failing_configuration_is_recorded_and_never_picked() {
        let space = ray_space();
        let mut trials = Analytic::new();
        trials.fails = vec![3];
        let r = tune_given(&space, &mut trials, &GivenOptions::default(), &|_: &str| {}).unwrap();
        assert_ne!(r.pick["concurrency"], 3);
        assert!(
            r.failures.iter().any(|f| f.contains("ran out of memory")),
            "{:?}",
            r.failures
        );
        assert!(
            r.trace
                .iter()
                .any(|t| t.seconds.is_none() && t.config["concurrency"] == 3)
        );
    }

    #[test]
    fn the_default_stays_where_nothing_beats_it() {
        let space = GivenSpace::new(vec![knob("concurrency", &[1, 2, 3], 3)]).unwrap();
        struct Flat;
        impl GivenTrials for Flat {
            fn run(
                &mut self,
                c: &GivenConfig,
                _: TrialPurpose,
                _: Option<f64>,
            ) -> Result<Measured, TrialFailure> {
                Ok(Measured::Whole(1.0 + 0.5 * (3 - c["concurrency"]) as f64))
            }
        }
        let r = tune_given(&space, &mut Flat, &GivenOptions::default(), &|_: &str| {}).unwrap();
        assert_eq!(r.pick, space.default_config());
        assert_eq!(r.speedup_vs_default, 1.0);
        // Identical trials: the noise is 0 and the threshold its floor.
        assert_eq!(r.noise.len(), 1, "the busiest is the default here");
        assert_eq!(r.threshold, 0.01);
    }

    #[test]
    fn a_stop_ends_the_run() {
        let mut trials = Analytic::new();
        trials.stop_after = Some(8);
        let e = tune_given(
            &ray_space(),
            &mut trials,
            &GivenOptions::default(),
            &|_: &str| {},
        );
        assert!(matches!(e, Err(TuneError::Stopped(_))), "{e:?}");
        assert_eq!(trials.calls.len(), 9, "nothing runs after the stop");
    }
}
