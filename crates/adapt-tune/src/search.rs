//! The searches of one batch size: the AVL search (and with `both` the
//! other descent, plain or refined, beside it) and the grid, each
//! reporting its trials as it goes; what they found, and where the pick
//! came from.

use crate::options::{Progress, Strategy};
use crate::report::{Searches, TraceEntry};
use crate::{ConfigTime, KnobSpace, LoaderKnobs, SearchCost, TuneError};
use adapt_search::{
    AvlOptions, Config, GridResult, Measured, Objective, Outcome, Prior, Trial, avl_search_from,
    grid_search,
};

/// Where the tuned configuration came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PickedBy {
    /// A saved profile entry (no search ran).
    Profile,
    /// The AVL search.
    Avl,
    /// The grid search (`--strategy grid`).
    Grid,
}

impl PickedBy {
    /// The name reports record.
    pub(crate) fn name(self) -> &'static str {
        match self {
            PickedBy::Profile => "profile",
            PickedBy::Avl => "avl",
            PickedBy::Grid => "grid",
        }
    }
}

/// What the searches of one batch size found.
pub(crate) struct Searched {
    /// The tuned configuration.
    pub pick: LoaderKnobs,
    /// Where it came from.
    pub picked_by: PickedBy,
    /// The other AVL descent's pick (`both`: plain when the search was
    /// refined, refined when it was plain; the same race).
    pub other: Option<LoaderKnobs>,
    /// The grid's best (`grid`, `both`).
    pub optimal: Option<LoaderKnobs>,
    /// The grid, when it ran.
    pub grid: Option<GridResult>,
    /// The AVL search's path.
    pub avl_path: Vec<LoaderKnobs>,
    /// What each search cost.
    pub costs: Searches,
    /// Every trial, in the order run.
    pub trace: Vec<TraceEntry>,
}

impl Searched {
    /// The grid's configurations, fastest first.
    pub(crate) fn grid_ranked(&self) -> Vec<ConfigTime> {
        self.grid.as_ref().map_or_else(Vec::new, |g| {
            g.ranked
                .iter()
                .map(|(c, s)| ConfigTime {
                    config: KnobSpace::knobs(c),
                    seconds: *s,
                })
                .collect()
        })
    }

    /// The rank of `k` in the grid, when the grid ran.
    pub(crate) fn grid_rank(&self, space: &KnobSpace, k: Option<LoaderKnobs>) -> Option<usize> {
        let (g, k) = (self.grid.as_ref()?, k?);
        g.rank_of(&space.config(&k))
    }
}

/// The descent `both` runs beside `avl`: the other refinement setting,
/// the same race.
pub(crate) fn other_avl(avl: &AvlOptions) -> AvlOptions {
    AvlOptions {
        refine: !avl.refine,
        ..*avl
    }
}

/// What one batch size's searches run with.
pub(crate) struct SearchPlan<'a> {
    /// Which searches.
    pub(crate) strategy: Strategy,
    /// The descent's settings (its noise threshold measured).
    pub(crate) avl: AvlOptions,
    /// A profile entry's knobs: no AVL search then.
    pub(crate) saved: Option<LoaderKnobs>,
    /// The times measured before the search (the noise probes'): the AVL
    /// searches take them as first measurements and pruning cuts against
    /// the cheapest from the first trial; the grid measures every
    /// configuration itself, as the paper's grid does.
    pub(crate) before: Vec<Prior>,
    /// What the progress lines start with.
    pub(crate) label: String,
    /// Where progress goes.
    pub(crate) progress: Progress<'a>,
}

/// Runs the searches `plan` asks for over `space`, each trial one of
/// `objective`'s.
pub(crate) fn run_searches<O: Objective>(
    space: &KnobSpace,
    objective: &mut O,
    plan: &SearchPlan<'_>,
) -> Result<Searched, TuneError> {
    let SearchPlan {
        strategy,
        ref avl,
        saved,
        ref before,
        ref label,
        progress,
    } = *plan;
    let mut pick = saved.map(|k| (k, PickedBy::Profile));
    let mut found = Searched {
        pick: LoaderKnobs::DEFAULT,
        picked_by: PickedBy::Profile,
        other: None,
        optimal: None,
        grid: None,
        avl_path: Vec::new(),
        costs: Searches::default(),
        trace: Vec::new(),
    };
    if pick.is_none() && strategy != Strategy::Grid {
        let mut rep = Reporting::new(&mut *objective, format!("{label} avl"), progress);
        let r = avl_search_from(space.space(), &mut rep, avl, before);
        found.trace.extend(trace_entries("avl", &r.trace));
        found.avl_path = r.path.iter().map(|s| KnobSpace::knobs(&s.config)).collect();
        found.costs.avl = Some(cost(r.trials, r.wall));
        let best = r
            .best
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&r.trace)))?;
        pick = Some((KnobSpace::knobs(&best), PickedBy::Avl));
    }
    // `both`: the other descent (plain or refined) with the same race,
    // beside the one that picks, so the two are compared on one run.
    if strategy == Strategy::Both && saved.is_none() {
        let other = other_avl(avl);
        let name = crate::options::descent_name(&other);
        let mut rep = Reporting::new(&mut *objective, format!("{label} {name} avl"), progress);
        let r = avl_search_from(space.space(), &mut rep, &other, before);
        found
            .trace
            .extend(trace_entries(&format!("avl-{name}"), &r.trace));
        found.costs.avl_other = Some(cost(r.trials, r.wall));
        found.other = r.best.as_ref().map(KnobSpace::knobs);
    }
    if strategy != Strategy::Avl {
        let feasible = space
            .space()
            .configurations()
            .iter()
            .filter(|c| objective.feasible(c).is_ok())
            .count();
        let mut rep =
            Reporting::new(&mut *objective, format!("{label} grid"), progress).of(feasible);
        let g = grid_search(space.space(), &mut rep);
        found.trace.extend(trace_entries("grid", &g.trace));
        found.costs.grid = Some(cost(g.trials, g.wall));
        let (best, _) = g
            .best()
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&g.trace)))?;
        let best = KnobSpace::knobs(best);
        found.optimal = Some(best);
        pick = pick.or(Some((best, PickedBy::Grid)));
        found.grid = Some(g);
    }
    if let (Some(a), Some(g)) = (&found.costs.avl, &found.costs.grid) {
        found.costs.grid_over_avl = Some(g.seconds / a.seconds.max(1e-9));
    }
    (found.pick, found.picked_by) =
        pick.ok_or_else(|| TuneError::NothingMeasured("no search ran".into()))?;
    Ok(found)
}

