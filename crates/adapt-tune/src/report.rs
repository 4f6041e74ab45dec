//! The tuning report: the paper's Table 1 on this machine, plus the trace.

use crate::{LoaderKnobs, Machine, TrialSpec};
use serde::{Deserialize, Serialize};

fn two() -> u64 {
    2
}

fn null_as_infinity<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::INFINITY))
}

fn null_as_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// `base / pick`, NaN (null in JSON) when either failed: a failed
/// contender is no base for a speed-up.
pub(crate) fn speedup(base: f64, pick: f64) -> f64 {
    if base.is_finite() && pick.is_finite() {
        base / pick
    } else {
        f64::NAN
    }
}

/// A configuration and its measured time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigTime {
    /// The knobs.
    pub config: LoaderKnobs,
    /// Median seconds of the final comparison (or the trial cost where so
    /// labelled); infinite (null in JSON) when it failed.
    #[serde(deserialize_with = "null_as_infinity")]
    pub seconds: f64,
}

/// What a search cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchCost {
    /// Objective runs (repeats included).
    pub trials: usize,
    /// Wall seconds of the search.
    pub seconds: f64,
}

/// The searches' costs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Searches {
    /// The AVL search (absent when the pick came from a profile).
    pub avl: Option<SearchCost>,
    /// The other AVL descent (with `--strategy both`; `other_avl`
    /// says which).
    #[serde(default, alias = "avl_plain")]
    pub avl_other: Option<SearchCost>,
    /// The grid search, when run.
    pub grid: Option<SearchCost>,
    /// Grid wall time over AVL wall time.
    pub grid_over_avl: Option<f64>,
}

/// Which search ran, with its parameters: every report and profile says it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StrategyRecord {
    /// `avl`, `grid` or `both` (both AVL descents, plain and refined, with
    /// the same race, and the grid, side by side).
    pub search: String,
    /// The AVL descent as published (`plain`) or with refinement
    /// (`refined`: sorted-order neighbours tried after the descent).
    pub avl: String,
    /// The race's threshold when not measured: measured configurations
    /// within twice this (relative) of the cheapest are raced at the end of
    /// the AVL search, one more than this behind the leader dropped; 0 = off.
    pub noise_threshold: f64,
    /// Where the threshold came from: `measured` (the trial-to-trial spread
    /// on this machine and pipeline) or `fixed`.
    #[serde(alias = "threshold_source")]
    pub threshold_from: String,
    /// Measurements of each raced configuration at most.
    pub noise_max_repeats: usize,
    /// Configurations raced at most (0 in reports written before the race).
    #[serde(default)]
    pub noise_candidates: usize,
    /// Milliseconds the consumer spent per batch in every trial (a
    /// stand-in for a training step), 0 for none.
    #[serde(alias = "step_ms")]
    pub train_step_ms: f64,
    /// The knob space searched: `machine` or `paper`.
    #[serde(default = "machine_space")]
    pub space: String,
    /// Whether the AVL search pruned (stopped a clearly losing trial,
    /// skipped a value that clearly lost under two other contexts; false in
    /// reports written before it).
    #[serde(default)]
    pub prune: bool,
}

fn machine_space() -> String {
    "machine".into()
}

/// The trial-to-trial noise measured before a search.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// The configuration measured repeatedly.
    pub config: LoaderKnobs,
    /// Its trial times, seconds, in order.
    pub seconds: Vec<f64>,
    /// Their median.
    pub median: f64,
    /// (slowest − fastest) / median, the single slowest and fastest left
    /// out from five trials on: differences below this are noise.
    pub relative_spread: f64,
}

/// One trial in the report's trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceEntry {
    /// `avl`, `avl-plain` or `avl-refined` (the other descent, with
    /// `both`), `grid` or `noise` (the noise measurement).
    pub strategy: String,
    /// The knobs.
    pub config: LoaderKnobs,
    /// Seconds, absent when the trial was infeasible or failed.
    pub seconds: Option<f64>,
    /// Why there is no time.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub note: Option<String>,
    /// 1 for a first measurement, 2+ for repeats.
    pub repeat: usize,
}

