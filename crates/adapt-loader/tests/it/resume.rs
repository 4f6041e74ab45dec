//! Checkpoints: exact resume on the same world size for every knob setting,
//! elastic resume on another, refusals.

use crate::util::{Synthetic, loader, run_epoch};
use adapt_dataset::Dataset;
use adapt_loader::{Distributed, LoaderConfig, LoaderError, LoaderKnobs, LoaderState};
use adapt_transform::{Compose, RandomCrop, RandomFlip};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;

fn random_pipeline() -> Arc<Compose> {
    let mut crop = RandomCrop::new(2, 2).unwrap();
    crop.padding = [1; 4];
    Arc::new(
        Compose::new()
            .then(crop)
            .then(RandomFlip::horizontal(0.5).unwrap()),
    )
}

/// Takes `n` batches of `epoch`, returns their indices and the checkpoint.
fn take(
    ds: &Arc<dyn Dataset>,
    config: LoaderConfig,
    epoch: u64,
    n: usize,
) -> (Vec<Vec<usize>>, LoaderState) {
    let mut l = loader(Arc::clone(ds), config);
    let mut e = l.epoch(epoch).unwrap();
    let mut got = Vec::new();
    for _ in 0..n {
        match e.next() {
            Some(b) => got.push(b.unwrap().indices().to_vec()),
            None => break,
        }
    }
    (got, e.state())
}

fn rest_of(ds: &Arc<dyn Dataset>, config: LoaderConfig, state: &LoaderState) -> Vec<Vec<usize>> {
    let mut l = loader(Arc::clone(ds), config);
    l.resume(state)
        .unwrap()
        .map(|b| b.unwrap().indices().to_vec())
        .collect()
}

#[test]
fn resuming_yields_the_rest_byte_for_byte_for_every_knob_setting() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(53));
    let base = LoaderConfig {
        batch_size: 4,
        shuffle: true,
        seed: 3,
        transforms: Some(random_pipeline()),
        identity: "synthetic|random".into(),
        ..LoaderConfig::default()
    };
    let mut reference = loader(Arc::clone(&ds), base.clone());
    let want = run_epoch(&mut reference, 2);
    for stop in [0, 1, 6, 13, 14] {
        let (_, state) = take(
            &ds,
            LoaderConfig {
                knobs: LoaderKnobs {
                    num_workers: 2,
                    ..LoaderKnobs::DEFAULT
                },
                ..base.clone()
            },
            2,
            stop,
        );
        let state = LoaderState::from_text(&state.to_text()).unwrap();
        for (workers, prefetch, persist) in
            [(0, None, false), (1, Some(1), false), (3, Some(4), true)]
        {
            let mut l = loader(
                Arc::clone(&ds),
                LoaderConfig {
                    knobs: LoaderKnobs {
                        num_workers: workers,
                        prefetch_factor: prefetch,
                        persistent_workers: persist,
                        ..LoaderKnobs::DEFAULT
                    },
                    ..base.clone()
                },
            );
            let got: Vec<_> = l
                .resume(&state)
                .unwrap()
                .map(|b| {
                    let b = b.unwrap();
                    (
                        b.bytes().to_vec(),
                        b.labels().to_vec(),
                        b.indices().to_vec(),
                    )
                })
                .collect();
            assert_eq!(
                got,
                want.0[stop.min(want.0.len())..],
                "stop {stop}, w{workers}"
            );
        }
    }
}

