//! A batch as the consumer receives it: its pooled buffer, shape, labels and
//! indices.

use crate::pool::{BatchPool, Slot};
use crate::{HostBuffer, OutputFormat};
use adapt_dataset::Shape;
use std::fmt;
use std::sync::Arc;

/// One batch: data (f32 `[B, C, H, W]`, or u8 `[B, C, H, W]` / `[B, H, W,
/// C]`, by the [`OutputFormat`]), labels and the dataset indices it holds, in
/// sampler order. Dropping it returns its buffer to the pool.
pub struct Batch {
    pub(crate) epoch: u64,
    pub(crate) number: usize,
    pub(crate) shape: Shape,
    pub(crate) output: OutputFormat,
    pub(crate) skipped: usize,
    pub(crate) slot: Option<Slot>,
    pub(crate) pool: Arc<BatchPool>,
}

impl Batch {
    fn slot(&self) -> &Slot {
        // Present from construction until drop.
        self.slot
            .as_ref()
            .unwrap_or_else(|| unreachable!("batch slot taken before drop"))
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
        self.slot().labels.len()
    }

    /// `true` when every sample of the batch was skipped.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `[B, C, H, W]`, or `[B, H, W, C]` for [`OutputFormat::U8Nhwc`].
    pub fn shape(&self) -> [usize; 4] {
        let (c, h, w) = (
            self.shape.channels as usize,
            self.shape.height as usize,
            self.shape.width as usize,
        );
        match self.output {
            OutputFormat::U8Nhwc => [self.len(), h, w, c],
            _ => [self.len(), c, h, w],
        }
    }

    /// The value type and layout.
    pub fn output(&self) -> OutputFormat {
        self.output
    }

    /// The batch's bytes (`B × C × H × W` values of the output type, native
    /// byte order).
    pub fn bytes(&self) -> &[u8] {
        let n = self.len() * self.shape.len() * self.output.bytes_per_value();
        &self.slot().data.as_bytes()[..n]
    }

    /// The normalised f32 values, for f32 output; `None` for u8 output.
    pub fn f32s(&self) -> Option<&[f32]> {
        // The pool checked the buffer's 4-byte alignment at allocation.
        (!self.output.is_u8())
            .then(|| bytemuck::try_cast_slice(self.bytes()).ok())
            .flatten()
    }

    /// The u8 values, for u8 output; `None` for f32 output.
    pub fn u8s(&self) -> Option<&[u8]> {
        self.output.is_u8().then(|| self.bytes())
    }

    /// Labels, one per sample.
    pub fn labels(&self) -> &[i64] {
        &self.slot().labels
    }

    /// Dataset indices, one per sample.
    pub fn indices(&self) -> &[usize] {
        &self.slot().indices
    }

    /// Samples of this batch left out under the `skip` policy.
    pub fn skipped(&self) -> usize {
        self.skipped
    }

    /// The buffer the worker collated into (pinned or not), for a transfer
    /// engine. Its first `bytes().len()` bytes are the batch; the rest (a
    /// short last batch's tail) holds older batches' bytes or zeros, never
    /// uninitialised memory.
    pub fn host_buffer(&self) -> &dyn HostBuffer {
        &*self.slot().data
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
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
