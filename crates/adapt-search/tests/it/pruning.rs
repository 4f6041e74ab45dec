//! Pruning: trials cut short once clearly losing, values skipped after
//! clearly losing under two other contexts; on costs where that cannot
//! change the outcome, the same pick for fewer trials.

use adapt_search::{
    AvlOptions, Config, Measured, NoisePolicy, Objective, Outcome, Param, Prior, Space, TrialError,
    Value, avl_search, avl_search_from,
};
use proptest::prelude::*;

/// An objective that stops a trial past its bound and gives its exact cost
/// as the estimate (as a timed trial's extrapolation would, ideally).
struct Censoring<F> {
    f: F,
    runs: usize,
    cut: usize,
}

impl<F: FnMut(&Config) -> f64> Objective for Censoring<F> {
    fn measure(&mut self, c: &Config) -> Result<f64, TrialError> {
        self.runs += 1;
        Ok((self.f)(c))
    }
    fn measure_until(&mut self, c: &Config, bound: f64) -> Result<Measured, TrialError> {
        let cost = self.measure(c)?;
        if cost > bound {
            self.cut += 1;
            return Ok(Measured::CutShort(cost));
        }
        Ok(Measured::Whole(cost))
    }
}

fn tuner(threshold: f64, prune: bool) -> AvlOptions {
    AvlOptions {
        refine: true,
        noise: NoisePolicy {
            threshold,
            max_repeats: 3,
            candidates: 3,
        },
        prune,
    }
}

/// A configuration of `loader_like`'s space.
fn loader_config(workers: i64, prefetch: i64, persistent: bool) -> Config {
    Config(vec![
        Value::Int(workers),
        Value::Int(prefetch),
        Value::Bool(persistent),
    ])
}

/// Workers innermost, as the tuner orders them; prefetch and a boolean
/// outside.
fn loader_like() -> Space {
    Space::new(vec![
        Param::ints("num_workers", 0..=4).unwrap(),
        Param::powers_of_two("prefetch_factor", 1, 64).unwrap(),
        Param::boolean("persistent_workers"),
    ])
    .unwrap()
    .with_priority(&["persistent_workers", "prefetch_factor", "num_workers"])
    .unwrap()
}

/// One worker is three times slower than two whatever else is set; the
/// optimum is 2 workers, prefetch 4, persistent.
fn one_worker_slow(c: &Config) -> f64 {
    let w = [4.0, 3.0, 1.0, 1.1, 1.2][c.int(0) as usize];
    let p = 1.0 + 0.02 * (c.int(1) as f64).log2().sub_abs(2.0);
    let persistent = if c.bool(2) { 1.0 } else { 1.05 };
    w * p * persistent
}

