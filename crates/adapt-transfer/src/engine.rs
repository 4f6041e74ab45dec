//! Asynchronous host-to-device copies and the prefetching epoch.

use crate::pinned::{CudaPinned, CudaPinnedMemory, PinnedBuffer, PinnedPool, PinnedStats};
use crate::probe::context;
use crate::{Device, TransferError};
use adapt_loader::{Batch, BufferProvider, LoaderError, OutputFormat};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

type FreeList = Arc<Mutex<Vec<CudaSlice<u8>>>>;

struct Cuda {
    /// Dedicated transfer stream: creating it also turns on cudarc's event
    /// tracking, so a pinned buffer's own event is recorded after each copy.
    stream: Arc<CudaStream>,
    /// Device buffers of one batch each, back here when their batch drops.
    free: FreeList,
    /// The engine's page-locked buffers, reused across loaders and trials.
    pinned: Arc<PinnedPool>,
    /// Completion events (blocking-sync: a waiting consumer sleeps), reused.
    events: Mutex<Vec<CudaEvent>>,
    device_allocations: AtomicUsize,
}

impl Cuda {
    /// A device buffer of `full` bytes: one of the same size given back by
    /// an earlier batch, or a new one (counted).
    fn device_buffer(&self, full: usize) -> Result<CudaSlice<u8>, TransferError> {
        let reused = {
            let mut free = Cuda::lock(&self.free);
            free.iter()
                .position(|d| d.len() == full)
                .map(|i| free.swap_remove(i))
        };
        match reused {
            Some(d) => Ok(d),
            None => {
                self.device_allocations.fetch_add(1, Ordering::SeqCst);
                // SAFETY: uninitialised device memory; the copy writes the
                // batch's bytes and a consumer reads only those
                // (`DeviceBatch::byte_len`), never the tail.
                unsafe { self.stream.alloc::<u8>(full) }
                    .map_err(TransferError::driver("device alloc"))
            }
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for everything queued on the stream: before a host buffer a
    /// copy may still read goes back to the loader on an error path.
    fn settle(&self) {
        // On failure there is nothing left to wait for that we could name.
        let _ = self.stream.synchronize();
    }
}

/// Copies batches to the device (or, on the host backend, passes them on).
pub struct TransferEngine {
    device: Device,
    cuda: Option<Cuda>,
    timing: bool,
}

/// Where a device batch's data is.
pub enum DeviceData {
    /// Host backend: the loader's batch itself.
    Host(Batch),
    /// On the device.
    Cuda(DeviceBuffer),
}

/// A device buffer that goes back to its engine when dropped: no
/// allocation per batch in steady state, whether or not the consumer calls
/// [`TransferEngine::recycle`].
pub struct DeviceBuffer {
    slice: Option<CudaSlice<u8>>,
    home: FreeList,
}

impl DeviceBuffer {
    /// The device memory (its first `DeviceBatch::byte_len()` bytes are the batch).
    pub fn slice(&self) -> Option<&CudaSlice<u8>> {
        self.slice.as_ref()
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            Cuda::lock(&self.home).push(s);
        }
    }
}

/// A batch on the device: data (bytes of f32 or u8 values, by `output`),
/// labels and sample indices.
pub struct DeviceBatch {
    /// The data.
    pub data: DeviceData,
    /// `[B, C, H, W]` (`[B, H, W, C]` for u8-nhwc output).
    pub shape: [usize; 4],
    /// The value type and layout.
    pub output: OutputFormat,
    /// Labels.
    pub labels: Vec<i64>,
    /// Dataset indices.
    pub indices: Vec<usize>,
    /// Address of the host buffer the copy read (the worker's own buffer
    /// when pinned: no intermediate copy).
    pub source: *const u8,
    /// Whether the copy read page-locked memory.
    pub pinned: bool,
    /// Copy time on the GPU's clock, with [`TransferEngine::with_timing`].
    pub copy_ms: Option<f32>,
}

// SAFETY: `source` is an address kept for identity checks only, never
// dereferenced; the other fields are Send.
unsafe impl Send for DeviceBatch {}

impl DeviceBatch {
    /// Number of values.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Number of bytes of the batch's values.
    pub fn byte_len(&self) -> usize {
        self.len() * self.output.bytes_per_value()
    }

