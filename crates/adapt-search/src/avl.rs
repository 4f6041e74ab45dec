//! The AVL-tree search of the ADaPT paper: one balanced tree per parameter,
//! nested by priority, with optional refinement and a noise race.

use crate::runner::{Prior, Runner};
use crate::{Config, Objective, Space, Tree, Trial, Value};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// The race that ends a noise-aware search: near-ties re-measured, fresh
/// medians decide.
///
/// The descent and the refinement compare single measurements; re-measuring
/// every close call along the way costs as many trials as the descent
/// itself once the noise is a few percent (most calls are close on a flat
/// landscape). Instead, after the search, the (at most `candidates`)
/// cheapest configurations measured within twice `threshold` of the
/// cheapest are re-measured, round by round, those that fall more than
/// `threshold` behind dropped, `max_repeats − 1` times each; the lowest
/// median of those new measurements wins (the first measurements selected
/// the field, so they are biased low and do not vote).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct NoisePolicy {
    /// The measured noise (relative): configurations within twice this of
    /// the cheapest measurement are raced, and one more than this behind
    /// the leader is dropped; 0 turns the policy off (the paper's plain
    /// comparisons).
    pub threshold: f64,
    /// Measurements per raced configuration (the first included: the race
    /// adds `max_repeats − 1`).
    pub max_repeats: usize,
    /// Near-ties raced at most, cheapest first (the search's own pick is
    /// always among them).
    pub candidates: usize,
}

impl NoisePolicy {
    /// No re-measuring.
    pub const OFF: NoisePolicy = NoisePolicy {
        threshold: 0.0,
        max_repeats: 1,
        candidates: 0,
    };

    fn active(&self) -> bool {
        self.threshold > 0.0 && self.max_repeats >= 2 && self.candidates >= 1
    }
}

/// How the AVL search runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct AvlOptions {
    /// After the descent, step to sorted-order neighbours per parameter
    /// while the cost improves (not in the paper).
    pub refine: bool,
    /// Race the near-ties at the end (not in the paper).
    pub noise: NoisePolicy,
    /// Prune by the noise policy's margin, `1 + 2 × threshold` (not in the
    /// paper; nothing without a threshold): a first measurement stops once
    /// it passes the margin times the cheapest cost so far (it can be
    /// neither the pick nor in the race), and a child whose value lost by
    /// more than the margin under two other contexts of the outer
    /// parameters, and never did better, is not tried again.
    pub prune: bool,
}

impl AvlOptions {
    /// The paper's algorithm: no refinement, no re-measuring, no pruning.
    pub fn plain() -> Self {
        Self {
            refine: false,
            noise: NoisePolicy::OFF,
            prune: false,
        }
    }

    /// The pruning margin, a factor over a cost, when pruning is on.
    fn prune_factor(&self) -> Option<f64> {
        (self.prune && self.noise.threshold > 0.0).then_some(1.0 + 2.0 * self.noise.threshold)
    }
}

/// What the descent learnt of one value of one parameter as a child: the
/// contexts (the outer parameters' values) where it lost by more than the
/// pruning margin, and whether it ever did not.
#[derive(Default)]
struct Standing {
    lost_under: Vec<Vec<Value>>,
    held: bool,
}

/// A move of the search: at a parameter's tree (or in refinement), the
/// current value changed, and the best configuration found under it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Move {
    /// Index of the parameter that moved.
    pub param: usize,
    /// Its value before.
    pub from: Value,
    /// Its value after.
    pub to: Value,
    /// The best configuration under the new value.
    pub config: Config,
    /// Whether this move came from the refinement rather than the descent.
    pub refinement: bool,
}

/// The outcome of an AVL search.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AvlResult {
    /// The chosen configuration (canonical). `None` when every trial was
    /// infeasible or failed.
    pub best: Option<Config>,
    /// Its cost (median of its measurements); +inf when nothing ran.
    pub cost: f64,
    /// Objective runs, repeats included.
    pub trials: usize,
    /// Objective runs made after the descent (refinement and race).
    pub refinement_trials: usize,
    /// Distinct configurations measured.
    pub distinct: usize,
    /// Wall time of the whole search.
    pub wall: Duration,
    /// Every trial in order.
    pub trace: Vec<Trial>,
    /// Every move the descent (then the refinement) made.
    pub path: Vec<Move>,
}

