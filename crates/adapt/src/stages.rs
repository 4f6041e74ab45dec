//! Where an epoch's time went, as a person reads it: seconds per stage
//! named by the pipeline's own steps, the workers' busy share, the
//! consumer's wait, and a one-line verdict naming the bottleneck — what
//! `load --stages`, `DataLoader.stats()` and the tuning report show.

use adapt_dataset::stage::{MAX_STEPS, Stage};
use adapt_loader::StageStats;

/// Below this share of the epoch spent waiting, loading keeps up.
const KEEPS_UP: f64 = 0.05;

/// One epoch's stages, named.
#[derive(Clone, Debug, PartialEq)]
pub struct StageReport {
    /// The epoch's time, from its start to its last batch.
    pub seconds: f64,
    /// The loader's workers (0: built in the consumer's thread).
    pub num_workers: usize,
    /// Seconds per stage summed over the workers, in pipeline order:
    /// `read`, `decode`, each step by its text form, `collate`.
    pub stages: Vec<(String, f64)>,
    /// The workers' busy seconds summed.
    pub busy_seconds: f64,
    /// Busy seconds over what the workers had (workers × epoch).
    pub busy_share: f64,
    /// Seconds the consumer waited for its batches (with 0 workers:
    /// building them).
    pub wait_seconds: f64,
    /// The wait's share of the epoch.
    pub wait_share: f64,
    /// Each worker's busy seconds and samples.
    pub workers: Vec<(f64, u64)>,
    /// The bottleneck, in one line.
    pub verdict: String,
}

impl StageReport {
    /// The report of `stats`, whose steps are `steps` (the pipeline's
    /// steps the workers run, in order, by their text form), on a machine
    /// of `cores` cores.
    pub fn new(stats: &StageStats, steps: &[String], cores: usize) -> Self {
        let workers = stats
            .workers
            .iter()
            .map(|w| (w.busy_seconds, w.samples))
            .collect();
        Self::from_parts(
            named(stats, steps),
            stats.seconds,
            stats.num_workers,
            workers,
            stats.wait_seconds,
            cores,
        )
    }

    /// The report of stages measured elsewhere (the Python loader's own
    /// workers: `__getitem__`, adapt's steps, `collate_fn`): seconds per
    /// named stage, the epoch's seconds, the workers' (busy seconds,
    /// samples) — one entry for the consumer's thread with 0 workers —
    /// and the consumer's wait.
    pub fn from_parts(
        stages: Vec<(String, f64)>,
        seconds: f64,
        num_workers: usize,
        workers: Vec<(f64, u64)>,
        wait_seconds: f64,
        cores: usize,
    ) -> Self {
        let busy_seconds: f64 = workers.iter().map(|w| w.0).sum();
        let had = seconds * workers.len() as f64;
        let share = |x: f64, of: f64| if of > 0.0 { (x / of).min(1.0) } else { 0.0 };
        let mut report = Self {
            seconds,
            num_workers,
            stages,
            busy_seconds,
            busy_share: share(busy_seconds, had),
            wait_seconds,
            wait_share: share(wait_seconds, seconds),
            workers,
            verdict: String::new(),
        };
        report.verdict = verdict(&report, cores);
        report
    }

    /// The stage that took the most time, with its share of the busy time.
    pub fn top(&self) -> Option<(&str, f64)> {
        let total: f64 = self.stages.iter().map(|(_, s)| s).sum();
        self.stages
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|_| total > 0.0)
            .map(|(n, s)| (n.as_str(), s / total))
    }

    /// As the JSON object `load --stages` ends an epoch's line with.
    pub fn to_json(&self) -> serde_json::Value {
        let stages: serde_json::Map<String, serde_json::Value> = self
            .stages
            .iter()
            .map(|(n, s)| (n.clone(), (*s).into()))
            .collect();
        serde_json::json!({
            "seconds": stages,
            "busy_seconds": self.busy_seconds,
            "busy_share": self.busy_share,
            "wait_seconds": self.wait_seconds,
            "wait_share": self.wait_share,
            "epoch_seconds": self.seconds,
            "num_workers": self.num_workers,
            "workers": self.workers.iter()
                .map(|(busy, samples)| serde_json::json!({ "busy_seconds": busy, "samples": samples }))
                .collect::<Vec<_>>(),
            "verdict": self.verdict,
        })
    }
}

/// Stage seconds by name: read, decode, the steps (those past the last
/// slot counted in it), collate.
fn named(stats: &StageStats, steps: &[String]) -> Vec<(String, f64)> {
    let mut out = vec![
        ("read".to_owned(), stats.stage(Stage::Read)),
        ("decode".to_owned(), stats.stage(Stage::Decode)),
    ];
    for (k, name) in steps.iter().enumerate().take(MAX_STEPS) {
        let name = if k == MAX_STEPS - 1 && steps.len() > MAX_STEPS {
            format!("{name} and the {} steps after it", steps.len() - MAX_STEPS)
        } else {
            name.clone()
        };
        out.push((name, stats.stage(Stage::Step(k))));
    }
    out.push(("collate".to_owned(), stats.stage(Stage::Collate)));
    out
}

