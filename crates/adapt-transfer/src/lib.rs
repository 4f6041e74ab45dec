//! The transfer engine: the last step of a data loader, host to GPU. Workers
//! collate straight into reusable page-locked buffers (this crate's
//! [`PinnedBuffers`] behind the loader's `BufferProvider` seam); the engine
//! copies each finished batch to the device asynchronously on a dedicated
//! stream, records an event per copy, and hands the host buffer back to the
//! loader's pool only once its copy has completed. [`DeviceEpoch`] keeps a
//! few copies in flight ahead of the consumer, so they overlap its work.
//!
//! Not a tensor library: a device batch is a `CudaSlice<u8>` (the bytes of
//! f32 or u8 values) with its shape and labels, for the training code to
//! wrap.
//!
//! Key choice: **nothing calls the CUDA driver before [`probe`]**. cudarc
//! loads `libcuda` dynamically and panics if a driver call is made without
//! it; [`probe`] checks for the library first and turns its absence into
//! [`TransferError::NoDriver`]. The host backend ([`Device::Host`]) always
//! works: batches stay in host memory, and `pin_memory` behaves exactly as
//! unpinned. (`clippy.toml` forbids `CudaContext::new` outside this crate's
//! probe.)

mod engine;
mod error;
mod pinned;
mod probe;

pub use engine::{DeviceBatch, DeviceBuffer, DeviceData, DeviceEpoch, TransferEngine};
pub use error::TransferError;
pub use pinned::{
    CountingAllocator, PinnedAllocator, PinnedBuffer, PinnedBuffers, PinnedMemory, PinnedPool,
    PinnedStats,
};
pub use probe::{CudaInfo, Device, driver_present, probe};

/// Device copies kept in flight ahead of the consumer ([`TransferEngine::epoch`]'s
/// depth) by every front: a run, a tuning trial, the GPU check.
pub const COPY_DEPTH: usize = 2;

/// The one sizing rule of a page-locked pool for a loader with `config`:
/// the loader's in-flight bound, the device copies in flight
/// ([`COPY_DEPTH`]), the batch the consumer holds and the one it just let
/// go (still in the pool's hands until it is given back). Every front —
/// `Run`, the tuner's trials, the GPU check — sizes its pool by this, so a
/// trial times the pool a run uses.
pub fn pinned_pool_size(config: &adapt_loader::LoaderConfig) -> usize {
    config.max_in_flight() + COPY_DEPTH + 2
}
