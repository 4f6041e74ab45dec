//! With noise injected, re-measuring close calls finds the true optimum more
//! often than trusting single measurements. Fixed seeds: deterministic.

use crate::{Analytic, one_d};
use adapt_search::{AvlOptions, Config, NoisePolicy, TrialError, avl_search};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn hits(options: &AvlOptions) -> (usize, usize) {
    let space = one_d(1, 15);
    let mut found = 0;
    let mut trials = 0;
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        // True cost 1 + 0.03·|x − 6|: neighbours differ by 3%, the noise is ±6%.
        let f = |c: &Config| {
            Ok((1.0 + 0.03 * (c.int(0) - 6).abs() as f64) * rng.random_range(0.94..1.06))
        };
        let r = avl_search(&space, &mut Analytic::new(f), options);
        found += usize::from(r.best.unwrap().int(0) == 6);
        trials += r.trials;
    }
    (found, trials / 300)
}

#[test]
fn noise_policy_picks_the_true_optimum_more_often() {
    let plain = AvlOptions {
        refine: true,
        noise: NoisePolicy::OFF,
        prune: false,
    };
    let noisy = AvlOptions {
        refine: true,
        noise: NoisePolicy {
            threshold: 0.08,
            max_repeats: 7,
            candidates: 4,
        },
        prune: false,
    };
    let (a, ta) = hits(&plain);
    let (b, tb) = hits(&noisy);
    println!("true optimum found: plain {a}/300 ({ta} trials), noise policy {b}/300 ({tb} trials)");
    assert!(b > a + 30, "noise policy {b} vs plain {a}");
}

#[test]
fn the_race_is_bounded_and_only_re_measures_near_ties() {
    // A bowl over 1..15 with its minimum at 6, a flat shelf of near-ties
    // around it and ±1% noise: the race re-measures at most `candidates`
    // configurations, each up to `max_repeats`, and none outside the shelf.
    let space = one_d(1, 15);
    let policy = NoisePolicy {
        threshold: 0.05,
        max_repeats: 4,
        candidates: 3,
    };
    let mut raced_at_all = 0;
    for seed in 0..50u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let f = |c: &Config| {
            let x = c.int(0);
            let base = if (5..=7).contains(&x) {
                1.0 + 0.01 * (x - 6).abs() as f64
            } else {
                1.5 + 0.1 * (x - 6).abs() as f64
            };
            Ok(base * rng.random_range(0.99..1.01))
        };
        let refined = AvlOptions {
            refine: true,
            noise: NoisePolicy::OFF,
            prune: false,
        };
        let plain = avl_search(&space, &mut Analytic::new(f), &refined);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let f = |c: &Config| {
            let x = c.int(0);
            let base = if (5..=7).contains(&x) {
                1.0 + 0.01 * (x - 6).abs() as f64
            } else {
                1.5 + 0.1 * (x - 6).abs() as f64
            };
            Ok(base * rng.random_range(0.99..1.01))
        };
        let raced = avl_search(
            &space,
            &mut Analytic::new(f),
            &AvlOptions {
                refine: true,
                noise: policy,
                prune: false,
            },
        );
        let repeats: Vec<&adapt_search::Trial> =
            raced.trace.iter().filter(|t| t.repeat > 1).collect();
        assert!(
            repeats.len() <= policy.candidates * (policy.max_repeats - 1),
            "seed {seed}: {} repeats",
            repeats.len()
        );
        assert!(
            repeats.iter().all(|t| (5..=7).contains(&t.config.int(0))),
            "seed {seed}: a far configuration was raced"
        );
        raced_at_all += usize::from(!repeats.is_empty());
        // The race only adds trials after the same descent and refinement.
        assert_eq!(raced.trials - repeats.len(), plain.trials, "seed {seed}");
        let pick = raced.best.unwrap().int(0);
        assert!((5..=7).contains(&pick), "seed {seed}: picked {pick}");
    }
    assert!(
        raced_at_all > 25,
        "the shelf was raced in {raced_at_all}/50 searches"
    );
}

/// A 1-D cost where 6 measures 1.00 every time, 5 measures `first` once
/// and `later` after, and the rest lie well behind.
fn five_then(first: f64, later: f64) -> impl FnMut(&Config) -> Result<f64, TrialError> {
    let mut fives = 0;
    move |c: &Config| {
        let x = c.int(0);
        Ok(match x {
            5 => {
                fives += 1;
                if fives == 1 { first } else { later }
            }
            6 => 1.00,
            _ => 1.2 + 0.05 * (x - 5).abs() as f64,
        })
    }
}

/// The plain descent with a race of 2 candidates, 10% apart, measured
/// `max_repeats` times.
fn plain_raced(max_repeats: usize) -> AvlOptions {
    AvlOptions {
        refine: false,
        noise: NoisePolicy {
            threshold: 0.1,
            max_repeats,
            candidates: 2,
        },
        prune: false,
    }
}

/// Only the race's own measurements vote: the first ones selected the field
/// and are biased low. Here 5 measures 0.90 once by luck, then 1.06; 6
/// measures 1.00 every time. Counting the lucky measurement, 5 would win on
/// a median of 0.98.
#[test]
fn the_lucky_first_measurement_does_not_vote_in_the_race() {
    let space = one_d(1, 15);
    let f = five_then(0.90, 1.06);
    let r = avl_search(&space, &mut Analytic::new(f), &plain_raced(2));
    assert!(
        r.trace
            .iter()
            .any(|t| t.config.int(0) == 5 && t.repeat == 2)
    );
    assert!(
        r.trace
            .iter()
            .any(|t| t.config.int(0) == 6 && t.repeat == 2)
    );
    assert_eq!(r.best.unwrap().int(0), 6);
}

/// A field that a round leaves with one candidate is not raced further: it
/// has no one left to lose to. Here 5 measures 1.02 first, then 1.5 and is
/// dropped after the first round; 6 is measured once more, not three times.
#[test]
fn the_race_stops_when_one_candidate_is_left() {
    let space = one_d(1, 15);
    let f = five_then(1.02, 1.5);
    let r = avl_search(&space, &mut Analytic::new(f), &plain_raced(4));
    let race: Vec<(i64, usize)> = r
        .trace
        .iter()
        .filter(|t| t.repeat > 1)
        .map(|t| (t.config.int(0), t.repeat))
        .collect();
    assert_eq!(race.len(), 2, "{race:?}");
    assert!(race.contains(&(5, 2)) && race.contains(&(6, 2)), "{race:?}");
    assert_eq!(r.best.unwrap().int(0), 6);
}
