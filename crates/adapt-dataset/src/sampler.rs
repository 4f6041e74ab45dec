//! The sampler trait: a custom epoch order over a dataset.

/// A custom epoch order (a pack's shard-streaming order, say). In a loader
/// it replaces `shuffle` and `distributed`: the sampler decides the order
/// and this rank's share, and must be a pure function of its inputs.
pub trait Sampler: Send + Sync + std::fmt::Debug {
    /// Dataset indices to visit in `epoch`, each below `len`.
    fn order(&self, len: usize, epoch: u64) -> Vec<usize>;

    /// What decides the order, for checkpoints: two samplers with the
    /// same description give the same order for the same inputs (a
    /// checkpoint taken under one is refused under another). Ranks are not
    /// part of it: a checkpoint resumes on another rank.
    fn describe(&self) -> String {
        "custom".into()
    }
}
