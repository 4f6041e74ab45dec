//! The order of an epoch: sequential or shuffled from (seed, epoch), then
//! split across ranks as PyTorch's `DistributedSampler` does.

use crate::LoaderConfig;

/// The dataset indices this rank visits in `epoch`, in order. A pure
/// function of the configuration's seed, shuffle, drop_last and rank/world
/// size, the dataset length and the epoch: no other knob enters.
pub fn epoch_order(config: &LoaderConfig, len: usize, epoch: u64) -> Vec<usize> {
    order_after(config, len, epoch, &[])
}

/// This rank's order in `epoch` once the earlier `segments` of the epoch
/// (deliveries on other world sizes, see [`crate::LoaderState`]) are taken
/// out of the global order.
pub(crate) fn order_after(
    config: &LoaderConfig,
    len: usize,
    epoch: u64,
    segments: &[crate::Segment],
) -> Vec<usize> {
    if let Some(s) = &config.sampler {
        return s.order(len, epoch);
    }
    let global: Vec<usize> = if config.shuffle {
        adapt_dataset::permutation(len, config.seed, epoch)
    } else {
        (0..len).collect()
    };
    let rest = crate::resume::rest(&global, segments, config.batch_size);
    let (rank, world) = config
        .distributed
        .map_or((0, 1), |d| (d.rank, d.world_size));
    crate::resume::share(rest, world, rank, config.drop_last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Distributed;

    fn cfg(shuffle: bool, drop_last: bool, d: Option<(usize, usize)>) -> LoaderConfig {
        LoaderConfig {
            shuffle,
            drop_last,
            seed: 3,
            distributed: d.map(|(rank, world_size)| Distributed { rank, world_size }),
            ..LoaderConfig::default()
        }
    }

    #[test]
    fn sequential_and_shuffled() {
        assert_eq!(epoch_order(&cfg(false, false, None), 5, 0), [0, 1, 2, 3, 4]);
        let a = epoch_order(&cfg(true, false, None), 100, 0);
        let b = epoch_order(&cfg(true, false, None), 100, 1);
        assert_ne!(a, b, "each epoch reshuffles");
        assert_eq!(
            a,
            epoch_order(&cfg(true, false, None), 100, 0),
            "and is reproducible"
        );
        let mut s = a.clone();
        s.sort_unstable();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn distributed_pads_from_the_start_like_pytorch() {
        // 5 samples, 3 ranks: padded to 6 with index 0, ranks take 0::3, 1::3, 2::3.
        let ranks: Vec<Vec<usize>> = (0..3)
            .map(|r| epoch_order(&cfg(false, false, Some((r, 3))), 5, 0))
            .collect();
        assert_eq!(ranks, [vec![0, 3], vec![1, 4], vec![2, 0]]);
        // drop_last trims to 3 instead.
        let ranks: Vec<Vec<usize>> = (0..3)
            .map(|r| epoch_order(&cfg(false, true, Some((r, 3))), 5, 0))
            .collect();
        assert_eq!(ranks, [vec![0], vec![1], vec![2]]);
        // More ranks than samples: padding repeats the list.
        assert_eq!(epoch_order(&cfg(false, false, Some((3, 4))), 2, 0), [1]);
    }
}