/// Runs the nested AVL-tree search of `space` on `objective`.
pub fn avl_search<O: Objective + ?Sized>(
    space: &Space,
    objective: &mut O,
    options: &AvlOptions,
) -> AvlResult {
    avl_search_from(space, objective, options, &[])
}

/// [`avl_search`] that starts from costs measured `before` it on the same
/// objective with the same trials (the tuner's noise probes: five trials
/// each of two configurations). The search takes them as it would its own
/// first measurements, so it never runs those configurations' first trial
/// again (the race still re-measures them, and only its own measurements
/// vote there), and pruning cuts trials against the cheapest of them from
/// the first trial on. They are not in the result's trace or trial count:
/// the caller ran and reports them.
pub fn avl_search_from<O: Objective + ?Sized>(
    space: &Space,
    objective: &mut O,
    options: &AvlOptions,
    before: &[Prior],
) -> AvlResult {
    let mut s = Search {
        runner: Runner::new(space, objective)
            .cutting_past(options.prune_factor())
            .with_prior(before),
        options: *options,
        path: Vec::new(),
        standings: HashMap::new(),
    };
    let mut fixed = Config(space.params().iter().map(|p| p.values()[0]).collect());
    let mut best = s.level(0, &mut fixed);
    let descent_runs = s.runner.runs();
    if options.refine {
        best = s.refine(best);
    }
    if options.noise.active() {
        best = s.race(best);
    }
    let (best, cost) = s.runner.cost(&best);
    let runs = s.runner.runs();
    let distinct = {
        let mut seen: Vec<&Config> = s
            .runner
            .trace
            .iter()
            .filter(|t| t.outcome.ran())
            .map(|t| &t.config)
            .collect();
        seen.sort();
        seen.dedup();
        seen.len()
    };
    AvlResult {
        best: cost.is_finite().then_some(best),
        cost,
        trials: runs,
        refinement_trials: runs - descent_runs,
        distinct,
        wall: s.runner.elapsed(),
        trace: s.runner.trace,
        path: s.path,
    }
}

struct Search<'a, O: Objective + ?Sized> {
    runner: Runner<'a, O>,
    options: AvlOptions,
    path: Vec<Move>,
    /// Pruning's record, by (parameter, value).
    standings: HashMap<(usize, Value), Standing>,
}