/// Results for one batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunReport {
    /// Batch size.
    pub batch_size: usize,
    /// PyTorch's defaults (no workers).
    pub default: ConfigTime,
    /// Half the cores, prefetch 2.
    pub recommended: ConfigTime,
    /// Best of the grid, when the grid ran.
    pub optimal: Option<ConfigTime>,
    /// ADaPT's pick.
    pub adapt: ConfigTime,
    /// Where the pick came from: `avl` or `profile`.
    #[serde(alias = "adapt_source")]
    pub adapt_picked_by: String,
    /// Rank of ADaPT's pick in the grid (1 = best), when the grid ran.
    pub adapt_rank: Option<usize>,
    /// Canonical configurations in the space (the grid's size).
    pub grid_size: usize,
    /// Configurations the memory budget pruned.
    pub pruned: usize,
    /// `default.seconds / adapt.seconds`; NaN (null) when either failed.
    #[serde(deserialize_with = "null_as_nan")]
    pub speedup_vs_default: f64,
    /// `recommended.seconds / adapt.seconds`; NaN (null) when either failed.
    #[serde(deserialize_with = "null_as_nan")]
    pub speedup_vs_recommended: f64,
    /// `adapt.seconds / optimal.seconds`, when the grid ran.
    pub adapt_over_optimal: Option<f64>,
    /// Search costs.
    pub search: Searches,
    /// The grid's trial costs, best first (for `--replay`).
    pub grid: Vec<ConfigTime>,
    /// The AVL search's moves, in order (configuration after each move).
    pub avl_path: Vec<LoaderKnobs>,
    /// Every trial, in order.
    pub trace: Vec<TraceEntry>,
    /// Contenders that failed in the final comparison (their time is
    /// infinite, written as null).
    #[serde(default)]
    pub failures: Vec<String>,
    /// The trial length used for this batch size (sized by time).
    #[serde(default)]
    pub trial: Option<TrialSpec>,
    /// The noise measured before searching: the noisiest probe's, which
    /// set the threshold.
    #[serde(default)]
    pub noise: Option<Noise>,
    /// Every configuration the noise was measured on (the recommended one
    /// and the busiest), interleaved trials.
    #[serde(default)]
    pub noise_probes: Vec<Noise>,
    /// The cheapest configuration (fewest workers, then fewest batches in
    /// memory) whose trial time is within the measured noise of the best
    /// trial: what to run when the loader only has to keep up.
    #[serde(default)]
    pub cheapest: Option<ConfigTime>,
    /// The other AVL descent's pick (with `--strategy both`;
    /// `other_avl` says which).
    #[serde(default, alias = "plain")]
    pub other: Option<ConfigTime>,
    /// Its rank in the grid.
    #[serde(default, alias = "plain_rank")]
    pub other_rank: Option<usize>,
    /// Which descent `other` is: `plain` or `refined`, with the same race
    /// as the search that picked (reports before it was named: the
    /// paper's plain descent without the race).
    #[serde(default)]
    pub other_avl: Option<String>,
}

/// A whole tuning report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The machine.
    pub machine: Machine,
    /// The dataset: kind, path, samples, sample shape, fingerprint.
    pub dataset: serde_json::Value,
    /// Trial length.
    pub trial: TrialSpec,
    /// Memory budget, bytes.
    pub budget_bytes: u64,
    /// Repeats of the final comparison (medians reported).
    pub final_repeats: usize,
    /// Samples per epoch of the final comparison, 2 epochs each.
    pub final_samples: usize,
    /// Epochs of each final measurement (sized by time; the most over the
    /// batch sizes).
    #[serde(default = "two")]
    pub final_epochs: u64,
    /// Knobs fixed for lack of hardware, and other remarks.
    pub notes: Vec<String>,
    /// What search ran, with which parameters.
    #[serde(default)]
    pub strategy: StrategyRecord,
    /// Per batch size.
    pub runs: Vec<RunReport>,
}