#[test]
fn a_value_that_keeps_losing_is_skipped_and_clear_losers_are_cut_short() {
    let space = loader_like();
    let f = one_worker_slow;
    let mut full = Censoring { f, runs: 0, cut: 0 };
    let unpruned = avl_search(&space, &mut full, &tuner(0.05, false));
    let mut obj = Censoring { f, runs: 0, cut: 0 };
    let pruned = avl_search(&space, &mut obj, &tuner(0.05, true));
    assert_eq!(pruned.best, unpruned.best);
    assert_eq!(pruned.best.as_ref().unwrap().int(0), 2);
    let skipped: Vec<&str> = pruned
        .trace
        .iter()
        .filter_map(|t| match &t.outcome {
            Outcome::Skipped { reason } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    // One worker (3× slower) and four (1.2×, past the 1.1 margin) lose by
    // more than the margin wherever they are tried: after two contexts,
    // they are not tried again.
    assert!(
        skipped.iter().any(|r| r.starts_with("num_workers=1 lost")),
        "{skipped:?}"
    );
    assert!(
        skipped
            .iter()
            .all(|r| r.starts_with("num_workers=1 lost") || r.starts_with("num_workers=4 lost")),
        "{skipped:?}"
    );
    let cut = pruned
        .trace
        .iter()
        .filter(|t| matches!(t.outcome, Outcome::CutShort { estimate, bound } if estimate >= bound))
        .count();
    assert!(
        cut > 0 && cut == obj.cut,
        "{cut} cut, {} by the objective",
        obj.cut
    );
    assert!(
        obj.runs < full.runs,
        "{} trials pruned, {} not",
        obj.runs,
        full.runs
    );
    assert_eq!(pruned.trials, obj.runs, "skipped entries are not trials");
    // Without a threshold there is no margin: nothing is pruned.
    let mut obj = Censoring { f, runs: 0, cut: 0 };
    let off = avl_search(&space, &mut obj, &tuner(0.0, true));
    assert_eq!(obj.cut, 0);
    assert!(off.trace.iter().all(|t| t.outcome.ran()));
}

#[test]
fn a_cost_known_before_the_search_cuts_from_the_first_trial() {
    let space = loader_like();
    // The root (2 workers, prefetch 8) is twice what the tuner's probes
    // measured before the search (4 workers): cut; without that knowledge,
    // run whole.
    let f = |c: &Config| if c.int(0) == 4 { 1.0 } else { 2.0 };
    let probe = loader_config(4, 2, false);
    let before = [Prior {
        config: probe.clone(),
        costs: vec![1.0; 5],
    }];
    let mut obj = Censoring { f, runs: 0, cut: 0 };
    let r = avl_search_from(&space, &mut obj, &tuner(0.05, true), &before);
    assert!(
        matches!(r.trace[0].outcome, Outcome::CutShort { bound, .. } if (bound - 1.1).abs() < 1e-9),
        "{:?}",
        r.trace[0]
    );
    assert_eq!(r.best.unwrap().int(0), 4);
    let r = avl_search(
        &space,
        &mut Censoring { f, runs: 0, cut: 0 },
        &tuner(0.05, true),
    );
    assert!(matches!(r.trace[0].outcome, Outcome::Cost { .. }));
}

#[test]
fn configurations_measured_before_the_search_are_not_run_again() {
    let space = loader_like();
    let f = one_worker_slow;
    // Without a race or pruning the descent is deterministic: with the
    // optimum known before, it makes the same moves, one trial fewer.
    let plain = AvlOptions {
        refine: true,
        noise: NoisePolicy::OFF,
        prune: false,
    };
    let optimum = loader_config(2, 4, true);
    let alone = avl_search(&space, &mut Censoring { f, runs: 0, cut: 0 }, &plain);
    assert_eq!(alone.best.as_ref(), Some(&optimum));
    let before = [
        Prior {
            config: optimum.clone(),
            costs: vec![f(&optimum); 3],
        },
        // Non-finite costs are left out; none left, none known.
        Prior {
            config: loader_config(3, 4, true),
            costs: vec![f64::INFINITY],
        },
    ];
    let mut obj = Censoring { f, runs: 0, cut: 0 };
    let seeded = avl_search_from(&space, &mut obj, &plain, &before);
    assert_eq!(seeded.best.as_ref(), Some(&optimum));
    assert_eq!(seeded.path, alone.path);
    assert_eq!(seeded.trials, alone.trials - 1);
    assert!(seeded.trace.iter().all(|t| t.config != optimum));
    assert!(seeded.trace.iter().any(|t| t.config.int(0) == 3));
    // With the race, a known configuration is re-measured there as the
    // next of its measurements, and only those vote.
    let mut obj = Censoring { f, runs: 0, cut: 0 };
    let raced = avl_search_from(&space, &mut obj, &tuner(0.05, true), &before);
    assert_eq!(raced.best.as_ref(), Some(&optimum));
    let repeats: Vec<usize> = raced
        .trace
        .iter()
        .filter(|t| t.config == optimum)
        .map(|t| t.repeat)
        .collect();
    assert!(repeats.iter().all(|&r| r > 3), "{repeats:?}");
}

trait SubAbs {
    fn sub_abs(self, other: f64) -> f64;
}

impl SubAbs for f64 {
    fn sub_abs(self, other: f64) -> f64 {
        (self - other).abs()
    }
}

/// A product of one positive factor per parameter, each from a table.
fn product_cost(tables: Vec<Vec<f64>>) -> impl Fn(&Config) -> f64 + Copy {
    let tables: &'static [Vec<f64>] = Box::leak(tables.into_boxed_slice());
    move |c: &Config| {
        tables
            .iter()
            .enumerate()
            .map(|(i, t)| t[c.int(i) as usize])
            .product()
    }
}

fn arb_tables() -> impl Strategy<Value = Vec<Vec<f64>>> {
    prop::collection::vec(prop::collection::vec(1.0f64..4.0, 2..9), 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// On a cost that is a product of one factor per parameter, how one
    /// value compares with another does not depend on the other
    /// parameters: pruning then changes no decision, only the trials.
    #[test]
    fn pruning_keeps_the_pick_on_product_costs(tables in arb_tables(), threshold in 0.01f64..0.3) {
        let space = Space::new(
            tables
                .iter()
                .enumerate()
                .map(|(i, t)| Param::range(&format!("p{i}"), 0, t.len() as i64 - 1, 1).unwrap())
                .collect(),
        )
        .unwrap();
        let f = product_cost(tables);
        let mut full = Censoring { f, runs: 0, cut: 0 };
        let a = avl_search(&space, &mut full, &tuner(threshold, false));
        let mut pruned = Censoring { f, runs: 0, cut: 0 };
        let b = avl_search(&space, &mut pruned, &tuner(threshold, true));
        prop_assert_eq!(&a.best, &b.best);
        prop_assert_eq!(a.cost, b.cost);
        prop_assert!(pruned.runs <= full.runs, "{} > {}", pruned.runs, full.runs);
    }
}
