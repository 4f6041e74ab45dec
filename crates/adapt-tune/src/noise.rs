//! The trial-to-trial noise: measured on a few probes before a search, it
//! sets the noise policy's threshold and the "cheapest within noise" margin.

use crate::options::Progress;
use crate::report::Noise;
use crate::{Budget, KnobSpace, LoaderKnobs, Machine, TuneError};
use adapt_search::AvlOptions;

/// The configurations the noise is measured on: the recommended one (where
/// most runs start) and, when it differs, the busiest worker count of the
/// space at PyTorch's default prefetch. On a machine with few cores the
/// configurations near the optimum run more threads than there are cores,
/// and those trials scatter more than a one-worker trial does: a threshold
/// measured on the recommended configuration alone was 3.5–8.5% at batch
/// 128 on 2 cores while 3–4-worker configurations differed by 20% from one
/// measurement to the next.
pub(crate) fn noise_probes_for(
    machine: &Machine,
    space: &KnobSpace,
    budget: &Budget,
) -> Vec<LoaderKnobs> {
    let recommended = crate::recommended_knobs(machine);
    let busiest = LoaderKnobs {
        num_workers: space.max_workers(),
        ..recommended
    };
    let mut probes = vec![recommended];
    if busiest != recommended && budget.check(&busiest).is_ok() {
        probes.push(busiest);
    }
    probes
}

/// Measures each probe `repeats` times, round by round (a slow drift of
/// the machine touches every probe alike): the spread of identical trials
/// is the noise any comparison must beat. Returns one `Noise` per probe
/// that ran; a probe that fails is left out.
pub(crate) fn measure_noise(
    measure: &mut dyn FnMut(&LoaderKnobs) -> Result<f64, TuneError>,
    probes: &[LoaderKnobs],
    repeats: usize,
    progress: Progress<'_>,
    label: &str,
) -> Vec<Noise> {
    if repeats < 2 {
        return Vec::new();
    }
    let mut seconds: Vec<Option<Vec<f64>>> = vec![Some(Vec::with_capacity(repeats)); probes.len()];
    for i in 0..repeats {
        for (k, times) in probes.iter().zip(seconds.iter_mut()) {
            let Some(v) = times else { continue };
            progress(&format!(
                "{label}: measuring the noise, {k}, trial {}/{repeats}",
                i + 1
            ));
            match measure(k) {
                Ok(s) => v.push(s),
                // A probe may not run at all (a command that fails with
                // workers): it is left out; with none left the noise stays
                // unmeasured and the policy keeps its fixed threshold. The
                // search reports failures.
                Err(e) => {
                    progress(&format!("{label}: noise not measured on {k}: {e}"));
                    *times = None;
                }
            }
        }
    }
    probes
        .iter()
        .zip(seconds)
        .filter_map(|(k, v)| v.map(|v| spread_of(*k, v)))
        .collect()
}

fn spread_of(config: LoaderKnobs, seconds: Vec<f64>) -> Noise {
    let (median, relative_spread) = median_and_spread(&seconds);
    Noise {
        config,
        seconds,
        median,
        relative_spread,
    }
}

/// The median of identical trials' `seconds` (at least one) and their
/// relative spread, (slowest − fastest) / median. From five trials on, the
/// fastest and slowest are left out: one trial disturbed by something else
/// on the machine should not set the threshold for the whole search.
pub(crate) fn median_and_spread(seconds: &[f64]) -> (f64, f64) {
    let mut sorted = seconds.to_vec();
    sorted.sort_by(f64::total_cmp);
    let Some(&median) = sorted.get(sorted.len() / 2) else {
        return (f64::INFINITY, 0.0);
    };
    let (lo, hi) = if sorted.len() >= 5 {
        (sorted[1], sorted[sorted.len() - 2])
    } else {
        (sorted[0], sorted[sorted.len() - 1])
    };
    (median, (hi - lo) / median.max(1e-12))
}

