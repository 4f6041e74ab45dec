//! With noise injected, re-measuring close calls finds the true optimum more
//! often than trusting single measurements. Fixed seeds: deterministic.

use crate::{Analytic, one_d};
use adapt_search::{AvlOptions, Config, NoisePolicy, avl_search};
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
    };
    let noisy = AvlOptions {
        refine: true,
        noise: NoisePolicy {
            threshold: 0.08,
            max_repeats: 7,
        },
    };
    let (a, ta) = hits(&plain);
    let (b, tb) = hits(&noisy);
    println!("true optimum found: plain {a}/300 ({ta} trials), noise policy {b}/300 ({tb} trials)");
    assert!(b > a + 30, "noise policy {b} vs plain {a}");
}
