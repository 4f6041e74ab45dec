//! The only way in to the CUDA driver.

use crate::TransferError;
use cudarc::driver::CudaContext;
use std::sync::Arc;

/// Where batches go.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Device {
    /// No transfer: batches stay in host memory.
    #[default]
    Host,
    /// CUDA device with this ordinal.
    Cuda(usize),
}

impl std::str::FromStr for Device {
    type Err = TransferError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "host" | "cpu" => Ok(Device::Host),
            "cuda" => Ok(Device::Cuda(0)),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(Device::Cuda)
                .ok_or_else(|| TransferError::UnknownDevice(s.to_owned())),
        }
    }
}

/// What the probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaInfo {
    /// Number of CUDA devices.
    pub devices: usize,
    /// Name of device 0.
    pub name: String,
}

/// Whether `libcuda` can be loaded, without calling it.
pub fn driver_present() -> bool {
    // SAFETY: only dlopens the library (and closes it again); no driver
    // function is called.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Checks for the driver library, then asks the driver for its devices.
/// Without `libcuda` this returns [`TransferError::NoDriver`] instead of
/// letting cudarc panic.
pub fn probe() -> Result<CudaInfo, TransferError> {
    if !driver_present() {
        return Err(TransferError::NoDriver);
    }
    let devices = device_count()?;
    if devices == 0 {
        return Err(TransferError::NoDevice {
            ordinal: 0,
            count: 0,
        });
    }
    let ctx = context(0)?;
    let name = ctx.name().map_err(TransferError::driver("device name"))?;
    Ok(CudaInfo { devices, name })
}

/// Devices the driver shows. A driver with none visible
/// (`CUDA_VISIBLE_DEVICES=""`, a container with libcuda mounted and no GPU)
/// answers `cuInit` with CUDA_ERROR_NO_DEVICE: that is 0 devices, not a
/// driver failure.
fn device_count() -> Result<usize, TransferError> {
    match CudaContext::device_count() {
        Ok(n) => Ok(usize::try_from(n).unwrap_or(0)),
        Err(e) if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_NO_DEVICE => Ok(0),
        Err(e) => Err(TransferError::driver("device count")(e)),
    }
}

/// A context on device `ordinal`, after the probe.
pub(crate) fn context(ordinal: usize) -> Result<Arc<CudaContext>, TransferError> {
    if !driver_present() {
        return Err(TransferError::NoDriver);
    }
    let count = device_count()?;
    if ordinal >= count {
        return Err(TransferError::NoDevice { ordinal, count });
    }
    #[allow(clippy::disallowed_methods)] // This is the probe.
    CudaContext::new(ordinal).map_err(TransferError::driver("context"))
}
