//! Batch buffers: the seam where pinned memory plugs in, and the pool that
//! recycles buffers so steady-state iteration allocates nothing.

use crate::LoaderError;
use std::any::Any;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Host memory holding one batch's data (f32 or u8 values, by the loader's
/// [`OutputFormat`](crate::OutputFormat)), seen as bytes. The memory must be
/// aligned to 4 bytes so f32 batches can be read in place.
pub trait HostBuffer: Send + Sync {
    /// The bytes.
    fn as_bytes(&self) -> &[u8];
    /// The bytes, for a worker to collate into.
    fn as_bytes_mut(&mut self) -> &mut [u8];
    /// Whether the memory is page-locked.
    fn is_pinned(&self) -> bool {
        false
    }
    /// The concrete buffer, so a transfer engine can find its own type
    /// (and copy from the very buffer the worker wrote).
    fn as_any(&self) -> &dyn Any;
}

/// Heap memory of a byte length, aligned for f32 (it is a `Vec<f32>`
/// underneath), zeroed at allocation so no byte is ever read uninitialised.
#[derive(Clone, Debug)]
pub struct AlignedBytes {
    words: Vec<f32>,
    len: usize,
}

impl AlignedBytes {
    /// `len` zero bytes. Aborts when memory runs out, as `vec!` does: see
    /// [`try_zeroed`](Self::try_zeroed) for sizes from input.
    pub fn zeroed(len: usize) -> Self {
        Self {
            words: vec![0.0; len.div_ceil(4)],
            len,
        }
    }

    /// `len` zero bytes, or an error when the memory cannot be had.
    pub fn try_zeroed(len: usize) -> Result<Self, LoaderError> {
        let mut words = Vec::new();
        words
            .try_reserve_exact(len.div_ceil(4))
            .map_err(|e| LoaderError::Buffer {
                bytes: len,
                message: e.to_string(),
            })?;
        words.resize(len.div_ceil(4), 0.0);
        Ok(Self { words, len })
    }
}

impl HostBuffer for AlignedBytes {
    fn as_bytes(&self) -> &[u8] {
        &bytemuck::cast_slice(&self.words)[..self.len]
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(&mut self.words)[..self.len]
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Where batch buffers come from. The loader asks rarely (the pool recycles);
/// a pinned-memory provider lives in the transfer crate.
pub trait BufferProvider: Send + Sync {
    /// A buffer of `bytes` bytes, aligned to 4.
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>, LoaderError>;
}

/// Ordinary (pageable) heap memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapBuffers;

impl BufferProvider for HeapBuffers {
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
        Ok(Box::new(AlignedBytes::try_zeroed(bytes)?))
    }
}

/// One batch's slot: data, labels and indices, recycled together.
pub(crate) struct Slot {
    pub(crate) data: Box<dyn HostBuffer>,
    pub(crate) labels: Vec<i64>,
    pub(crate) indices: Vec<usize>,
}

/// Recycles batch slots. It never blocks: when every buffer is out (a
/// consumer holding many batches), it allocates; it keeps at most
/// `retain` free buffers, the in-flight bound plus the consumer's one.
pub(crate) struct BatchPool {
    provider: Arc<dyn BufferProvider>,
    bytes: usize,
    batch_size: usize,
    retain: usize,
    free: Mutex<Vec<Slot>>,
    allocated: AtomicUsize,
}

impl BatchPool {
    /// Where its buffers come from.
    pub(crate) fn provider(&self) -> Arc<dyn BufferProvider> {
        Arc::clone(&self.provider)
    }

    pub(crate) fn new(
        provider: Arc<dyn BufferProvider>,
        bytes: usize,
        batch_size: usize,
        retain: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            provider,
            bytes,
            batch_size,
            retain,
            free: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
        })
    }

    pub(crate) fn take(&self) -> Result<Slot, LoaderError> {
        if let Some(mut s) = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            s.labels.clear();
            s.indices.clear();
            return Ok(s);
        }
        let data = self.provider.allocate(self.bytes)?;
        let got = data.as_bytes();
        if got.len() != self.bytes || !(got.as_ptr() as usize).is_multiple_of(4) {
            return Err(LoaderError::Buffer {
                bytes: self.bytes,
                message: format!(
                    "provider returned {} bytes at {:p} (needs {} bytes aligned to 4)",
                    got.len(),
                    got.as_ptr(),
                    self.bytes
                ),
            });
        }
        self.allocated.fetch_add(1, Ordering::Relaxed);
        Ok(Slot {
            data,
            labels: Vec::with_capacity(self.batch_size),
            indices: Vec::with_capacity(self.batch_size),
        })
    }

    pub(crate) fn give_back(&self, s: Slot) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.retain {
            free.push(s);
        } else {
            // Over the retention bound: free it, and count it as gone.
            self.allocated.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}
