//! Property tests over random configurations.

use crate::util::{SHAPE, Synthetic, loader, run_epoch};
use adapt_dataset::Dataset;
use adapt_loader::{Distributed, LoaderConfig, LoaderKnobs, epoch_order};
use proptest::prelude::*;
use std::sync::Arc;

fn arb_config() -> impl Strategy<Value = (usize, LoaderConfig)> {
    (
        1usize..60,
        1usize..10,
        any::<bool>(),
        any::<bool>(),
        any::<u64>(),
        0usize..5,
        0usize..4,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(len, bs, shuffle, drop_last, seed, workers, p, pin, persist)| {
                let config = LoaderConfig {
                    knobs: LoaderKnobs {
                        num_workers: workers,
                        prefetch_factor: (workers > 0).then_some(1 << p),
                        pin_memory: pin,
                        persistent_workers: persist && workers > 0,
                    },
                    batch_size: bs,
                    shuffle,
                    drop_last,
                    seed,
                    ..LoaderConfig::default()
                };
                (len, config)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn each_index_once_per_epoch_and_same_as_inline((len, config) in arb_config(), epoch in 0u64..3) {
        let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(len));
        let mut l = loader(Arc::clone(&ds), config.clone());
        let got = run_epoch(&mut l, epoch);
        let mut seen: Vec<usize> = got.0.iter().flat_map(|b| b.2.clone()).collect();
        let expected_len = if config.drop_last { len / config.batch_size * config.batch_size } else { len };
        prop_assert_eq!(seen.len(), expected_len);
        for b in &got.0 {
            prop_assert!(b.2.len() == config.batch_size || (!config.drop_last && b.2.len() < config.batch_size));
            prop_assert_eq!(b.0.len(), b.2.len() * SHAPE.len() * 4, "f32 bytes");
        }
        seen.sort_unstable();
        seen.dedup();
        prop_assert_eq!(seen.len(), expected_len, "an index came twice");
        // Bounded memory: buffers ever allocated ≤ in-flight bound + the consumer's one.
        prop_assert!(l.buffers_allocated() <= config.max_in_flight() + 1);
        let inline = LoaderConfig {
            knobs: LoaderKnobs { num_workers: 0, prefetch_factor: None, persistent_workers: false, ..LoaderKnobs::DEFAULT },
            ..config
        };
        prop_assert!(run_epoch(&mut loader(ds, inline), epoch) == got);
    }

    #[test]
    fn distributed_ranks_together_cover_the_epoch(len in 1usize..80, world in 1usize..6, shuffle: bool, drop_last: bool, seed: u64) {
        let base = LoaderConfig { shuffle, drop_last, seed, ..LoaderConfig::default() };
        let mut all = Vec::new();
        let mut sizes = Vec::new();
        for rank in 0..world {
            let c = LoaderConfig { distributed: Some(Distributed { rank, world_size: world }), ..base.clone() };
            let part = epoch_order(&c, len, 1);
            sizes.push(part.len());
            all.extend(part);
        }
        prop_assert!(sizes.iter().all(|&s| s == sizes[0]), "equal share per rank: {:?}", sizes);
        let mut distinct = all.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if drop_last {
            prop_assert_eq!(all.len(), len / world * world);
            prop_assert_eq!(distinct.len(), all.len());
        } else {
            prop_assert_eq!(distinct.len(), len, "padding repeats, never loses");
            prop_assert_eq!(all.len(), len.div_ceil(world) * world);
        }
    }
}