    /// `true` for an empty batch.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The data's bytes on the host backend; `None` on a device.
    pub fn host_data(&self) -> Option<&[u8]> {
        match &self.data {
            DeviceData::Host(b) => Some(b.bytes()),
            DeviceData::Cuda(_) => None,
        }
    }

    /// The device buffer (its first `byte_len()` bytes are the batch).
    pub fn cuda_slice(&self) -> Option<&CudaSlice<u8>> {
        match &self.data {
            DeviceData::Cuda(s) => s.slice(),
            DeviceData::Host(_) => None,
        }
    }
}

/// A copy in flight: the host batch is held until its event completes.
struct InFlight {
    batch: Batch,
    device: Option<DeviceBuffer>,
    start: Option<CudaEvent>,
    done: Option<CudaEvent>,
    source: *const u8,
    pinned: bool,
}

impl TransferEngine {
    /// An engine for `device`. `Device::Cuda` without a driver or device is
    /// an error ([`TransferError::NoDriver`], [`TransferError::NoDevice`]),
    /// never a panic.
    pub fn new(device: Device) -> Result<Self, TransferError> {
        let cuda = match device {
            Device::Host => None,
            Device::Cuda(ordinal) => {
                let ctx = context(ordinal)?;
                let stream = ctx.new_stream().map_err(TransferError::driver("stream"))?;
                Some(Cuda {
                    pinned: PinnedPool::new(Arc::new(CudaPinned(Arc::clone(&ctx))), 0),
                    stream,
                    free: Arc::new(Mutex::new(Vec::new())),
                    events: Mutex::new(Vec::new()),
                    device_allocations: AtomicUsize::new(0),
                })
            }
        };
        Ok(Self {
            device,
            cuda,
            timing: false,
        })
    }

    /// Times every copy with a pair of events (for measurements).
    #[must_use]
    pub fn with_timing(mut self) -> Self {
        self.timing = true;
        self
    }

    /// The device.
    pub fn device(&self) -> Device {
        self.device
    }

    /// The provider of pinned buffers for a loader with `pin_memory`: the
    /// engine's own pool, reused by every loader and trial, raised to hold
    /// at least `max` buffers (the loader's in-flight bound, the copies in
    /// flight and the consumer's). `None` on the host backend, where pinned
    /// means ordinary memory.
    pub fn pinned_buffers(&self, max: usize) -> Option<Arc<dyn BufferProvider>> {
        self.cuda.as_ref().map(|c| {
            c.pinned.reserve(max);
            c.pinned.provider()
        })
    }

    /// The engine's page-locked pool itself; `None` on the host backend.
    pub fn pinned_pool(&self) -> Option<&Arc<PinnedPool>> {
        self.cuda.as_ref().map(|c| &c.pinned)
    }

    /// The page-locked pool's counters; `None` on the host backend.
    pub fn pinned_stats(&self) -> Option<PinnedStats> {
        self.cuda.as_ref().map(|c| c.pinned.stats())
    }

    /// Device buffers allocated so far (steady state: none per batch).
    pub fn device_allocations(&self) -> usize {
        self.cuda
            .as_ref()
            .map_or(0, |c| c.device_allocations.load(Ordering::SeqCst))
    }

    /// A completion event from the pool, or a new blocking-sync one.
    fn event(&self, c: &Cuda) -> Result<CudaEvent, TransferError> {
        if let Some(e) = Cuda::lock(&c.events).pop() {
            return Ok(e);
        }
        c.stream
            .context()
            .new_event(Some(CUevent_flags::CU_EVENT_BLOCKING_SYNC))
            .map_err(TransferError::driver("event"))
    }

