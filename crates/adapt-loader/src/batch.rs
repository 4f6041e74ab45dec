use crate::HostBuffer;
use crate::pool::{BatchPool, Storage};
use adapt_dataset::Shape;
use std::fmt;
use std::sync::Arc;

/// One batch: f32 data `[B, C, H, W]`, labels and the dataset indices it
/// holds, in sampler order. Dropping it returns its buffer to the pool.
pub struct Batch {
    pub(crate) epoch: u64,
    pub(crate) number: usize,
    pub(crate) shape: Shape,
    pub(crate) skipped: usize,
    pub(crate) storage: Option<Storage>,
    pub(crate) pool: Arc<BatchPool>,
}

impl Batch {
    fn storage(&self) -> &Storage {
        // Present from construction until drop.
        self.storage
            .as_ref()
            .unwrap_or_else(|| unreachable!("batch storage taken before drop"))
    }

    /// The epoch this batch belongs to.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Its position in the epoch, from 0.
    pub fn number(&self) -> usize {
        self.number
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.storage().labels.len()
    }

    /// `true` when every sample of the batch was skipped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `[B, C, H, W]`.
    pub fn shape(&self) -> [usize; 4] {
        [
            self.len(),
            self.shape.channels as usize,
            self.shape.height as usize,
            self.shape.width as usize,
        ]
    }

    /// The normalised data, `B × C × H × W` values.
    pub fn data(&self) -> &[f32] {
        &self.storage().data.as_slice()[..self.len() * self.shape.len()]
    }

    /// Labels, one per sample.
    pub fn labels(&self) -> &[i64] {
        &self.storage().labels
    }

    /// Dataset indices, one per sample.
    pub fn indices(&self) -> &[usize] {
        &self.storage().indices
    }

    /// Samples of this batch left out under the `skip` policy.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The buffer the worker collated into (pinned or not), for a transfer
    /// engine. Its first `data().len()` values are the batch.
    pub fn host_buffer(&self) -> &dyn HostBuffer {
        &*self.storage().data
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(s) = self.storage.take() {
            self.pool.give_back(s);
        }
    }
}

impl fmt::Debug for Batch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("epoch", &self.epoch)
            .field("number", &self.number)
            .field("shape", &self.shape())
            .field("skipped", &self.skipped)
            .finish()
    }
}
