//! Page-locked batch buffers for the loader's buffer seam, owned by the
//! engine and reused across epochs, loaders and tuning trials.
//!
//! Allocating page-locked memory (`cuMemHostAlloc`) costs milliseconds per
//! large buffer, so a buffer is never freed while its pool lives: when the
//! loader lets one go (its pool keeps only the in-flight bound), it comes
//! back here and the next request of that size gets it again. The pool
//! counts the buffers alive, in use or free, and never holds more than its
//! bound; past it, a request gets ordinary heap memory (copied pageable),
//! counted, so nothing blocks and the share of pinned copies can be checked.
//!
//! The allocator is a seam ([`PinnedAllocator`]): CUDA's in production,
//! a counting fake in tests, so the accounting is tested without a GPU.

use adapt_loader::{AlignedBytes, BufferProvider, HostBuffer, LoaderError};
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Page-locked memory from a [`PinnedAllocator`]: `len` bytes at `as_ptr`,
/// zeroed at allocation, aligned for f32, freed when dropped.
pub trait PinnedMemory: Send + Sync {
    /// The first byte.
    fn as_ptr(&self) -> *mut u8;
    /// Bytes.
    fn len(&self) -> usize;
    /// Whether it holds no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The concrete memory, so the engine can find its own kind.
    fn as_any(&self) -> &dyn Any;
}

/// Where page-locked memory comes from.
pub trait PinnedAllocator: Send + Sync {
    /// `bytes` zeroed, page-locked bytes.
    fn allocate(&self, bytes: usize) -> Result<Box<dyn PinnedMemory>, String>;
}

/// Counters of a pool, for checks (`gpu-check`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PinnedStats {
    /// Calls to the allocator (each a `cuMemHostAlloc`).
    pub allocations: usize,
    /// Page-locked buffers alive now (in use or free).
    pub live: usize,
    /// Buffers handed out page-locked.
    pub pinned_handed: usize,
    /// Requests answered with heap memory (the bound was reached).
    pub pageable_handed: usize,
}

/// The pool: page-locked buffers reused by size, at most `max` alive.
pub struct PinnedPool {
    allocator: Arc<dyn PinnedAllocator>,
    max: AtomicUsize,
    free: Mutex<Vec<Box<dyn PinnedMemory>>>,
    live: AtomicUsize,
    allocations: AtomicUsize,
    pinned_handed: AtomicUsize,
    pageable_handed: AtomicUsize,
}

impl PinnedPool {
    /// A pool over `allocator` keeping at most `max` page-locked buffers.
    pub fn new(allocator: Arc<dyn PinnedAllocator>, max: usize) -> Arc<Self> {
        Arc::new(Self {
            allocator,
            max: AtomicUsize::new(max),
            free: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            allocations: AtomicUsize::new(0),
            pinned_handed: AtomicUsize::new(0),
            pageable_handed: AtomicUsize::new(0),
        })
    }

    /// Raises the bound to at least `max` (a loader with more in flight).
    pub fn reserve(&self, max: usize) {
        self.max.fetch_max(max, Ordering::SeqCst);
    }

