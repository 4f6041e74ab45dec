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