fn cost(trials: usize, wall: std::time::Duration) -> SearchCost {
    SearchCost {
        trials,
        seconds: wall.as_secs_f64(),
    }
}

/// The search's trials as report entries, labelled by `strategy`.
pub(crate) fn trace_entries(strategy: &str, trace: &[Trial]) -> Vec<TraceEntry> {
    trace
        .iter()
        .map(|t| {
            let (seconds, note) = match &t.outcome {
                Outcome::Cost { cost } => (Some(*cost), None),
                Outcome::CutShort { estimate, bound } => (
                    Some(*estimate),
                    Some(format!(
                        "cut short past {bound:.3} s (pruned: it could no longer win); \
                         the whole trial's time estimated from the batches it read"
                    )),
                ),
                Outcome::Infeasible { reason } => (None, Some(format!("infeasible: {reason}"))),
                Outcome::Failed { message } => (None, Some(format!("failed: {message}"))),
                Outcome::Skipped { reason } => (None, Some(format!("skipped (pruned): {reason}"))),
            };
            TraceEntry {
                strategy: strategy.into(),
                config: KnobSpace::knobs(&t.config),
                seconds,
                note,
                repeat: t.repeat,
            }
        })
        .collect()
}

/// A progress-reporting wrapper around an objective: one line per trial
/// with the configuration, its time, the best so far and, where the number
/// of trials is known (the grid), the time left.
struct Reporting<'a, O> {
    inner: &'a mut O,
    label: String,
    count: usize,
    total: Option<usize>,
    best: f64,
    started: std::time::Instant,
    progress: Progress<'a>,
}

impl<'a, O> Reporting<'a, O> {
    fn new(inner: &'a mut O, label: String, progress: Progress<'a>) -> Self {
        Self {
            inner,
            label,
            count: 0,
            total: None,
            best: f64::INFINITY,
            started: std::time::Instant::now(),
            progress,
        }
    }

    /// The same, for a search of `total` trials.
    fn of(mut self, total: usize) -> Self {
        self.total = Some(total);
        self
    }

    /// "best 0.41 s, 12 s in, about 30 s left".
    fn standing(&self) -> String {
        let spent = self.started.elapsed().as_secs_f64();
        let best = if self.best.is_finite() {
            format!("best {:.3} s", self.best)
        } else {
            "none measured yet".into()
        };
        match self.total {
            Some(total) if self.count > 0 => {
                let left = spent / self.count as f64 * total.saturating_sub(self.count) as f64;
                format!("{best}; {spent:.0} s in, about {left:.0} s left")
            }
            _ => format!("{best}; {spent:.0} s in"),
        }
    }
}

impl<O: Objective> Objective for Reporting<'_, O> {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        self.inner.feasible(config)
    }
    fn measure(&mut self, config: &Config) -> Result<f64, adapt_search::TrialError> {
        let r = self.inner.measure(config);
        self.show(config, r.as_ref().map(|s| Measured::Whole(*s)));
        r
    }
    fn measure_until(
        &mut self,
        config: &Config,
        bound: f64,
    ) -> Result<Measured, adapt_search::TrialError> {
        let r = self.inner.measure_until(config, bound);
        self.show(config, r.as_ref().copied());
        r
    }
}

impl<O> Reporting<'_, O> {
    /// The progress line of one trial.
    fn show(&mut self, config: &Config, r: Result<Measured, &adapt_search::TrialError>) {
        self.count += 1;
        let shown = match r {
            Ok(Measured::Whole(s)) => {
                self.best = self.best.min(s);
                format!("{s:.4} s")
            }
            Ok(Measured::CutShort(s)) => format!("cut short, losing (about {s:.4} s)"),
            Err(e) => format!("failed: {e}"),
        };
        let of = self.total.map_or(String::new(), |t| format!("/{t}"));
        (self.progress)(&format!(
            "{} trial {}{of}: {} → {shown} ({})",
            self.label,
            self.count,
            KnobSpace::knobs(config),
            self.standing()
        ));
    }
}

/// The first failure of a search that found nothing, as an example.
fn failure_summary(trace: &[Trial]) -> String {
    trace
        .iter()
        .find_map(|t| match &t.outcome {
            Outcome::Failed { message } => Some(format!("e.g. {message}")),
            Outcome::Infeasible { reason } => Some(format!("e.g. infeasible: {reason}")),
            Outcome::Cost { .. } | Outcome::CutShort { .. } | Outcome::Skipped { .. } => None,
        })
        .unwrap_or_else(|| "no trial ran".into())
}
