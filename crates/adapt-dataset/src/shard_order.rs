//! The shard-streaming order over any sharded dataset (a pack's shards,
//! WebDataset tars, Parquet row groups): whole shards in a seeded order,
//! dealt to ranks, read a few at once (interleaved), through a seeded
//! shuffle buffer.

use crate::Sampler;
use std::ops::Range;

/// Visits a sharded dataset shard by shard: the shard order is shuffled per
/// epoch from the seed, shards are dealt round-robin to ranks, and within a
/// rank's shards samples pass through a shuffle buffer of bounded size. A
/// pure function of (seed, epoch, rank, world size).
///
/// Ranks get whole shards, so with uneven shards their sample counts
/// differ; every rank's order is then padded to the largest rank's count
/// with its own first samples again (as PyTorch's `DistributedSampler` pads),
/// so every rank runs the same number of batches and none waits forever on
/// another in a collective. With one rank nothing is padded.
///
/// Shuffle quality: the buffer releases a random one of its `buffer`
/// samples per record read, so a batch holds records read recently. Read
/// one shard at a time (`interleave` 1, the plain order) those come from
/// one or two shards; with `interleave` k, each record is taken from one of
/// k open shards drawn at random (a shard done is replaced by the next), as
/// the 2026 fixes in HF datasets and LitData draw from several shards at
/// once, so a batch mixes about k shards at the same buffer size. Each
/// shard is still read in storage order. `docs/benchmarks.md` measures both
/// against a full shuffle.
#[derive(Clone, Debug)]
pub struct ShardOrder {
    shards: Vec<Range<usize>>,
    seed: u64,
    buffer: usize,
    interleave: usize,
    rank: usize,
    world_size: usize,
}

impl ShardOrder {
    /// Streams the samples of `shards` (index ranges, in storage order)
    /// with a shuffle buffer of `buffer` samples (≥ 1), one shard at a time.
    pub fn new(shards: Vec<Range<usize>>, seed: u64, buffer: usize) -> Self {
        Self {
            shards,
            seed,
            buffer: buffer.max(1),
            interleave: 1,
            rank: 0,
            world_size: 1,
        }
    }

    /// Reads `shards` (≥ 1) of this rank's shards at once, each record from
    /// one of them drawn at random (see the type's note).
    #[must_use]
    pub fn with_interleave(mut self, shards: usize) -> Self {
        self.interleave = shards.max(1);
        self
    }

    /// How many shards are read at once.
    pub fn interleave(&self) -> usize {
        self.interleave
    }

    /// This rank's share: shards `rank, rank + world_size, …` of each
    /// epoch's shuffled shard list.
    #[must_use]
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.world_size = world_size.max(1);
        self.rank = rank.min(self.world_size - 1);
        self
    }

    /// The shards (indices in storage order) `rank` streams in `epoch`.
    fn shards_of(&self, rank: usize, epoch: u64) -> Vec<usize> {
        crate::permutation(self.shards.len(), self.seed, epoch)
            .into_iter()
            .skip(rank)
            .step_by(self.world_size)
            .collect()
    }

    /// This rank's shards in the order `epoch` streams them.
    pub fn shard_order(&self, epoch: u64) -> Vec<usize> {
        self.shards_of(self.rank, epoch)
    }

    /// Dataset indices of this rank in `epoch`, in streaming order (padded
    /// to the largest rank's count, see the type's note).
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let mine = self.shard_order(epoch);
        let mut draw = Draw::new(
            self.seed ^ 0x5348_5244,
            epoch.wrapping_mul(1 << 20) ^ self.rank as u64,
        );
        // A buffer larger than the data holds all of it: never allocate
        // more than that, whatever was asked.
        let total = self.shards.iter().map(|r| r.end).max().unwrap_or(0);
        let mut buffer = Vec::with_capacity(self.buffer.min(total));
        let mut out = Vec::new();
        let mut next = mine.iter().map(|&s| self.shards[s].clone());
        let mut open: Vec<Range<usize>> = next.by_ref().take(self.interleave).collect();
        while !open.is_empty() {
            // One open shard reads without a draw, so the plain order
            // (interleave 1) draws only for the buffer.
            let j = if open.len() == 1 {
                0
            } else {
                draw.below(open.len())
            };
            let Some(i) = open[j].next() else {
                match next.next() {
                    Some(shard) => open[j] = shard,
                    None => drop(open.swap_remove(j)),
                }
                continue;
            };
            buffer.push(i);
            if buffer.len() == self.buffer {
                out.push(buffer.swap_remove(draw.below(buffer.len())));
            }
        }
        while !buffer.is_empty() {
            out.push(buffer.swap_remove(draw.below(buffer.len())));
        }
        self.pad(out, epoch)
    }

    /// `out` padded with its own first samples to the largest rank's count
    /// (a rank left without a shard, with more ranks than shards, takes
    /// the epoch's first shards' samples).
    fn pad(&self, mut out: Vec<usize>, epoch: u64) -> Vec<usize> {
        if self.world_size == 1 {
            return out;
        }
        if out.is_empty() {
            out = crate::permutation(self.shards.len(), self.seed, epoch)
                .into_iter()
                .flat_map(|s| self.shards[s].clone())
                .collect();
            if out.is_empty() {
                return out;
            }
        }
        let count = |rank| -> usize {
            self.shards_of(rank, epoch)
                .iter()
                .map(|&s| self.shards[s].len())
                .sum()
        };
        let most = (0..self.world_size).map(count).max().unwrap_or(0);
        let mine = out.len();
        for k in mine..most {
            out.push(out[k % mine]);
        }
        out.truncate(most);
        out
    }
}