/// The probes' trials as measurements a search starts from: they ran the
/// search's own trial on the same objective.
pub(crate) fn priors(space: &KnobSpace, probes: &[Noise]) -> Vec<adapt_search::Prior> {
    probes
        .iter()
        .map(|n| adapt_search::Prior {
            config: space.config(&n.config),
            costs: n.seconds.clone(),
        })
        .collect()
}

/// The noisiest probe's measurement: the one that sets the threshold.
pub(crate) fn noisiest(probes: &[Noise]) -> Option<Noise> {
    probes
        .iter()
        .max_by(|a, b| a.relative_spread.total_cmp(&b.relative_spread))
        .cloned()
}

/// The AVL options with the noise policy's threshold set from a measured
/// relative spread (none measured, or the race off: as given).
pub(crate) fn measured_avl(avl: AvlOptions, spread: Option<f64>) -> AvlOptions {
    let mut avl = avl;
    if let Some(s) = spread
        && avl.noise.threshold > 0.0
    {
        avl.noise.threshold = threshold_from_spread(s);
    }
    avl
}

/// The race's threshold for a relative spread of identical trials: the
/// spread itself, at least 1% (two trials never tell apart less) and at
/// most 50%. The live tuner and the replay of recorded grids both use it.
pub fn threshold_from_spread(spread: f64) -> f64 {
    spread.clamp(0.01, 0.5)
}

#[cfg(test)]
mod tests {
    use super::{measure_noise, noise_probes_for, noisiest};
    use crate::{Budget, KnobSpace, LoaderKnobs, Machine, TuneError};

    #[test]
    fn noise_is_measured_round_by_round_and_a_failing_probe_is_left_out() {
        let one = LoaderKnobs {
            num_workers: 1,
            ..LoaderKnobs::DEFAULT
        };
        let four = LoaderKnobs {
            num_workers: 4,
            ..LoaderKnobs::DEFAULT
        };
        let mut order = Vec::new();
        let mut measure = |k: &LoaderKnobs| -> Result<f64, TuneError> {
            order.push(k.num_workers);
            Ok(if k.num_workers == 1 {
                1.0
            } else {
                [1.0, 1.5, 1.2][order.len() / 2 - 1]
            })
        };
        let probes = measure_noise(&mut measure, &[one, four], 3, &|_| {}, "t");
        assert_eq!(order, [1, 4, 1, 4, 1, 4], "interleaved");
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[0].relative_spread, 0.0);
        assert!((probes[1].relative_spread - 0.5 / 1.2).abs() < 1e-12);
        assert_eq!(noisiest(&probes).map(|n| n.config), Some(four));
        // A probe that fails is dropped from then on; the others stay.
        let mut calls = 0;
        let mut failing = |k: &LoaderKnobs| -> Result<f64, TuneError> {
            calls += 1;
            if k.num_workers == 4 {
                Err(TuneError::InvalidOption("no workers here".into()))
            } else {
                Ok(1.0)
            }
        };
        let probes = measure_noise(&mut failing, &[one, four], 3, &|_| {}, "t");
        assert!(measure_noise(&mut failing, &[one], 1, &|_| {}, "t").is_empty());
        assert_eq!(
            calls, 4,
            "the failed probe ran once, one repeat is no measurement"
        );
        assert_eq!(probes.len(), 1);
        assert_eq!(probes[0].config, one);
    }

    #[test]
    fn the_busiest_probe_uses_every_worker_the_space_allows_within_the_budget() {
        let machine = Machine {
            cores: 2,
            ..Machine::detect()
        };
        let space = KnobSpace::for_machine(&machine);
        let roomy = Budget {
            bytes: u64::MAX,
            batch_bytes: 1,
        };
        let probes = noise_probes_for(&machine, &space, &roomy);
        assert_eq!(probes[0], crate::recommended_knobs(&machine));
        assert_eq!(probes.len(), 2);
        assert_eq!(probes[1].num_workers, 4);
        assert_eq!(probes[1].prefetch_factor, Some(2));
        // 4 workers x 2 batches + 1 do not fit in 4 batches' bytes.
        let tight = Budget {
            bytes: 4,
            batch_bytes: 1,
        };
        assert_eq!(noise_probes_for(&machine, &space, &tight).len(), 1);
    }
}
