//! Property tests of the searches on analytic objectives.

use crate::Analytic;
use adapt_search::{AvlOptions, Config, Param, Space, Tree, avl_search, grid_search};
use proptest::prelude::*;

/// A separable, strictly unimodal cost: Σ wᵢ · |index(xᵢ) − oᵢ|^pᵢ.
fn separable(space: &Space, opt: &[usize], w: &[f64], p: &[i32]) -> impl Fn(&Config) -> f64 {
    let domains: Vec<Vec<_>> = space.params().iter().map(|q| q.values().to_vec()).collect();
    let (opt, w, p) = (opt.to_vec(), w.to_vec(), p.to_vec());
    move |c: &Config| {
        (0..domains.len())
            .map(|i| {
                let idx = domains[i].iter().position(|v| *v == c.0[i]).unwrap_or(0);
                w[i] * (idx as f64 - opt[i] as f64).abs().powi(p[i])
            })
            .sum()
    }
}

fn arb_problem() -> impl Strategy<Value = (Vec<usize>, Vec<usize>, Vec<f64>, Vec<i32>)> {
    prop::collection::vec(1usize..20, 1..4).prop_flat_map(|sizes| {
        let k = sizes.len();
        let opts = sizes.iter().map(|&n| 0..n).collect::<Vec<_>>();
        (
            Just(sizes),
            opts,
            prop::collection::vec(0.1f64..10.0, k),
            prop::collection::vec(1i32..3, k),
        )
    })
}

fn space_of(sizes: &[usize]) -> Space {
    Space::new(
        sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| Param::range(&format!("p{i}"), 0, n as i64 - 1, 1).unwrap())
            .collect(),
    )
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn refined_search_reaches_the_grid_optimum_on_separable_unimodal_costs((sizes, opt, w, p) in arb_problem()) {
        let space = space_of(&sizes);
        let f = separable(&space, &opt, &w, &p);
        let grid = grid_search(&space, &mut Analytic::new(|c: &Config| Ok(f(c))));
        let r = avl_search(&space, &mut Analytic::new(|c: &Config| Ok(f(c))), &AvlOptions { refine: true, ..AvlOptions::plain() });
        prop_assert_eq!(r.cost, grid.best().unwrap().1);
        prop_assert_eq!(grid.rank_of(r.best.as_ref().unwrap()), Some(1));
    }

    #[test]
    fn plain_trials_within_the_product_bound_and_never_repeated((sizes, _opt, _w, _p) in arb_problem(), seed: u64) {
        // Any cost at all (random per configuration) keeps the bound.
        let space = space_of(&sizes);
        let f = |c: &Config| {
            let h = c.0.iter().fold(seed, |h, v| (h ^ (v.to_string().len() as u64 + format!("{v}").parse::<u64>().unwrap_or(7))).wrapping_mul(0x100000001b3));
            Ok((h % 1000) as f64)
        };
        let r = avl_search(&space, &mut Analytic::new(f), &AvlOptions::plain());
        let bound: usize = sizes.iter().map(|&n| 1 + 2 * Tree::new(n).height()).product();
        prop_assert!(r.trials <= bound, "{} > {}", r.trials, bound);
        prop_assert_eq!(r.trials, r.distinct, "memoised: no configuration measured twice");
    }
}