impl Report {
    /// The human table.
    pub fn table(&self) -> String {
        let mut s = self.header();
        for r in &self.runs {
            s += &r.table(self.command().is_some());
        }
        s
    }

    /// The command a `--command` run tuned.
    fn command(&self) -> Option<&str> {
        self.dataset.get("command").and_then(|c| c.as_str())
    }

    /// Machine, data and pipeline, notes, the search and the comparison.
    fn header(&self) -> String {
        let m = &self.machine;
        let mut s = format!(
            "machine: {} cores, {:.1} GiB, GPU: {}\n",
            m.cores,
            m.memory_bytes as f64 / (1u64 << 30) as f64,
            m.gpu.as_deref().unwrap_or("none (host backend)")
        );
        // One readable line: data and pipeline (the JSON report keeps all).
        let d = &self.dataset;
        match (d.get("kind"), d.get("pipeline")) {
            (Some(kind), Some(p)) => {
                s += &format!(
                    "dataset: {} at {} ({} samples, {}x{}x{})\npipeline: {} -> {}\n",
                    kind.as_str().unwrap_or("?"),
                    d["path"].as_str().unwrap_or("?"),
                    d["samples"],
                    d["shape"][0],
                    d["shape"][1],
                    d["shape"][2],
                    p["transforms"].as_str().unwrap_or("?"),
                    p["output"].as_str().unwrap_or("?"),
                );
            }
            _ => match self.command() {
                Some(c) => {
                    s += &format!(
                        "tuned: the DataLoader knobs of `{c}`, substituted per trial; cost: {}\n",
                        d.get("metric")
                            .and_then(|m| m.as_str())
                            .map_or("its wall time".into(), |m| format!(
                                "the number it prints matching {m:?}"
                            ))
                    );
                }
                None => s += &format!("dataset: {d}\n"),
            },
        }
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        let st = &self.strategy;
        s += &format!(
            "search: {} over the {} space (AVL {}; noise policy {}; pruning {}; consumer step {} ms)\n",
            st.search,
            st.space,
            st.avl,
            st.policy(),
            if st.prune {
                "past twice the noise"
            } else {
                "off"
            },
            st.train_step_ms
        );
        s += &match self.command() {
            Some(_) => format!(
                "final comparison: each contender run {} times, interleaved, median\n",
                self.final_repeats
            ),
            None => format!(
                "final comparison: {} epochs of {} samples, median of {} runs\n",
                self.final_epochs, self.final_samples, self.final_repeats
            ),
        };
        s
    }
}

impl StrategyRecord {
    /// The noise policy in words.
    fn policy(&self) -> String {
        if self.noise_threshold > 0.0 && self.threshold_from == "measured" {
            format!(
                "races up to {} configurations within twice the noise measured per batch size, {} measurements each",
                self.noise_candidates, self.noise_max_repeats
            )
        } else if self.noise_threshold > 0.0 {
            format!(
                "races up to {} configurations within twice {:.1}% (fixed), {} measurements each",
                self.noise_candidates,
                self.noise_threshold * 100.0,
                self.noise_max_repeats
            )
        } else {
            "off".into()
        }
    }
}