#[test]
fn a_checkpoint_of_another_seed_pipeline_or_dataset_is_refused() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(20));
    let base = LoaderConfig {
        batch_size: 3,
        identity: "a".into(),
        ..LoaderConfig::default()
    };
    let (_, state) = take(&ds, base.clone(), 0, 2);
    for other in [
        LoaderConfig {
            seed: 1,
            ..base.clone()
        },
        LoaderConfig {
            identity: "b".into(),
            ..base.clone()
        },
        LoaderConfig {
            batch_size: 4,
            ..base.clone()
        },
        LoaderConfig {
            shuffle: true,
            ..base.clone()
        },
    ] {
        let mut l = loader(Arc::clone(&ds), other);
        assert!(matches!(
            l.resume(&state),
            Err(LoaderError::CheckpointMismatch { .. })
        ));
    }
    let smaller: Arc<dyn Dataset> = Arc::new(Synthetic::new(19));
    let mut l = loader(smaller, base);
    assert!(matches!(
        l.resume(&state),
        Err(LoaderError::CheckpointMismatch { .. })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    /// Interrupted on W ranks after b batches, resumed on W′: every sample
    /// of the epoch is delivered, none twice but padding's repeats (at most
    /// W−1 + W′−1); with drop_last none twice and at most that many left out.
    #[test]
    fn elastic_resume_delivers_the_epoch_once(
        len in 10usize..120, batch in 1usize..7, w1 in 1usize..5, w2 in 1usize..6,
        frac in 0.0f64..1.0, shuffle in any::<bool>(), drop_last in any::<bool>(), w3 in 1usize..4,
    ) {
        let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(len));
        let config = |rank, world| LoaderConfig {
            batch_size: batch,
            shuffle,
            drop_last,
            seed: 9,
            distributed: Some(Distributed { rank, world_size: world }),
            ..LoaderConfig::default()
        };
        let per_rank = adapt_loader::Loader::new(Arc::clone(&ds), config(0, w1)).unwrap().batches_per_epoch();
        let stop = ((per_rank as f64) * frac) as usize;
        let mut count: HashMap<usize, usize> = HashMap::new();
        let mut state = None;
        for r in 0..w1 {
            let (got, s) = take(&ds, config(r, w1), 5, stop);
            for i in got.into_iter().flatten() { *count.entry(i).or_default() += 1; }
            state = Some(s);
        }
        let state = state.unwrap();
        // Resume on w2 ranks; then checkpoint again after one batch and
        // finish on w3 ranks (two segments).
        let mut state2 = None;
        for r in 0..w2 {
            let (got, s) = {
                let mut l = loader(Arc::clone(&ds), config(r, w2));
                let mut e = l.resume(&state).unwrap();
                let got: Vec<usize> = e.next().map(|b| b.unwrap().indices().to_vec()).unwrap_or_default();
                (got, e.state())
            };
            for i in got { *count.entry(i).or_default() += 1; }
            state2 = Some(s);
        }
        let state2 = state2.unwrap();
        for r in 0..w3 {
            for i in rest_of(&ds, config(r, w3), &state2).into_iter().flatten() {
                *count.entry(i).or_default() += 1;
            }
        }
        let slack = (w1 - 1) + (w2 - 1) + (w3 - 1);
        let delivered: usize = count.values().sum();
        if drop_last {
            prop_assert!(count.values().all(|&c| c == 1), "a sample twice with drop_last");
            prop_assert!(count.len() + slack + (batch - 1) * (w1 + w2 + w3) >= len, "{} of {len} delivered", count.len());
        } else {
            prop_assert_eq!(count.len(), len, "every sample delivered");
            prop_assert!(delivered - len <= slack, "{} repeats > {slack}", delivered - len);
        }
    }
}

#[test]
fn same_world_resume_equals_the_uninterrupted_ranks() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(37));
    for world in [1, 2, 3] {
        for rank in 0..world {
            let config = LoaderConfig {
                batch_size: 3,
                shuffle: true,
                distributed: Some(Distributed {
                    rank,
                    world_size: world,
                }),
                ..LoaderConfig::default()
            };
            let (all, _) = take(&ds, config.clone(), 1, usize::MAX);
            let (head, state) = take(&ds, config.clone(), 1, 2);
            let tail = rest_of(&ds, config, &state);
            assert_eq!([head, tail].concat(), all, "rank {rank} of {world}");
        }
    }
}

/// The index plan (what a loader over a Python dataset batches by) is the
/// loader's own: the same batches, the same checkpoint after any batch, the
/// same resumed rest on the same and on another world size.
#[test]
fn the_index_plan_batches_checkpoints_and_resumes_as_the_loader() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(37));
    let cfg = |rank, world_size| LoaderConfig {
        batch_size: 4,
        shuffle: true,
        seed: 9,
        distributed: Some(Distributed { rank, world_size }),
        identity: "synthetic".into(),
        ..LoaderConfig::default()
    };
    for world in [1, 2, 3] {
        for rank in 0..world {
            let plan = adapt_loader::Plan::new(cfg(rank, world), ds.len()).unwrap();
            let e = plan.epoch(5);
            let (all, _) = take(&ds, cfg(rank, world), 5, usize::MAX);
            let planned: Vec<Vec<usize>> = (0..e.batches()).map(|k| e.batch(k).to_vec()).collect();
            assert_eq!(planned, all, "world {world}, rank {rank}");
            for stop in [0, 2, e.batches()] {
                let (_, state) = take(&ds, cfg(rank, world), 5, stop);
                assert_eq!(e.state_after(stop), state, "state after {stop}");
                // Elastic: the rest on 2 ranks, from the plan and the loader.
                for r2 in 0..2 {
                    let p2 = adapt_loader::Plan::new(cfg(r2, 2), ds.len()).unwrap();
                    let rest = p2.resume(&state).unwrap();
                    let planned: Vec<Vec<usize>> = (rest.skip..rest.batches())
                        .map(|k| rest.batch(k).to_vec())
                        .collect();
                    assert_eq!(planned, rest_of(&ds, cfg(r2, 2), &state));
                }
            }
        }
    }
}

/// A batch as the tests compare it: its bytes, labels and indices.
type Whole = (Vec<u8>, Vec<i64>, Vec<usize>);