impl Sampler for ShardOrder {
    fn order(&self, _len: usize, epoch: u64) -> Vec<usize> {
        ShardOrder::order(self, epoch)
    }

    fn describe(&self) -> String {
        format!(
            "shard stream of {} shards, buffer {}, {} at once",
            self.shards.len(),
            self.buffer,
            self.interleave
        )
    }
}

/// Counter-based splitmix64 draws: deterministic, and independent of any
/// rand release.
struct Draw {
    seed: u64,
    stream: u64,
    n: u64,
}

impl Draw {
    fn new(seed: u64, stream: u64) -> Self {
        Self { seed, stream, n: 0 }
    }

    /// A uniform index below `bound` (multiply-shift of a 64-bit draw).
    fn below(&mut self, bound: usize) -> usize {
        self.n += 1;
        let mut z = self
            .seed
            .wrapping_add(self.n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            ^ self.stream.rotate_left(17);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((u128::from(z) * bound as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shards of 7, 3, 10, 1 and 4 samples.
    fn uneven() -> Vec<Range<usize>> {
        vec![0..7, 7..10, 10..20, 20..21, 21..25]
    }

    #[test]
    fn one_rank_visits_each_sample_once() {
        let s = ShardOrder::new(uneven(), 3, 4);
        let mut o = s.order(1);
        assert_eq!(o, s.order(1));
        assert_ne!(o, s.order(2));
        o.sort_unstable();
        assert_eq!(o, (0..25).collect::<Vec<_>>());
    }

    #[test]
    fn uneven_ranks_run_the_same_count_and_cover_everything() {
        for world in [2, 3, 4, 7] {
            for epoch in 0..5 {
                let orders: Vec<Vec<usize>> = (0..world)
                    .map(|r| {
                        ShardOrder::new(uneven(), 3, 4)
                            .with_rank(r, world)
                            .order(epoch)
                    })
                    .collect();
                let len = orders[0].len();
                assert!(orders.iter().all(|o| o.len() == len), "world {world}");
                let mut all: Vec<usize> = orders.concat();
                all.sort_unstable();
                all.dedup();
                assert_eq!(all, (0..25).collect::<Vec<_>>(), "world {world}");
            }
        }
    }

    #[test]
    fn interleaving_keeps_every_sample_once_and_mixes_shards() {
        for k in [1, 2, 3, 8] {
            let s = ShardOrder::new(uneven(), 3, 4).with_interleave(k);
            let mut o = s.order(1);
            o.sort_unstable();
            assert_eq!(o, (0..25).collect::<Vec<_>>(), "interleave {k}");
            for world in [2, 3] {
                let lens: Vec<usize> = (0..world)
                    .map(|r| s.clone().with_rank(r, world).order(2).len())
                    .collect();
                assert!(lens.iter().all(|&l| l == lens[0]), "{k}, {world}");
            }
        }
        // Class-sorted storage, 20 shards of one class each: batches of 32
        // through a buffer of 64 mix more classes when 8 shards are open.
        let shards: Vec<Range<usize>> = (0..20).map(|c| c * 100..(c + 1) * 100).collect();
        let labels: Vec<i64> = (0..2000).map(|i| i / 100).collect();
        let quality = |k| {
            let order = ShardOrder::new(shards.clone(), 5, 64)
                .with_interleave(k)
                .order(0);
            crate::ShuffleQuality::of(&order, &labels, 32).classes_per_batch
        };
        let (plain, mixed) = (quality(1), quality(8));
        assert!(
            plain < 4.0 && mixed > 7.0,
            "plain {plain}, interleaved {mixed}"
        );
    }
}
