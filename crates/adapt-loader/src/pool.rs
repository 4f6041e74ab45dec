//! Batch buffers: the seam where pinned memory plugs in, and the pool that
//! recycles buffers so steady-state iteration allocates nothing.

use crate::LoaderError;
use std::any::Any;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Host memory holding one batch's f32 data.
pub trait HostBuffer: Send + Sync {
    /// The values.
    fn as_slice(&self) -> &[f32];
    /// The values, for a worker to collate into.
    fn as_mut_slice(&mut self) -> &mut [f32];
    /// Whether the memory is page-locked.
    fn is_pinned(&self) -> bool {
        false
    }
    /// The concrete buffer, so a transfer engine can find its own type
    /// (and copy from the very buffer the worker wrote).
    fn as_any(&self) -> &dyn Any;
}

impl HostBuffer for Vec<f32> {
    fn as_slice(&self) -> &[f32] {
        self
    }
    fn as_mut_slice(&mut self) -> &mut [f32] {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Where batch buffers come from. The loader asks rarely (the pool recycles);
/// a pinned-memory provider lives in the transfer crate.
pub trait BufferProvider: Send + Sync {
    /// A buffer of `len` f32 values.
    fn allocate(&self, len: usize) -> Result<Box<dyn HostBuffer>, LoaderError>;
}

/// Ordinary (pageable) heap memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapBuffers;

impl BufferProvider for HeapBuffers {
    fn allocate(&self, len: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
        Ok(Box::new(vec![0.0f32; len]))
    }
}

/// One batch's storage: data, labels and indices, recycled together.
pub(crate) struct Storage {
    pub(crate) data: Box<dyn HostBuffer>,
    pub(crate) labels: Vec<i64>,
    pub(crate) indices: Vec<usize>,
}

/// Recycles batch storage. It never blocks: when every buffer is out (a
/// consumer holding many batches), it allocates; it keeps at most
/// `retain` free buffers, the in-flight bound plus the consumer's one.
pub(crate) struct BatchPool {
    provider: Arc<dyn BufferProvider>,
    values: usize,
    batch_size: usize,
    retain: usize,
    free: Mutex<Vec<Storage>>,
    allocated: AtomicUsize,
}

impl BatchPool {
    pub(crate) fn new(
        provider: Arc<dyn BufferProvider>,
        values: usize,
        batch_size: usize,
        retain: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            provider,
            values,
            batch_size,
            retain,
            free: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
        })
    }

    pub(crate) fn take(&self) -> Result<Storage, LoaderError> {
        if let Some(mut s) = self.free.lock().unwrap_or_else(|p| p.into_inner()).pop() {
            s.labels.clear();
            s.indices.clear();
            return Ok(s);
        }
        let data = self.provider.allocate(self.values)?;
        if data.as_slice().len() != self.values {
            return Err(LoaderError::Buffer {
                bytes: self.values * 4,
                message: format!("provider returned {} values", data.as_slice().len()),
            });
        }
        self.allocated.fetch_add(1, Ordering::Relaxed);
        Ok(Storage {
            data,
            labels: Vec::with_capacity(self.batch_size),
            indices: Vec::with_capacity(self.batch_size),
        })
    }

    pub(crate) fn give_back(&self, s: Storage) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if free.len() < self.retain {
            free.push(s);
        } else {
            // Over the retention bound: free it, and count it as gone.
            self.allocated.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }
}
