//! The random policies by what they draw: which operations RandAugment and
//! TrivialAugmentWide apply and how often, AutoAugment's outcomes against
//! its table, RandomErasing's probability and boxes.

use adapt_dataset::Sample;
use adapt_transform::{
    AutoAugment, AutoAugmentPolicy, EraseValue, Interpolation, Op, RandAugment, RandomErasing,
    SampleRng, Scratch, Transform, TrivialAugmentWide,
};

const N: u32 = 32;

const RAND_OPS: &[Op] = Op::RAND_AUGMENT;

fn image() -> Vec<u8> {
    let mut r = SampleRng::new(1, 2, 3);
    (0..N * N * 3)
        .map(|i| ((i * 7) % 200) as u8 + r.below(50) as u8)
        .collect()
}

fn applied(op: Op, m: f64, input: &[u8]) -> Vec<u8> {
    let mut s = Sample::hwc(input.to_vec(), N, N, 3, 0).expect("sample");
    op.apply(
        m,
        Interpolation::Nearest,
        [0; 3],
        &mut s,
        &mut Scratch::default(),
    )
    .expect("op");
    s.pixels
}

fn run(t: &dyn Transform, key: u64, input: &[u8]) -> Vec<u8> {
    let mut s = Sample::hwc(input.to_vec(), N, N, 3, 0).expect("sample");
    t.apply(&mut s, &mut Scratch::with_rng(SampleRng::new(5, 0, key)))
        .expect("apply");
    s.pixels
}

/// Within 5 standard deviations of a binomial count.
fn near(count: u32, trials: u32, p: f64) -> bool {
    let mean = f64::from(trials) * p;
    (f64::from(count) - mean).abs() <= 5.0 * (mean * (1.0 - p)).sqrt() + 1.0
}

#[test]
fn rand_augment_draws_each_of_its_14_ops_equally_with_both_signs() {
    let input = image();
    let t = RandAugment::new(1, 9).expect("policy");
    // Each op at bin 9 with each sign, as the outcome it would give:
    // (op, negative, pixels), all distinct on this image.
    let mut outcomes = Vec::new();
    for (i, op) in RAND_OPS.iter().enumerate() {
        match op.level(false, 31, 9, N, N) {
            Some((m, true)) => {
                outcomes.push((i, false, applied(*op, m, &input)));
                outcomes.push((i, true, applied(*op, -m, &input)));
            }
            Some((m, false)) => outcomes.push((i, false, applied(*op, m, &input))),
            None => outcomes.push((i, false, applied(*op, 0.0, &input))),
        }
    }
    for (a, x) in outcomes.iter().enumerate() {
        for y in &outcomes[a + 1..] {
            assert_ne!(
                x.2, y.2,
                "{:?} and {:?} look alike",
                RAND_OPS[x.0], RAND_OPS[y.0]
            );
        }
    }
    let trials = 2800;
    let mut counts = [0u32; 14];
    let mut negative = 0;
    for key in 0..u64::from(trials) {
        let out = run(&t, key, &input);
        let Some(hit) = outcomes.iter().find(|o| o.2 == out) else {
            panic!("sample {key}: not any op at magnitude 9");
        };
        counts[hit.0] += 1;
        negative += u32::from(hit.1);
    }
    for (op, &c) in RAND_OPS.iter().zip(&counts) {
        assert!(near(c, trials, 1.0 / 14.0), "{op:?}: {c} of {trials}");
    }
    // Nine ops are signed: half their draws are negative.
    assert!(
        near(negative, trials, 9.0 / 14.0 / 2.0),
        "{negative} negative"
    );
}

#[test]
fn rand_augment_applies_num_ops_operations() {
    let input = image();
    let two = RandAugment::new(2, 9).expect("policy");
    let one = RandAugment::new(1, 9).expect("policy");
    let unchanged = |t: &RandAugment| (0..1000).filter(|&k| run(t, k, &input) == input).count();
    // Identity is drawn 1 in 14 times: once with one op, squared with two.
    let (u1, u2) = (unchanged(&one) as u32, unchanged(&two) as u32);
    assert!(near(u1, 1000, 1.0 / 14.0), "{u1}");
    assert!(u2 < u1 / 3 + 5, "{u2} of 1000 unchanged with two ops");
    assert!(
        RandAugment::new(2, 31).is_err(),
        "magnitude must be below the bins"
    );
}

