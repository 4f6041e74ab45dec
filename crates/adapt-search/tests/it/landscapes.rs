//! Expected stops written down by hand, tree by tree.

use crate::{Analytic, one_d, paper_space};
use adapt_search::{AvlOptions, Config, Outcome, Param, Space, Value, avl_search, grid_search};

fn plain() -> AvlOptions {
    AvlOptions::plain()
}
fn refined() -> AvlOptions {
    AvlOptions {
        refine: true,
        ..AvlOptions::plain()
    }
}
fn best_x(space: &Space, f: impl FnMut(&Config) -> f64, o: &AvlOptions) -> (i64, usize) {
    let mut f = f;
    let mut obj = Analytic::new(|c: &Config| Ok(f(c)));
    let r = avl_search(space, &mut obj, o);
    assert_eq!(r.trials, obj.runs, "every run is in the trace count");
    (r.best.unwrap().int(0), r.trials)
}

#[test]
fn unimodal_min_at_7_stops_at_the_root_8() {
    // Root 8 costs 1; children 4 and 12 cost 3 and 5: the root wins.
    let (x, trials) = best_x(&one_d(1, 15), |c| (c.int(0) - 7).abs() as f64, &plain());
    assert_eq!((x, trials), (8, 3));
    // The refinement then tries 7 and 9 (7 wins), moves, tries 6 (worse; 8
    // is memoised) and stops: three extra trials.
    let (x, trials) = best_x(&one_d(1, 15), |c| (c.int(0) - 7).abs() as f64, &refined());
    assert_eq!((x, trials), (7, 6));
}

#[test]
fn min_at_3_descends_left_then_ties_stop_at_4() {
    // 8 (25) → children 4 (1), 12 (81): move to 4. Children 2 (1), 6 (9):
    // 2 ties with 4, and ties go to the current node, so the search stops at 4.
    let (x, trials) = best_x(
        &one_d(1, 15),
        |c| ((c.int(0) - 3) * (c.int(0) - 3)) as f64,
        &plain(),
    );
    assert_eq!((x, trials), (4, 5));
}

#[test]
fn min_at_14_is_found_by_the_descent() {
    // 8 (36) → 4 (100), 12 (4): to 12; 10 (16), 14 (0): to 14; 13 (1), 15 (1): stop at 14.
    let (x, trials) = best_x(
        &one_d(1, 15),
        |c| ((c.int(0) - 14) * (c.int(0) - 14)) as f64,
        &plain(),
    );
    assert_eq!((x, trials), (14, 7));
}

#[test]
fn a_local_optimum_holds_both_variants() {
    // Global minimum at 1 (cost 0); a local one at 8 (cost 1) whose
    // neighbours 7 and 9 and children 4 and 12 are all worse.
    let f = |c: &Config| {
        if c.int(0) == 1 {
            0.0
        } else {
            ((c.int(0) - 8).abs() + 1) as f64
        }
    };
    assert_eq!(best_x(&one_d(1, 15), f, &plain()).0, 8);
    assert_eq!(best_x(&one_d(1, 15), f, &refined()).0, 8);
    let grid = grid_search(&one_d(1, 15), &mut Analytic::new(|c: &Config| Ok(f(c))));
    assert_eq!(grid.best().unwrap().0.int(0), 1);
    assert_eq!(grid.rank_of(&Config(vec![Value::Int(8)])), Some(2));
}

#[test]
fn two_trees_nest_by_priority() {
    // x in 1..15 innermost, y in {1, 2, 4, 8} outermost; cost |x-7| + |y-2|.
    // y tree: root 4, children 2 and 8; 2 has child 1. Each y node runs the
    // x search (8, 4, 12 → stop at 8): y=4 → 1+2, y=2 → 1+0, y=8 → 1+6;
    // move to 2; child 1 → 1+1: stop. 4 y nodes × 3 x trials = 12 trials.
    let space = Space::new(vec![
        Param::range("x", 1, 15, 1).unwrap(),
        Param::ints("y", [1, 2, 4, 8]).unwrap(),
    ])
    .unwrap();
    let f = |c: &Config| Ok(((c.int(0) - 7).abs() + (c.int(1) - 2).abs()) as f64);
    let r = avl_search(&space, &mut Analytic::new(f), &plain());
    assert_eq!(
        r.best.clone().unwrap().0,
        vec![Value::Int(8), Value::Int(2)]
    );
    assert_eq!((r.trials, r.cost), (12, 1.0));
    // The path records the outer move 4 → 2.
    assert!(
        r.path
            .iter()
            .any(|s| s.param == 1 && s.from == Value::Int(4) && s.to == Value::Int(2))
    );
    let r = avl_search(&space, &mut Analytic::new(f), &refined());
    assert_eq!(
        (r.best.unwrap().0, r.cost),
        (vec![Value::Int(7), Value::Int(2)], 0.0)
    );
    assert!(r.refinement_trials >= 1);
}

