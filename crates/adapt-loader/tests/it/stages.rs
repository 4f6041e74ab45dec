//! Stage timing: where an epoch's time went adds up, whatever the workers.

use crate::util::Synthetic;
use adapt_dataset::stage::Stage;
use adapt_loader::{Loader, LoaderConfig, LoaderKnobs};
use std::sync::Arc;
use std::time::Duration;

fn run(workers: usize, timing: bool) -> Option<adapt_loader::StageStats> {
    let ds = Synthetic {
        every_sample: Some(Duration::from_millis(2)),
        ..Synthetic::new(48)
    };
    let config = LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: workers,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 8,
        stage_timing: timing,
        ..LoaderConfig::default()
    };
    let mut loader = Loader::new(Arc::new(ds), config).unwrap();
    let mut epoch = loader.epoch(0).unwrap();
    for b in epoch.by_ref() {
        b.unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    epoch.stats()
}

#[test]
fn an_epochs_stages_add_up_on_any_worker_count() {
    for workers in [0, 1, 3] {
        let s = run(workers, true).unwrap();
        assert_eq!(s.num_workers, workers);
        assert_eq!(s.workers.len(), workers.max(1));
        let samples: u64 = s.workers.iter().map(|w| w.samples).sum();
        let batches: u64 = s.workers.iter().map(|w| w.batches).sum();
        assert_eq!((samples, batches), (48, 6), "{workers} workers");
        // 48 samples of at least 2 ms each were read.
        assert!(s.busy_seconds() >= 0.096, "{workers} workers: {s:?}");
        assert!(s.stage(Stage::Read) >= 0.5 * s.busy_seconds(), "{s:?}");
        let staged: f64 = s.stage_seconds.iter().sum();
        assert!((staged - s.busy_seconds()).abs() < 1e-6 * s.busy_seconds().max(1.0) + 1e-9);
        assert!(
            s.seconds >= s.busy_seconds() / workers.max(1) as f64 * 0.99,
            "{s:?}"
        );
        assert!(s.wait_seconds <= s.seconds);
        if workers == 0 {
            // Without workers the consumer builds every batch: its wait.
            assert!(s.wait_seconds >= 0.096, "{s:?}");
        }
    }
}

#[test]
fn stage_timing_off_records_nothing() {
    assert!(run(2, false).is_none());
}
