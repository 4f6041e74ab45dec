//! The shard-streaming order: whole shards in turn, for throughput.

use crate::PackDataset;
use adapt_dataset::ShardOrder;
use std::sync::Arc;

/// Visits a pack shard by shard ([`ShardOrder`] over the pack's shards: the
/// shard order is shuffled per epoch from the seed, shards are dealt
/// round-robin to ranks, and within a rank's shards samples pass through a
/// shuffle buffer of bounded size). A pure function of (seed, epoch, rank,
/// world size). Used as a loader sampler,
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
    order: ShardOrder,
}

impl ShardStream {
    /// Streams `pack` with a shuffle buffer of `buffer` samples (≥ 1).
    pub fn new(pack: &Arc<PackDataset>, seed: u64, buffer: usize) -> Self {
        Self {
            pack: Arc::clone(pack),
            order: ShardOrder::new(pack.shard_ranges(), seed, buffer),
        }
    }

    /// This rank's share: shards `rank, rank + world_size, …` of each
    /// epoch's shuffled shard list, padded to the largest rank's count
    /// ([`ShardOrder`]).
    #[must_use]
    pub fn with_rank(mut self, rank: usize, world_size: usize) -> Self {
        self.order = self.order.with_rank(rank, world_size);
        self
    }

    /// This rank's shards (indices in the manifest's list) in the order
    /// `epoch` streams them.
    pub fn shard_order(&self, epoch: u64) -> Vec<usize> {
        self.order.shard_order(epoch)
    }

    /// Pack indices of this rank in `epoch`, in streaming order.
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        self.order.order(epoch)
    }
}

impl adapt_dataset::Sampler for ShardStream {
    fn order(&self, _len: usize, epoch: u64) -> Vec<usize> {
        self.pack.stream_order(&self.shard_order(epoch));
        ShardStream::order(self, epoch)
    }

    fn describe(&self) -> String {
        format!("pack {}", adapt_dataset::Sampler::describe(&self.order))
    }
}

impl std::fmt::Debug for ShardStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardStream")
            .field("pack", &self.pack.dir())
            .field("order", &self.order)
            .finish()
    }
}