    /// The most page-locked buffers the pool keeps now.
    pub fn bound(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    /// The counters now.
    pub fn stats(&self) -> PinnedStats {
        PinnedStats {
            allocations: self.allocations.load(Ordering::SeqCst),
            live: self.live.load(Ordering::SeqCst),
            pinned_handed: self.pinned_handed.load(Ordering::SeqCst),
            pageable_handed: self.pageable_handed.load(Ordering::SeqCst),
        }
    }

    fn take(&self, bytes: usize) -> Result<Option<Box<dyn PinnedMemory>>, LoaderError> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = free.iter().position(|m| m.len() == bytes) {
            return Ok(Some(free.swap_remove(i)));
        }
        // The slot is claimed under the lock: two workers asking at once
        // must not both see room for one more and exceed the bound.
        if self.live.load(Ordering::SeqCst) >= self.max.load(Ordering::SeqCst) {
            // Full: make room by freeing a buffer of another size, if any
            // (its slot passes to the new buffer).
            match free.pop() {
                Some(other) => drop(other),
                None => return Ok(None),
            }
        } else {
            self.live.fetch_add(1, Ordering::SeqCst);
        }
        drop(free);
        let allocated = self
            .allocator
            .allocate(bytes)
            .map_err(|message| LoaderError::Buffer { bytes, message })
            .and_then(|mem| {
                if mem.len() != bytes || !(mem.as_ptr() as usize).is_multiple_of(4) {
                    Err(LoaderError::Buffer {
                        bytes,
                        message: format!(
                            "allocator returned {} bytes at {:p}",
                            mem.len(),
                            mem.as_ptr()
                        ),
                    })
                } else {
                    Ok(mem)
                }
            });
        match allocated {
            Ok(mem) => {
                self.allocations.fetch_add(1, Ordering::SeqCst);
                Ok(Some(mem))
            }
            Err(e) => {
                self.live.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// The pool as a loader's buffer provider.
    pub fn provider(self: &Arc<Self>) -> Arc<dyn BufferProvider> {
        Arc::new(PinnedBuffers(Arc::clone(self)))
    }

    fn give_back(&self, mem: Box<dyn PinnedMemory>) {
        self.free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(mem);
    }
}

/// A [`BufferProvider`] over an engine's pool.
pub struct PinnedBuffers(pub(crate) Arc<PinnedPool>);

impl BufferProvider for PinnedBuffers {
    fn allocate(&self, bytes: usize) -> Result<Box<dyn HostBuffer>, LoaderError> {
        match self.0.take(bytes)? {
            Some(mem) => {
                self.0.pinned_handed.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(PinnedBuffer {
                    mem: Some(mem),
                    pool: Arc::clone(&self.0),
                }))
            }
            None => {
                self.0.pageable_handed.fetch_add(1, Ordering::SeqCst);
                Ok(Box::new(AlignedBytes::try_zeroed(bytes)?))
            }
        }
    }
}

/// One page-locked buffer a worker collates into and the engine copies
/// from; dropped, it goes back to its pool, not to the driver.
pub struct PinnedBuffer {
    mem: Option<Box<dyn PinnedMemory>>,
    pool: Arc<PinnedPool>,
}

impl PinnedBuffer {
    pub(crate) fn memory(&self) -> Option<&dyn PinnedMemory> {
        self.mem.as_deref()
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if let Some(m) = self.mem.take() {
            self.pool.give_back(m);
        }
    }
}

impl HostBuffer for PinnedBuffer {
    fn as_bytes(&self) -> &[u8] {
        match &self.mem {
            // SAFETY: the memory is this buffer's alone while it exists (the
            // pool hands a buffer to one owner; the engine hands the batch
            // back to the loader only after its copy completed, so no DMA
            // reads it while a worker writes it), `len` bytes, zeroed at
            // allocation so every byte is initialised.
            Some(m) => unsafe { std::slice::from_raw_parts(m.as_ptr(), m.len()) },
            None => &[],
        }
    }
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        match &self.mem {
            // SAFETY: as above, and `&mut self` makes this the only access.
            Some(m) => unsafe { std::slice::from_raw_parts_mut(m.as_ptr(), m.len()) },
            None => &mut [],
        }
    }
    fn is_pinned(&self) -> bool {
        true
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// CUDA's page-locked memory: cached (flags 0), not write-combined.
pub(crate) struct CudaPinned(pub(crate) Arc<cudarc::driver::CudaContext>);

/// One `cuMemHostAlloc` allocation.
pub(crate) struct CudaPinnedMemory {
    pub(crate) slice: cudarc::driver::PinnedHostSlice<u8>,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the pointer is into `slice`'s allocation, owned by this value;
// `PinnedHostSlice` is itself Send + Sync.
unsafe impl Send for CudaPinnedMemory {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for CudaPinnedMemory {}

impl PinnedMemory for CudaPinnedMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PinnedAllocator for CudaPinned {
    fn allocate(&self, len: usize) -> Result<Box<dyn PinnedMemory>, String> {
        // Flags 0: ordinary cached pinned memory. cudarc's default,
        // write-combined, is fast for the CPU to write and the GPU to read
        // but makes every CPU read uncached (tens of times slower): a
        // digest, a check or a transform reading the batch back would crawl.
        // SAFETY: zeroed just below, before anything reads it.
        let mut slice =
            unsafe { self.0.alloc_pinned_with_flags::<u8>(len, 0) }.map_err(|e| e.to_string())?;
        // One event sync at allocation; afterwards the engine tracks
        // readiness, so workers make no driver call per batch.
        let ptr = slice.as_mut_ptr().map_err(|e| e.to_string())?;
        // SAFETY: `ptr` addresses the `len` bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(Box::new(CudaPinnedMemory { slice, ptr, len }))
    }
}

/// Heap memory that says it is page-locked: the allocator tests use (and a
/// host-backend stand-in), counting what it hands out.
#[derive(Debug, Default)]
pub struct CountingAllocator {
    /// Allocations made.
    pub allocated: AtomicUsize,
    /// Allocations alive.
    pub alive: Arc<AtomicUsize>,
}

struct CountedMemory {
    bytes: AlignedBytes,
    /// Taken from `bytes` mutably once; the heap block does not move.
    ptr: *mut u8,
    alive: Arc<AtomicUsize>,
}

// SAFETY: `ptr` points into `bytes`, owned by this value.
unsafe impl Send for CountedMemory {}
// SAFETY: as above.
unsafe impl Sync for CountedMemory {}

impl Drop for CountedMemory {
    fn drop(&mut self) {
        self.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PinnedMemory for CountedMemory {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.bytes.as_bytes().len()
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

impl PinnedAllocator for CountingAllocator {
    fn allocate(&self, bytes: usize) -> Result<Box<dyn PinnedMemory>, String> {
        self.allocated.fetch_add(1, Ordering::SeqCst);
        self.alive.fetch_add(1, Ordering::SeqCst);
        let mut bytes = AlignedBytes::zeroed(bytes);
        let ptr = bytes.as_bytes_mut().as_mut_ptr();
        Ok(Box::new(CountedMemory {
            bytes,
            ptr,
            alive: Arc::clone(&self.alive),
        }))
    }
}
