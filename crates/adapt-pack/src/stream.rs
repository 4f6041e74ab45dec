//! The shard-streaming order: whole shards in turn, for throughput.

use crate::PackDataset;
use std::sync::Arc;

/// Visits a pack shard by shard: the shard order is shuffled per epoch from
/// the seed, shards are dealt round-robin to ranks, and within a rank's
/// shards samples pass through a shuffle buffer of bounded size. A pure
/// function of (seed, epoch, rank, world size). Used as a loader sampler,
/// consecutive batches come from the same few frames, so each frame is
/// decompressed about once per epoch.
///
/// Shuffle quality: the buffer releases a random one of its `buffer`
/// samples per record read, so a batch holds records read recently, mostly
/// from one or two shards (a sample can linger in the buffer; it leaves
/// after `buffer` draws on average). Packing shuffled the whole dataset
/// first, so those records' source indices are spread over the whole
/// source; what stays fixed across epochs is the grouping into shards (two
/// samples of shards far apart in an epoch's order rarely share a batch).
/// Random access over a pack, like any loader shuffle, lets any two samples
/// meet. Figures: `docs/pack-format.md`.
///
/// As a [`Sampler`](adapt_dataset::Sampler), each epoch's shard order also
/// goes to the pack's storage, which (remote) fetches shards ahead.
#[derive(Clone)]
pub struct ShardStream {
    pack: Arc<PackDataset>,
    shards: Vec<std::ops::Range<usize>>,
    seed: u64,
    buffer: usize,
    rank: usize,
    world_size: usize,
}

impl ShardStream {
    /// Streams `pack` with a shuffle buffer of `buffer` samples (≥ 1).
    pub fn new(pack: &Arc<PackDataset>, seed: u64, buffer: usize) -> Self {
        Self {
            pack: Arc::clone(pack),
            shards: pack.shard_ranges(),
            seed,
            buffer: buffer.max(1),
            rank: 0,
            world_size: 1,
        }
    }

    /// This rank's share: shards `rank, rank + world_size, …` of each
    /// epoch's shuffled shard list (whole shards: ranks differ in sample
    /// count when shards do).
    #[must_use]
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.world_size = world_size.max(1);
        self.rank = rank.min(self.world_size - 1);
        self
    }

    /// This rank's shards (indices in the manifest's list) in the order
    /// `epoch` streams them.
    pub fn shard_order(&self, epoch: u64) -> Vec<usize> {
        adapt_dataset::permutation(self.shards.len(), self.seed, epoch)
            .into_iter()
            .skip(self.rank)
            .step_by(self.world_size)
            .collect()
    }

    /// Pack indices of this rank in `epoch`, in streaming order.
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let mine = self.shard_order(epoch);
        let mut draw = Draw::new(
            self.seed ^ 0x5348_5244,
            epoch.wrapping_mul(1 << 20) ^ self.rank as u64,
        );
        // A buffer larger than the pack holds the whole pack: never allocate
        // more than that, whatever was asked.
        let total = self.shards.last().map_or(0, |r| r.end);
        let mut buffer = Vec::with_capacity(self.buffer.min(total));
        let mut out = Vec::new();
        for &s in &mine {
            for i in self.shards[s].clone() {
                buffer.push(i);
                if buffer.len() == self.buffer {
                    out.push(buffer.swap_remove(draw.below(buffer.len())));
                }
            }
        }
        while !buffer.is_empty() {
            out.push(buffer.swap_remove(draw.below(buffer.len())));
        }
        out
    }
}

impl adapt_dataset::Sampler for ShardStream {
    fn order(&self, _len: usize, epoch: u64) -> Vec<usize> {
        self.pack.stream_order(&self.shard_order(epoch));
        ShardStream::order(self, epoch)
    }
}

impl std::fmt::Debug for ShardStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardStream")
            .field("pack", &self.pack.dir())
            .field("shards", &self.shards.len())
            .field("seed", &self.seed)
            .field("buffer", &self.buffer)
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .finish()
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
