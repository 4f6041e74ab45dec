//! Page-locked batch buffers for the loader's buffer seam.

use adapt_loader::{AlignedBytes, BufferProvider, HostBuffer, LoaderError};
use cudarc::driver::{CudaContext, PinnedHostSlice};
use std::any::Any;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One page-locked buffer a worker collates into and the engine copies from.
pub struct PinnedBuffer {
    pub(crate) slice: PinnedHostSlice<u8>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is into `slice`'s allocation, owned by this value;
// `PinnedHostSlice` is itself Send + Sync.
unsafe impl Send for PinnedBuffer {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for PinnedBuffer {}

impl HostBuffer for PinnedBuffer {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr`/`len` describe the live allocation. The engine hands
        // a buffer back to the loader only after its copy has completed, so
        // no DMA reads it while a worker writes it; reading it back is the
        // consumer's and the DMA's shared, read-only use.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
    fn is_pinned(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Allocates page-locked buffers, at most `max` of them (the loader's
/// in-flight bound, plus the consumer's and the engine's batches); past it
/// the pool hands out ordinary heap buffers, copied pageable, so pinned
/// memory never grows past the bound and nothing blocks.
pub struct PinnedBuffers {
    ctx: Arc<CudaContext>,
    max: usize,
    pinned: AtomicUsize,
}

impl PinnedBuffers {
    pub(crate) fn new(ctx: Arc<CudaContext>, max: usize) -> Self {
        Self {
            ctx,
            max,
            pinned: AtomicUsize::new(0),
        }
    }

    /// Page-locked buffers allocated so far.
    pub fn pinned(&self) -> usize {
        self.pinned.load(Ordering::Relaxed)
    }
}

impl BufferProvider for PinnedBuffers {
    fn allocate(&self, len: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
        if self.pinned.fetch_add(1, Ordering::Relaxed) >= self.max {
            self.pinned.fetch_sub(1, Ordering::Relaxed);
            return Ok(Box::new(AlignedBytes::zeroed(len)));
        }
        let err = |e: cudarc::driver::DriverError| LoaderError::Buffer {
            bytes: len,
            message: e.to_string(),
        };
        // Flags 0: ordinary cached pinned memory. cudarc's default,
        // write-combined, is fast for the CPU to write and the GPU to read
        // but makes every CPU read uncached (tens of times slower): a
        // digest, a check or a transform reading the batch back would crawl.
        // SAFETY: zeroed just below, before anything reads it: a short
        // batch's tail is then old data or zeros, never uninitialised.
        let mut slice = unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len, 0) }.map_err(err)?;
        // One event sync at allocation; afterwards the engine tracks
        // readiness, so workers make no driver call per batch.
        let ptr = slice.as_mut_ptr().map_err(err)?;
        // SAFETY: `ptr` addresses `len` bytes of the allocation just made.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(Box::new(PinnedBuffer { slice, ptr, len }))
    }
}