impl RunReport {
    /// One batch size's part of the table (the command's, for a
    /// `--command` run).
    fn table(&self, command: bool) -> String {
        let mut s = if command {
            "\nthe command\n".to_owned()
        } else {
            format!("\nbatch size {}\n", self.batch_size)
        };
        s += &self.noise_line();
        s += &format!("  {:<12} {:>10}  {}\n", "", "seconds", "configuration");
        let row = |name: &str, c: &ConfigTime| {
            if c.seconds.is_finite() {
                format!("  {:<12} {:>10.4}  {}\n", name, c.seconds, c.config)
            } else {
                format!("  {:<12} {:>10}  {}\n", name, "failed", c.config)
            }
        };
        s += &row("default", &self.default);
        s += &row("recommended", &self.recommended);
        if let Some(o) = &self.optimal {
            s += &row("optimal", o);
        }
        if let Some(p) = &self.other {
            s += &row(&format!("avl {}", self.other_name()), p);
        }
        s += &row(&format!("adapt ({})", self.adapt_picked_by), &self.adapt);
        if let Some(c) = &self.cheapest {
            s += &row("cheapest", c);
        }
        s += &self.speedup_line();
        for f in &self.failures {
            s += &format!("  failed: {f}\n");
        }
        s += &self.search_line();
        s
    }

    /// The trial length and the noise measured on each probe.
    fn noise_line(&self) -> String {
        let (Some(t), Some(n)) = (&self.trial, &self.noise) else {
            return String::new();
        };
        // Reports written before several probes list only one.
        let probes = if self.noise_probes.is_empty() {
            std::slice::from_ref(n)
        } else {
            &self.noise_probes[..]
        };
        let each: Vec<String> = probes
            .iter()
            .map(|p| {
                format!(
                    "{:.1}% on {} ({:.3} s median)",
                    p.relative_spread * 100.0,
                    p.config,
                    p.median
                )
            })
            .collect();
        format!(
            "  trials: {} samples x {} epochs; noise {:.1}% (trimmed range / median of {} trials each: {})\n",
            t.samples,
            t.epochs,
            n.relative_spread * 100.0,
            n.seconds.len(),
            each.join(", ")
        )
    }

    /// The speed-ups and the pick's place in the grid.
    fn speedup_line(&self) -> String {
        // A contender that failed is no base for a speed-up.
        let vs = |base: &ConfigTime, ratio: f64, name: &str| {
            if base.seconds.is_finite() && self.adapt.seconds.is_finite() {
                format!("{ratio:.2}x vs {name}")
            } else if base.seconds.is_finite() {
                format!("none vs {name} (the pick failed)")
            } else {
                format!("none vs {name} (it failed)")
            }
        };
        let mut s = format!(
            "  speed-up: {}, {}",
            vs(&self.default, self.speedup_vs_default, "default"),
            vs(
                &self.recommended,
                self.speedup_vs_recommended,
                "recommended"
            )
        );
        if let (Some(rank), Some(ratio)) = (self.adapt_rank, self.adapt_over_optimal) {
            s += &format!(
                "; rank {rank} of {} in the grid, {:.1}% from the optimum",
                self.grid_size,
                (ratio - 1.0) * 100.0
            );
        }
        if let (Some(rank), Some(p), Some(o)) = (self.other_rank, &self.other, &self.optimal) {
            s += &format!(
                "; {} AVL: rank {rank}, {:.1}% from the optimum",
                self.other_name(),
                (p.seconds / o.seconds - 1.0) * 100.0
            );
        }
        s + "\n"
    }

    /// Which descent ran beside the picking one.
    fn other_name(&self) -> &str {
        self.other_avl.as_deref().unwrap_or("plain")
    }

    /// What each search cost.
    fn search_line(&self) -> String {
        let Some(a) = &self.search.avl else {
            return String::new();
        };
        let mut s = format!("  search: AVL {} trials in {:.2} s", a.trials, a.seconds);
        if let Some(p) = &self.search.avl_other {
            s += &format!(
                "; {} AVL {} trials in {:.2} s",
                self.other_name(),
                p.trials,
                p.seconds
            );
        }
        if let Some(g) = &self.search.grid {
            s += &format!(
                "; grid {} trials in {:.2} s ({:.1}x the AVL time)",
                g.trials,
                g.seconds,
                self.search.grid_over_avl.unwrap_or(f64::NAN)
            );
        }
        s + &format!(
            "; {} of {} configurations over the memory budget\n",
            self.pruned, self.grid_size
        )
    }
}