impl<O: Objective + ?Sized> Search<'_, O> {
    fn better(&mut self, a: &Config, b: &Config) -> bool {
        self.runner.better(a, b)
    }

    /// The noise policy's race among the cheapest measured configurations;
    /// `best` (the search's pick) always runs in it.
    ///
    /// The field is the `candidates` cheapest within twice the threshold of
    /// the cheapest measurement, not within the threshold: that floor is the
    /// luckiest of dozens of noisy measurements (the winner's curse), and a
    /// configuration whose true cost is lower often measured a few noise
    /// widths above it. For the same reason only the race's own, fresh
    /// measurements decide: the first ones are what selected the field.
    fn race(&mut self, best: Config) -> Config {
        let n = self.options.noise;
        let (best, _) = self.runner.cost(&best);
        let measured = self.runner.measured();
        let Some(&(_, floor)) = measured.first() else {
            return best;
        };
        let mut field: Vec<Config> = measured
            .into_iter()
            .filter(|(_, c)| *c <= floor * (1.0 + 2.0 * n.threshold))
            .map(|(c, _)| c)
            .take(n.candidates)
            .collect();
        if !field.contains(&best) {
            if field.len() == n.candidates {
                field.pop();
            }
            field.push(best.clone());
        }
        if field.len() < 2 {
            return best;
        }
        // Each entry keeps how many measurements it had before the race:
        // only those after it vote.
        let mut field: Vec<(Config, usize)> = field
            .into_iter()
            .map(|c| {
                let n = self.runner.repeats(&c);
                (c, n)
            })
            .collect();
        // Round by round, so that a slow drift of the machine touches every
        // candidate alike; one clearly behind the leader is dropped.
        for _ in 1..n.max_repeats {
            // A field of one has nothing left to race against.
            if field.len() < 2 {
                break;
            }
            for (c, _) in &field {
                self.runner.remeasure(c);
            }
            let lead = field
                .iter()
                .map(|(c, from)| self.runner.median_from(c, *from))
                .fold(f64::INFINITY, f64::min);
            field.retain(|(c, from)| {
                self.runner.median_from(c, *from) <= lead * (1.0 + n.threshold)
            });
        }
        // Ties keep the earlier (cheaper first-measured) configuration.
        let mut winner: Option<(Config, f64)> = None;
        for (c, from) in field {
            let f = self.runner.median_from(&c, from);
            if winner.as_ref().is_none_or(|(_, w)| f < *w) {
                winner = Some((c, f));
            }
        }
        winner.map_or(best, |(c, _)| c)
    }

    /// Searches the tree at priority `level` (0 = outermost) with the
    /// lower-priority values held in `fixed`; returns the best full
    /// configuration found.
    ///
    /// The tree is built over the values that have at least one feasible
    /// completion in this context (a predicate check, no trial), so a
    /// memory budget shrinks trees instead of walling off their roots.
    fn level(&mut self, level: usize, fixed: &mut Config) -> Config {
        let param = self.runner.space.priority()[level];
        let domain = self.feasible_values(level, param, fixed);
        if domain.is_empty() {
            // Nothing here can run: the caller sees an unusable configuration.
            return self.runner.cost(fixed).0;
        }
        let tree = Tree::new(domain.len());
        let mut cur = tree.root();
        let mut best = self.node(level, param, domain[cur], fixed);
        loop {
            let (l, r) = tree.children(cur);
            let kids: Vec<usize> = [l, r].into_iter().flatten().collect();
            let mut winner = None;
            let mut winner_best = best.clone();
            for &kid in &kids {
                if self.predicted_loser(level, param, domain[kid], fixed) {
                    continue;
                }
                let kid_best = self.node(level, param, domain[kid], fixed);
                self.learn(level, param, fixed, &kid_best, &winner_best);
                // Strictly better only: ties go to the current node, then to
                // the left child.
                if self.better(&kid_best, &winner_best) {
                    winner = Some(kid);
                    winner_best = kid_best;
                }
            }
            if winner.is_none() && !self.runner.cost(&best).1.is_finite() {
                // An unusable node (its trial failed) has no cost to stop on:
                // keep descending, towards the lower values.
                if let Some(&first) = kids.first() {
                    winner = Some(first);
                    winner_best = self.node(level, param, domain[first], fixed);
                }
            }
            let Some(kid) = winner else { return best };
            let values = self.runner.space.params()[param].values();
            self.path.push(Move {
                param,
                from: values[domain[cur]],
                to: values[domain[kid]],
                config: winner_best.clone(),
                refinement: false,
            });
            cur = kid;
            best = winner_best;
        }
    }

    /// The values of the parameters outside `level` (the context a value
    /// of its parameter is tried under).
    fn context(&self, level: usize, config: &Config) -> Vec<Value> {
        self.runner.space.priority()[..level]
            .iter()
            .map(|&p| config.0[p])
            .collect()
    }

    /// Pruning: whether the child `index` of `param` lost by more than the
    /// margin under two contexts other than this one and never did
    /// better, in which case it is recorded as skipped instead of run. A
    /// child whose cost is already known costs nothing and is never
    /// skipped.
    fn predicted_loser(
        &mut self,
        level: usize,
        param: usize,
        index: usize,
        fixed: &Config,
    ) -> bool {
        if self.runner.cut_factor().is_none() {
            return false;
        }
        let space = self.runner.space;
        let value = space.params()[param].values()[index];
        let mut probe = fixed.clone();
        probe.0[param] = value;
        let innermost = level + 1 == space.params().len();
        if innermost && self.runner.known(&probe) {
            return false;
        }
        let here = self.context(level, &probe);
        let Some(s) = self.standings.get(&(param, value)) else {
            return false;
        };
        let others = s.lost_under.iter().filter(|c| **c != here).count();
        if s.held || others < 2 {
            return false;
        }
        let reason = format!(
            "{}={value} lost by more than the pruning margin under {others} other contexts",
            space.params()[param].name()
        );
        self.runner.skip(&probe, reason);
        true
    }

    /// Pruning: records how the child tried in `fixed` (its value of
    /// `param` and its context), whose best configuration is `kid`, did
    /// against `rival`, the best it was compared with.
    fn learn(&mut self, level: usize, param: usize, fixed: &Config, kid: &Config, rival: &Config) {
        let Some(factor) = self.runner.cut_factor() else {
            return;
        };
        let (_, k) = self.runner.cost(kid);
        let (_, r) = self.runner.cost(rival);
        if !k.is_finite() || !r.is_finite() {
            return;
        }
        let context = self.context(level, fixed);
        let s = self.standings.entry((param, fixed.0[param])).or_default();
        if k > r * factor {
            if !s.lost_under.contains(&context) {
                s.lost_under.push(context);
            }
        } else {
            s.held = true;
        }
    }

    /// Domain indices of `param` with a feasible completion over the
    /// higher-priority parameters, given the lower-priority ones in `fixed`.
    fn feasible_values(&self, level: usize, param: usize, fixed: &Config) -> Vec<usize> {
        let space = self.runner.space;
        let inner: Vec<usize> = space.priority()[level + 1..].to_vec();
        let mut probe = fixed.clone();
        (0..space.params()[param].values().len())
            .filter(|&i| {
                probe.0[param] = space.params()[param].values()[i];
                self.any_feasible(&inner, &mut probe)
            })
            .collect()
    }

    fn any_feasible(&self, inner: &[usize], probe: &mut Config) -> bool {
        let Some((&p, rest)) = inner.split_first() else {
            return self.runner.feasible(probe);
        };
        let values = self.runner.space.params()[p].values();
        let saved = probe.0[p];
        let found = values.iter().any(|v| {
            probe.0[p] = *v;
            self.any_feasible(rest, probe)
        });
        probe.0[p] = saved;
        found
    }

    /// The value of one node: a trial at the innermost tree, else the best
    /// of the higher-priority search below it.
    fn node(&mut self, level: usize, param: usize, index: usize, fixed: &mut Config) -> Config {
        fixed.0[param] = self.runner.space.params()[param].values()[index];
        if level + 1 == self.runner.space.params().len() {
            self.runner.cost(fixed).0
        } else {
            self.level(level + 1, fixed)
        }
    }

    /// Coordinate moves to sorted-order neighbours, innermost parameter
    /// first, while any improves.
    fn refine(&mut self, mut best: Config) -> Config {
        let space = self.runner.space;
        let order: Vec<usize> = space.priority().iter().rev().copied().collect();
        let mut level_of = vec![0; space.params().len()];
        for (level, &p) in space.priority().iter().enumerate() {
            level_of[p] = level;
        }
        let mut improved = true;
        while improved {
            improved = false;
            for &p in &order {
                loop {
                    let values = space.params()[p].values();
                    let Some(i) = values.iter().position(|v| *v == best.0[p]) else {
                        break;
                    };
                    let mut moved = None;
                    for j in [i.checked_sub(1), Some(i + 1).filter(|&j| j < values.len())]
                        .into_iter()
                        .flatten()
                    {
                        let mut c = best.clone();
                        c.0[p] = values[j];
                        // A neighbour already measured costs nothing.
                        if !self.runner.known(&c) && self.predicted_loser(level_of[p], p, j, &best)
                        {
                            continue;
                        }
                        let c = self.runner.cost(&c).0;
                        let current = moved.as_ref().map_or(&best, |(_, m)| m);
                        if self.better(&c, &current.clone()) {
                            moved = Some((j, c));
                        }
                    }
                    let Some((j, c)) = moved else { break };
                    self.path.push(Move {
                        param: p,
                        from: best.0[p],
                        to: values[j],
                        config: c.clone(),
                        refinement: true,
                    });
                    best = c;
                    improved = true;
                }
            }
        }
        best
    }
}