/// Runs `epoch` (or resumes `start`) in segments: each segment a fresh
/// loader of `config(segment)` that takes `cuts[segment]` batches and
/// checkpoints through the text format, the last one running to the end.
fn in_segments(
    ds: &Arc<dyn Dataset>,
    config: &dyn Fn(usize) -> LoaderConfig,
    epoch: u64,
    start: Option<LoaderState>,
    cuts: &[usize],
) -> Vec<Whole> {
    let whole = |b: adapt_loader::Batch| -> Whole {
        (
            b.bytes().to_vec(),
            b.labels().to_vec(),
            b.indices().to_vec(),
        )
    };
    let mut state = start;
    let mut got = Vec::new();
    for segment in 0..=cuts.len() {
        let mut l = loader(Arc::clone(ds), config(segment));
        let mut e = match &state {
            Some(s) => l.resume(s).unwrap(),
            None => l.epoch(epoch).unwrap(),
        };
        let Some(&cut) = cuts.get(segment) else {
            got.extend(e.map(|b| whole(b.unwrap())));
            break;
        };
        for _ in 0..cut {
            match e.next() {
                Some(b) => got.push(whole(b.unwrap())),
                None => break,
            }
        }
        state = Some(LoaderState::from_text(&e.state().to_text()).unwrap());
    }
    got
}

/// The resume bug most reported in HF datasets, torchdata and verl shows
/// only on the second resume. Resume → run → checkpoint → resume → run →
/// checkpoint → resume gives exactly the uninterrupted order, batch bytes
/// included, at any worker count per segment: on the same world size the
/// order of the uninterrupted epoch; after a move to another world size
/// the order one resume there gives, and a move on to a third world size
/// still delivers every sample once.
#[test]
fn a_second_and_third_resume_in_a_row_give_the_uninterrupted_order() {
    let ds: Arc<dyn Dataset> = Arc::new(Synthetic::new(61));
    let cfg = |rank, world_size, workers, drop_last| LoaderConfig {
        knobs: LoaderKnobs {
            num_workers: workers,
            ..LoaderKnobs::DEFAULT
        },
        batch_size: 3,
        shuffle: true,
        drop_last,
        seed: 4,
        transforms: Some(random_pipeline()),
        identity: "synthetic|random".into(),
        distributed: Some(Distributed { rank, world_size }),
        ..LoaderConfig::default()
    };
    let workers = [2, 0, 3, 1];
    for drop_last in [false, true] {
        // The same world size throughout.
        for world in [1, 2, 3] {
            for rank in 0..world {
                let want = in_segments(&ds, &|_| cfg(rank, world, 0, drop_last), 7, None, &[]);
                for cuts in [[2, 1, 3], [0, 0, 0], [1, 4, 100]] {
                    let got = in_segments(
                        &ds,
                        &|s| cfg(rank, world, workers[s], drop_last),
                        7,
                        None,
                        &cuts,
                    );
                    assert_eq!(got, want, "rank {rank} of {world}, cuts {cuts:?}");
                }
            }
        }
        // Interrupted on 2 ranks, resumed on 3, resumed again on 3 twice:
        // each rank's batches are those of one resume on 3.
        let (_, moved) = take(&ds, cfg(1, 2, 0, drop_last), 7, 2);
        let mut count: HashMap<usize, usize> = HashMap::new();
        for rank in 0..2 {
            for i in take(&ds, cfg(rank, 2, 0, drop_last), 7, 2)
                .0
                .into_iter()
                .flatten()
            {
                *count.entry(i).or_default() += 1;
            }
        }
        let mut thirds = Vec::new();
        for rank in 0..3 {
            let once = in_segments(
                &ds,
                &|_| cfg(rank, 3, 0, drop_last),
                7,
                Some(moved.clone()),
                &[],
            );
            let thrice = in_segments(
                &ds,
                &|s| cfg(rank, 3, workers[s], drop_last),
                7,
                Some(moved.clone()),
                &[1, 2],
            );
            assert_eq!(
                thrice, once,
                "rank {rank} of 3 after 2, drop_last {drop_last}"
            );
            // The state after two batches on 3 ranks, for the move to 2.
            let mut l = loader(Arc::clone(&ds), cfg(rank, 3, 0, drop_last));
            let mut e = l.resume(&moved).unwrap();
            for _ in 0..2 {
                if let Some(b) = e.next() {
                    for &i in b.unwrap().indices() {
                        *count.entry(i).or_default() += 1;
                    }
                }
            }
            thirds.push(e.state());
        }
        // Then on to 1 rank: every sample of the epoch once (padding's
        // repeats aside, at most W−1 per world size).
        for i in rest_of(&ds, cfg(0, 1, 1, drop_last), &thirds[2])
            .into_iter()
            .flatten()
        {
            *count.entry(i).or_default() += 1;
        }
        let delivered: usize = count.values().sum();
        if drop_last {
            assert!(count.values().all(|&c| c == 1), "a sample twice");
            assert!(count.len() + 1 + 2 + 2 * 6 >= 61, "{} of 61", count.len());
        } else {
            assert_eq!(count.len(), 61, "every sample delivered");
            assert!(delivered - 61 <= 3, "{} repeats", delivered - 61);
        }
    }
}
