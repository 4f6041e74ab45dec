//! The transfer engine's error type.

/// Errors of the transfer engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransferError {
    /// `libcuda` could not be loaded: no NVIDIA driver on this machine.
    #[error("no CUDA driver: libcuda could not be loaded (use the host device)")]
    NoDriver,
    /// The driver is there but the device is not.
    #[error("no CUDA device {ordinal}: the driver reports {count}")]
    NoDevice {
        /// Device asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    #[error("CUDA {op}: {message}")]
    Driver {
        /// What was being done.
        op: &'static str,
        /// The driver's message.
        message: String,
    },
    /// The loader failed to deliver a batch.
    #[error(transparent)]
    Loader(#[from] adapt_loader::LoaderError),
    /// A device name that is neither `host` nor `cuda[:N]`.
    #[error("unknown device {0:?}: expected host, cuda or cuda:N")]
    UnknownDevice(String),
}

impl TransferError {
    pub(crate) fn driver(op: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> Self {
        move |e| TransferError::Driver {
            op,
            message: e.to_string(),
        }
    }
}