#[test]
fn infeasible_and_failing_configurations_are_never_chosen_and_are_traced() {
    // The cheapest region (x ≤ 9) is infeasible or fails; the best usable x is 10.
    let space = one_d(1, 15);
    let mut obj = Analytic::new(|c: &Config| {
        if c.int(0) == 8 {
            Err("trial crashed".into())
        } else {
            Ok(c.int(0) as f64)
        }
    });
    obj.infeasible = Some(|c| c.int(0) < 8 || c.int(0) == 9);
    let r = avl_search(&space, &mut obj, &refined());
    let best = r.best.clone().unwrap().int(0);
    assert_eq!(best, 10);
    assert!(
        r.trace.iter().any(
            |t| matches!(&t.outcome, Outcome::Failed { message } if message == "trial crashed")
        )
    );
    assert!(
        r.trace
            .iter()
            .any(|t| matches!(t.outcome, Outcome::Infeasible { .. }))
    );
    // Infeasible configurations never reached the objective.
    assert_eq!(
        obj.runs,
        r.trace
            .iter()
            .filter(|t| !matches!(t.outcome, Outcome::Infeasible { .. }))
            .count()
    );
    let g = grid_search(&space, &mut obj);
    assert_eq!(g.best().unwrap().0.int(0), 10);
    assert!(g.ranked[14].1.is_infinite());
    // Everything infeasible: no choice at all.
    let mut none = Analytic::new(|_: &Config| Ok(1.0));
    none.infeasible = Some(|_| true);
    let r = avl_search(&space, &mut none, &plain());
    assert!(r.best.is_none() && none.runs == 0);
}

/// The paper's space: grid 1,584 configurations, AVL bound 13 × 9 × 5 × 5 =
/// 2,925; on a separable bowl the plain search runs 100 trials and the
/// refined one a few more (asserted below), more than 10× fewer than the grid.
#[test]
fn paper_space_avl_100_trials_vs_grid_1584() {
    let space = paper_space();
    assert_eq!(space.configurations().len(), 1584);
    let f = |c: &Config| {
        let w = (c.int(0) as f64 / 12.0).ln().abs();
        let p = (c.int(1) as f64 / 8.0).log2().abs();
        Ok(10.0
            + w
            + 0.5 * p
            + if c.bool(2) { 0.0 } else { 0.3 }
            + if c.bool(3) { 0.0 } else { 0.2 })
    };
    let plain_r = avl_search(&space, &mut Analytic::new(f), &plain());
    let refined_r = avl_search(&space, &mut Analytic::new(f), &refined());
    let grid = grid_search(&space, &mut Analytic::new(f));
    assert_eq!(plain_r.trials, 100);
    assert!(plain_r.trials <= 13 * 9 * 5 * 5);
    assert!(
        refined_r.trials < grid.trials / 10,
        "{} vs {}",
        refined_r.trials,
        grid.trials
    );
    assert_eq!(grid.rank_of(refined_r.best.as_ref().unwrap()), Some(1));
    // The tuner's default: refined, then the race of at most 3 near-ties
    // (within 5% here) to 3 measurements each: at most 6 trials more.
    let tuner = AvlOptions {
        refine: true,
        noise: adapt_search::NoisePolicy {
            threshold: 0.05,
            max_repeats: 3,
            candidates: 3,
        },
        prune: false,
    };
    let raced = avl_search(&space, &mut Analytic::new(f), &tuner);
    assert!(raced.trials <= refined_r.trials + 6, "{}", raced.trials);
    assert!(raced.trials < grid.trials / 10, "{}", raced.trials);
    assert_eq!(grid.rank_of(raced.best.as_ref().unwrap()), Some(1));
    println!(
        "paper space: grid {} trials; AVL plain {} (rank {:?}), refined {} (+{} refinement, rank 1), refined + race {}",
        grid.trials,
        plain_r.trials,
        grid.rank_of(plain_r.best.as_ref().unwrap()),
        refined_r.trials,
        refined_r.refinement_trials,
        raced.trials
    );
}

#[test]
fn canonical_configurations_are_measured_once() {
    // num_workers 0 makes prefetch meaningless: (0, p) is one configuration.
    let space = Space::new(vec![
        Param::ints("w", [0, 1, 2]).unwrap(),
        Param::powers_of_two("p", 1, 8).unwrap(),
    ])
    .unwrap()
    .with_canonical(|c| {
        if c.int(0) == 0 {
            c.0[1] = Value::Int(1);
        }
    });
    let mut obj = Analytic::new(|c: &Config| Ok((c.int(0) * 10 + c.int(1)) as f64));
    let g = grid_search(&space, &mut obj);
    assert_eq!((g.trials, obj.runs), (9, 9));
    let r = avl_search(
        &space,
        &mut obj,
        &AvlOptions {
            refine: true,
            ..AvlOptions::plain()
        },
    );
    assert_eq!(r.best.unwrap().0, vec![Value::Int(0), Value::Int(1)]);
    let mut seen: Vec<_> = r
        .trace
        .iter()
        .filter(|t| t.repeat == 1)
        .map(|t| t.config.clone())
        .collect();
    let n = seen.len();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), n, "no configuration measured twice");
}