#[test]
fn trivial_augment_draws_ops_equally_at_uniform_bins() {
    let input = image();
    let t = TrivialAugmentWide::default();
    // Rotate's outcomes by bin and sign (bin 0 is no rotation).
    let rotations: Vec<Vec<u8>> = (1..31)
        .flat_map(|b| {
            let (m, _) = Op::Rotate.level(true, 31, b, N, N).expect("rotate level");
            [
                applied(Op::Rotate, m, &input),
                applied(Op::Rotate, -m, &input),
            ]
        })
        .collect();
    assert!(rotations.iter().all(|r| *r != input));
    let trials = 3000;
    let mut rotated = 0;
    for key in 0..u64::from(trials) {
        let out = run(&t, key, &input);
        if rotations.contains(&out) {
            rotated += 1;
        }
    }
    // Rotate is 1 of 14 ops, and 30 of its 31 bins rotate.
    assert!(
        near(rotated, trials, 30.0 / 31.0 / 14.0),
        "{rotated} rotated of {trials}"
    );
}

/// The chance that an AutoAugment sub-policy leaves the image as it was,
/// from the table: each step applies with its probability, and some
/// applications change nothing (Color at bin 0).
fn unchanged_chance(policy: AutoAugmentPolicy, input: &[u8]) -> f64 {
    let subs = policy.sub_policies();
    let mut total = 0.0;
    for sub in subs {
        for mask in 0..4u8 {
            let mut px = input.to_vec();
            let mut p = 1.0;
            for (i, &(op, prob, bin)) in sub.iter().enumerate() {
                if mask & (1 << i) != 0 {
                    p *= prob;
                    let m = bin
                        .and_then(|b| op.level(false, 10, b, N, N))
                        .map_or(0.0, |l| l.0);
                    px = applied(op, m, &px);
                } else {
                    p *= 1.0 - prob;
                }
            }
            if px == input {
                total += p;
            }
        }
    }
    total / subs.len() as f64
}

#[test]
fn auto_augment_leaves_images_unchanged_as_often_as_its_table_says() {
    let input = image();
    for policy in [
        AutoAugmentPolicy::ImageNet,
        AutoAugmentPolicy::Cifar10,
        AutoAugmentPolicy::Svhn,
    ] {
        let t = AutoAugment {
            policy,
            interpolation: Interpolation::Nearest,
            fill: [0; 3],
        };
        let expected = unchanged_chance(policy, &input);
        let trials = 2000;
        let unchanged = (0..u64::from(trials))
            .filter(|&k| run(&t, k, &input) == input)
            .count();
        assert!(
            near(unchanged as u32, trials, expected),
            "{policy:?}: {unchanged} of {trials} unchanged, table says {expected:.3}"
        );
    }
}

#[test]
fn random_erasing_erases_with_probability_p_a_box_within_scale() {
    let input = vec![100u8; (N * N * 3) as usize];
    let t = RandomErasing {
        p: 0.25,
        scale: (0.02, 0.33),
        ratio: (0.3, 3.3),
        value: EraseValue::Constant(vec![7, 8, 9]),
    }
    .checked()
    .expect("erasing");
    let trials = 2000;
    let mut erased = 0;
    for key in 0..u64::from(trials) {
        let out = run(&t, key, &input);
        let px: Vec<&[u8]> = out.chunks(3).collect();
        let n = px.iter().filter(|p| **p == [7, 8, 9]).count();
        assert!(px.iter().all(|p| *p == [7, 8, 9] || *p == [100, 100, 100]));
        if n > 0 {
            erased += 1;
            let frac = n as f64 / f64::from(N * N);
            assert!((0.0..0.4).contains(&frac), "box of {frac} of the image");
        }
    }
    assert!(near(erased, trials, 0.25), "{erased}");
}