    /// Starts copying `batch` to the device.
    fn submit(&self, batch: Batch) -> Result<InFlight, TransferError> {
        let host = batch.host_buffer();
        let source = host.as_bytes().as_ptr();
        let pinned = host.is_pinned();
        let Some(c) = &self.cuda else {
            return Ok(InFlight {
                batch,
                device: None,
                start: None,
                done: None,
                source,
                pinned,
            });
        };
        let mut dst = c.device_buffer(host.as_bytes().len())?;
        let start = if self.timing {
            Some(
                c.stream
                    .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                    .map_err(TransferError::driver("event"))?,
            )
        } else {
            None
        };
        let pinned_slice = host
            .as_any()
            .downcast_ref::<PinnedBuffer>()
            .and_then(PinnedBuffer::memory)
            .and_then(|m| m.as_any().downcast_ref::<CudaPinnedMemory>());
        let copied = match pinned_slice {
            // The worker's own page-locked buffer: an asynchronous DMA.
            Some(p) => c.stream.memcpy_htod(&p.slice, &mut dst),
            // Pageable memory: the driver stages it.
            None => c.stream.memcpy_htod(host.as_bytes(), &mut dst),
        };
        let home = Arc::clone(&c.free);
        let device = DeviceBuffer {
            slice: Some(dst),
            home,
        };
        let done = copied
            .map_err(TransferError::driver("copy to device"))
            .and_then(|()| {
                let e = self.event(c)?;
                e.record(&c.stream)
                    .map_err(TransferError::driver("event"))?;
                Ok(e)
            });
        match done {
            Ok(done) => Ok(InFlight {
                batch,
                device: Some(device),
                start,
                done: Some(done),
                source,
                pinned,
            }),
            Err(e) => {
                // The copy may be queued: it must finish before the host
                // buffer (dropped with `batch`) goes back to a worker.
                c.settle();
                Err(e)
            }
        }
    }

    /// Waits for a copy; only then does the host batch (and its buffer) go
    /// back to the loader.
    fn finish(&self, f: InFlight) -> Result<DeviceBatch, TransferError> {
        let InFlight {
            batch,
            device,
            start,
            done,
            source,
            pinned,
        } = f;
        let mut copy_ms = None;
        if let (Some(e), Some(c)) = (&done, &self.cuda) {
            let waited = e
                .synchronize()
                .map_err(TransferError::driver("wait for copy"))
                .and_then(|()| match &start {
                    Some(s) => s
                        .elapsed_ms(e)
                        .map(Some)
                        .map_err(TransferError::driver("event timing")),
                    None => Ok(None),
                });
            match waited {
                Ok(ms) => copy_ms = ms,
                Err(err) => {
                    // The DMA may still read the host buffer `batch` holds.
                    c.settle();
                    return Err(err);
                }
            }
        }
        if let (Some(e), Some(c)) = (done, &self.cuda) {
            Cuda::lock(&c.events).push(e);
        }
        let (shape, output, labels, indices) = (
            batch.shape(),
            batch.output(),
            batch.labels().to_vec(),
            batch.indices().to_vec(),
        );
        let data = match device {
            Some(d) => {
                drop(batch);
                DeviceData::Cuda(d)
            }
            None => DeviceData::Host(batch),
        };
        Ok(DeviceBatch {
            data,
            shape,
            output,
            labels,
            indices,
            source,
            pinned,
            copy_ms,
        })
    }

    /// Hands a device batch back now (dropping it does the same: its
    /// device buffer returns to the engine either way).
    pub fn recycle(&self, batch: DeviceBatch) {
        drop(batch);
    }

    /// Copies a device batch's bytes back to the host (for checks).
    pub fn to_host(&self, batch: &DeviceBatch) -> Result<Vec<u8>, TransferError> {
        match (&batch.data, &self.cuda) {
            (DeviceData::Host(b), _) => Ok(b.bytes().to_vec()),
            (DeviceData::Cuda(d), Some(c)) => {
                let slice = d.slice().ok_or_else(|| TransferError::Driver {
                    op: "copy to host",
                    message: "a device batch without its buffer".into(),
                })?;
                let mut v = c
                    .stream
                    .clone_dtoh(slice)
                    .map_err(TransferError::driver("copy to host"))?;
                v.truncate(batch.byte_len());
                Ok(v)
            }
            (DeviceData::Cuda(_), None) => Err(TransferError::Driver {
                op: "copy to host",
                message: "a device batch handed to a host-backend engine".into(),
            }),
        }
    }