/// The one-line verdict: who the epoch waited on, and what would help.
fn verdict(r: &StageReport, cores: usize) -> String {
    let pct = |x: f64| format!("{:.0}%", x * 100.0);
    let (top, share) = r.top().unwrap_or(("nothing", 0.0));
    let top_part = format!("{top} {} of the loading time", pct(share));
    if r.num_workers == 0 {
        return format!(
            "no workers: the consumer spent {} of the epoch building its batches ({top_part}); \
             workers would take that off the training step, up to {cores} cores",
            pct(r.wait_share)
        );
    }
    if r.wait_share < KEEPS_UP {
        let spare = if r.busy_share < 0.5 && r.num_workers > 1 {
            "; fewer workers would do"
        } else {
            ""
        };
        return format!(
            "consumer-bound: the consumer waited {} of the epoch, workers busy {} — loading keeps up{spare}",
            pct(r.wait_share),
            pct(r.busy_share)
        );
    }
    let head = format!(
        "{top}-bound: workers busy {}, consumer waited {} of the epoch ({top_part})",
        pct(r.busy_share),
        pct(r.wait_share)
    );
    if r.busy_share < 0.8 {
        format!("{head}; the workers idle while the consumer waits: raise prefetch_factor")
    } else if r.num_workers < cores {
        format!("{head}; more workers would help up to {cores} cores")
    } else {
        format!("{head}; the workers fill all {cores} cores: make {top} cheaper")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use adapt_dataset::stage::SLOTS;
    use adapt_loader::WorkerStats;

    fn stats(workers: usize, busy: f64, wait: f64, decode: f64) -> StageStats {
        let mut stage_seconds = [0.0; SLOTS];
        stage_seconds[Stage::Read.slot()] = 0.1;
        stage_seconds[Stage::Decode.slot()] = decode;
        stage_seconds[Stage::Step(0).slot()] = 0.2;
        stage_seconds[SLOTS - 1] = 0.3;
        StageStats {
            seconds: 10.0,
            num_workers: workers,
            workers: (0..workers.max(1))
                .map(|_| WorkerStats {
                    busy_seconds: busy,
                    batches: 5,
                    samples: 40,
                })
                .collect(),
            stage_seconds,
            wait_seconds: wait,
        }
    }

    #[test]
    fn names_the_bottleneck_and_what_would_help() {
        let steps = ["random_resized_crop(224)".to_owned(), "hflip".to_owned()];
        let r = StageReport::new(&stats(2, 9.7, 3.1, 5.0), &steps, 4);
        assert_eq!(r.stages[2].0, "random_resized_crop(224)");
        assert_eq!(r.stages.len(), 5);
        assert!(
            r.verdict
                .starts_with("decode-bound: workers busy 97%, consumer waited 31%"),
            "{}",
            r.verdict
        );
        assert!(
            r.verdict.ends_with("more workers would help up to 4 cores"),
            "{}",
            r.verdict
        );
        let full = StageReport::new(&stats(2, 9.7, 3.1, 5.0), &steps, 2);
        assert!(
            full.verdict.ends_with("make decode cheaper"),
            "{}",
            full.verdict
        );
        let idle = StageReport::new(&stats(2, 2.0, 0.1, 5.0), &steps, 2);
        assert!(
            idle.verdict.starts_with("consumer-bound"),
            "{}",
            idle.verdict
        );
        assert!(
            idle.verdict.ends_with("fewer workers would do"),
            "{}",
            idle.verdict
        );
        let inline = StageReport::new(&stats(0, 8.0, 8.0, 0.0), &steps, 2);
        assert!(
            inline.verdict.starts_with("no workers"),
            "{}",
            inline.verdict
        );
        assert!(inline.verdict.contains("collate 50%"), "{}", inline.verdict);
        let json = r.to_json();
        assert_eq!(json["seconds"]["hflip"], 0.0);
        assert_eq!(json["seconds"]["decode"], 5.0);
    }

    #[test]
    fn steps_past_the_last_slot_are_counted_in_it() {
        let steps: Vec<String> = (0..MAX_STEPS + 3).map(|k| format!("s{k}")).collect();
        let r = StageReport::new(&stats(1, 1.0, 0.0, 0.0), &steps, 2);
        assert_eq!(r.stages.len(), 2 + MAX_STEPS + 1);
        assert_eq!(
            r.stages[1 + MAX_STEPS].0,
            format!("s{} and the 3 steps after it", MAX_STEPS - 1)
        );
    }
}
