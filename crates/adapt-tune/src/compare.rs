//! The final comparison (every contender measured again, interleaved,
//! medians: the paper's Table 1) and the cheapest configuration within the
//! noise.

use crate::options::Progress;
use crate::report::TraceEntry;
use crate::{ConfigTime, LoaderKnobs, TuneError};

/// The configurations the final comparison measures.
pub(crate) struct Contenders {
    /// PyTorch's default.
    pub default: LoaderKnobs,
    /// The usual recommendation for this machine.
    pub recommended: LoaderKnobs,
    /// The tuned configuration.
    pub adapt: LoaderKnobs,
    /// The grid's best.
    pub optimal: Option<LoaderKnobs>,
    /// The other AVL descent's pick (`both`).
    pub other: Option<LoaderKnobs>,
    /// The cheapest within the noise.
    pub cheapest: Option<LoaderKnobs>,
}

/// Their medians.
pub(crate) struct Compared {
    pub default: ConfigTime,
    pub recommended: ConfigTime,
    pub adapt: ConfigTime,
    pub optimal: Option<ConfigTime>,
    pub other: Option<ConfigTime>,
    pub cheapest: Option<ConfigTime>,
    /// Contenders that failed (they count as infinitely slow).
    pub failures: Vec<String>,
}

impl Contenders {
    /// Measures every contender `repeats` times, round by round, and keeps
    /// each one's median. A contender that fails (the recommended values may
    /// not run at all) is reported with an infinite time, not fatal.
    pub(crate) fn compare(
        &self,
        repeats: usize,
        measure: &mut dyn FnMut(&LoaderKnobs) -> Result<f64, TuneError>,
        label: &str,
        progress: Progress<'_>,
    ) -> Compared {
        let fixed = [self.default, self.recommended, self.adapt];
        let optional = [self.optimal, self.other, self.cheapest];
        let all: Vec<LoaderKnobs> = fixed
            .into_iter()
            .chain(optional.into_iter().flatten())
            .collect();
        let mut times: Vec<Vec<f64>> = vec![Vec::new(); all.len()];
        let mut failures = Vec::new();
        for rep in 0..repeats {
            for (k, t) in all.iter().zip(times.iter_mut()) {
                progress(&format!(
                    "{label} final comparison {}/{repeats}: {k}",
                    rep + 1
                ));
                t.push(measure(k).unwrap_or_else(|e| {
                    failures.push(format!("{k} failed in the final comparison: {e}"));
                    f64::INFINITY
                }));
            }
        }
        failures.dedup();
        let secs: Vec<f64> = times.iter_mut().map(|v| median(v)).collect();
        let ct = |i: usize| ConfigTime {
            config: all[i],
            seconds: secs[i],
        };
        // The optional contenders follow the three fixed ones, in order.
        let mut at = fixed.len();
        let mut slot = |k: Option<LoaderKnobs>| {
            k.map(|_| {
                at += 1;
                ct(at - 1)
            })
        };
        Compared {
            default: ct(0),
            recommended: ct(1),
            adapt: ct(2),
            optimal: slot(self.optimal),
            other: slot(self.other),
            cheapest: slot(self.cheapest),
            failures,
        }
    }
}

/// The median of `v` (infinite when empty).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::INFINITY)
}

/// The cheapest configuration among the search's measurements whose time
/// (median over its repeats) is within `noise` (relative) of the best:
/// fewest worker threads, then fewest batches in memory, then without
/// pinned memory, then without persistent workers.
pub(crate) fn cheapest_within(trace: &[TraceEntry], noise: f64) -> Option<LoaderKnobs> {
    let mut by_config: Vec<(LoaderKnobs, Vec<f64>)> = Vec::new();
    for t in trace {
        let Some(s) = t.seconds else { continue };
        match by_config.iter_mut().find(|(k, _)| *k == t.config) {
            Some((_, v)) => v.push(s),
            None => by_config.push((t.config, vec![s])),
        }
    }
    let medians: Vec<(LoaderKnobs, f64)> = by_config
        .into_iter()
        .map(|(k, mut v)| (k, median(&mut v)))
        .collect();
    let best = medians.iter().map(|m| m.1).min_by(f64::total_cmp)?;
    medians
        .into_iter()
        .filter(|(_, s)| *s <= best * (1.0 + noise))
        .map(|(k, _)| k)
        .min_by_key(|k| {
            (
                k.num_workers,
                k.batches_in_memory(),
                k.pin_memory,
                k.persistent_workers,
            )
        })
}

#[cfg(test)]
mod tests {
    use super::cheapest_within;
    use crate::LoaderKnobs;
    use crate::report::TraceEntry;

    fn entry(w: usize, p: usize, s: f64) -> TraceEntry {
        TraceEntry {
            strategy: "avl".into(),
            config: LoaderKnobs {
                num_workers: w,
                prefetch_factor: Some(p),
                pin_memory: false,
                persistent_workers: w > 0,
            },
            seconds: Some(s),
            note: None,
            repeat: 1,
        }
    }

    #[test]
    fn the_cheapest_within_the_noise_wins() {
        let trace = [
            entry(4, 8, 1.00),
            entry(2, 2, 1.03),
            entry(1, 2, 1.30),
            entry(2, 8, 1.02),
        ];
        // Within 5%: 4/8, 2/2, 2/8 → two workers, fewer batches in memory.
        let c = cheapest_within(&trace, 0.05).unwrap_or(LoaderKnobs::DEFAULT);
        assert_eq!((c.num_workers, c.prefetch_factor), (2, Some(2)));
        // Within 1%: only the fastest.
        let c = cheapest_within(&trace, 0.01).unwrap_or(LoaderKnobs::DEFAULT);
        assert_eq!(c.num_workers, 4);
        // Repeats count by their median; failed trials not at all.
        let mut t = trace.to_vec();
        t.push(entry(1, 2, 0.99));
        t.push(entry(1, 2, 2.0));
        t.push(TraceEntry {
            seconds: None,
            ..entry(0, 2, 0.0)
        });
        let c = cheapest_within(&t, 0.05).unwrap_or(LoaderKnobs::DEFAULT);
        assert_eq!(c.num_workers, 2);
        assert!(cheapest_within(&[], 0.05).is_none());
    }
}