    /// Host-to-device bandwidth in GB/s for a buffer of `bytes`, pinned or
    /// pageable: the median of `repeats` copies timed on the GPU's clock.
    pub fn bandwidth(
        &self,
        bytes: usize,
        pinned: bool,
        repeats: usize,
    ) -> Result<f64, TransferError> {
        let Some(c) = &self.cuda else {
            return Err(TransferError::Driver {
                op: "bandwidth",
                message: "the host backend has no device".into(),
            });
        };
        let n = bytes / 4;
        let mut dst = c
            .stream
            .alloc_zeros::<f32>(n)
            .map_err(TransferError::driver("device alloc"))?;
        let pinned_src = if pinned {
            // SAFETY: written (zeroed) below before any copy reads it.
            let mut p = unsafe { c.stream.context().alloc_pinned_with_flags::<f32>(n, 0) }
                .map_err(TransferError::driver("pinned alloc"))?;
            p.as_mut_slice()
                .map_err(TransferError::driver("pinned"))?
                .fill(0.5);
            Some(p)
        } else {
            None
        };
        let pageable = if pinned { Vec::new() } else { vec![0.5f32; n] };
        let timed = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let mut times = Vec::new();
        for _ in 0..repeats.max(1) {
            let start = c
                .stream
                .record_event(timed)
                .map_err(TransferError::driver("event"))?;
            match &pinned_src {
                Some(p) => c.stream.memcpy_htod(p, &mut dst),
                None => c.stream.memcpy_htod(&pageable, &mut dst),
            }
            .map_err(TransferError::driver("copy to device"))?;
            let end = c
                .stream
                .record_event(timed)
                .map_err(TransferError::driver("event"))?;
            end.synchronize()
                .map_err(TransferError::driver("wait for copy"))?;
            times.push(f64::from(
                start
                    .elapsed_ms(&end)
                    .map_err(TransferError::driver("event timing"))?,
            ));
        }
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        Ok(bytes as f64 / (ms / 1000.0) / 1e9)
    }

    /// Wraps an epoch: keeps up to `depth` copies in flight ahead of the
    /// consumer (at least 1).
    pub fn epoch<I>(&self, batches: I, depth: usize) -> DeviceEpoch<'_, I>
    where
        I: Iterator<Item = Result<Batch, LoaderError>>,
    {
        DeviceEpoch {
            engine: self,
            inner: batches,
            queue: VecDeque::new(),
            depth: depth.max(1),
            failed: None,
        }
    }
}

/// An epoch's batches on the device, copies overlapping the consumer's work.
pub struct DeviceEpoch<'a, I> {
    engine: &'a TransferEngine,
    inner: I,
    queue: VecDeque<InFlight>,
    depth: usize,
    failed: Option<TransferError>,
}

impl<I> Drop for DeviceEpoch<'_, I> {
    fn drop(&mut self) {
        // Copies still reading host buffers must finish before those buffers
        // go back to the loader's pool (a worker could overwrite them).
        if self.queue.is_empty() {
            return;
        }
        let settled = self
            .queue
            .iter()
            .all(|f| f.done.as_ref().is_none_or(|e| e.synchronize().is_ok()));
        if !settled && let Some(c) = &self.engine.cuda {
            // An event could not be waited on: wait for the whole stream.
            c.settle();
        }
        self.queue.clear();
    }
}

impl<I: Iterator<Item = Result<Batch, LoaderError>>> DeviceEpoch<'_, I> {
    /// Copies in flight now (never above the depth).
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }
}

impl<I: Iterator<Item = Result<Batch, LoaderError>>> Iterator for DeviceEpoch<'_, I> {
    type Item = Result<DeviceBatch, TransferError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.failed.is_none() && self.queue.len() < self.depth {
            match self.inner.next() {
                Some(Ok(b)) => match self.engine.submit(b) {
                    Ok(f) => self.queue.push_back(f),
                    Err(e) => self.failed = Some(e),
                },
                Some(Err(e)) => self.failed = Some(e.into()),
                None => break,
            }
        }
        // Batches already copied come first; an error then ends the epoch.
        match self.queue.pop_front() {
            Some(f) => Some(self.engine.finish(f)),
            None => self.failed.take().map(Err),
        }
    }
}
