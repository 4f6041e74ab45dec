//! DLPack export of a batch (the legacy, unversioned `dltensor` capsule that
//! every consumer reads: `numpy.from_dlpack`, `torch.from_dlpack`): the
//! consumer's tensor points at the batch buffer itself, and the batch lives
//! until the consumer calls the deleter.

use pyo3::prelude::*;
use std::ffi::{CStr, c_void};

#[repr(C)]
struct DLDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DLDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DLTensor {
    data: *mut c_void,
    device: DLDevice,
    ndim: i32,
    dtype: DLDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DLManagedTensor {
    dl_tensor: DLTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

/// What a managed tensor keeps alive: the batch's Python owner and the
/// shape the tensor points at.
struct Context {
    _owner: Py<PyAny>,
    shape: [i64; 4],
}

const NAME: &CStr = c"dltensor";
/// kDLCPU, kDLFloat, kDLUInt.
const CPU: i32 = 1;
const FLOAT: u8 = 2;
const UINT: u8 = 1;

unsafe extern "C" fn delete(tensor: *mut DLManagedTensor) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` and its context were leaked from boxes by `export`
    // and are reclaimed exactly once, here (the consumer calls the deleter
    // once; the capsule calls it only when no consumer took the tensor).
    unsafe {
        let tensor = Box::from_raw(tensor);
        drop(Box::from_raw(tensor.manager_ctx.cast::<Context>()));
    }
}

unsafe extern "C" fn capsule_destructor(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule; a capsule still named
    // "dltensor" was never consumed, so its tensor is ours to free (a
    // consumer renames it "used_dltensor" and owns the deleter call).
    unsafe {
        // IsValid sets no exception for a renamed (consumed) capsule.
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let ptr = pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr());
            delete(ptr.cast::<DLManagedTensor>());
        }
    }
}

/// A `dltensor` capsule over `data` (a batch's values, `shape`, f32 or u8),
/// keeping `owner` alive until the consumer is done.
pub(crate) fn export(
    py: Python<'_>,
    owner: Py<PyAny>,
    data: *const u8,
    shape: [usize; 4],
    float: bool,
) -> PyResult<Py<PyAny>> {
    let ctx = Box::new(Context {
        _owner: owner,
        shape: shape.map(|d| d as i64),
    });
    let ctx = Box::into_raw(ctx);
    let tensor = Box::new(DLManagedTensor {
        dl_tensor: DLTensor {
            data: data.cast_mut().cast::<c_void>(),
            device: DLDevice {
                device_type: CPU,
                device_id: 0,
            },
            ndim: 4,
            dtype: DLDataType {
                code: if float { FLOAT } else { UINT },
                bits: if float { 32 } else { 8 },
                lanes: 1,
            },
            // SAFETY: `ctx` is the live box just leaked; the shape lives in it.
            shape: unsafe { (*ctx).shape.as_mut_ptr() },
            // Compact row-major.
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: ctx.cast::<c_void>(),
        deleter: Some(delete),
    });
    let tensor = Box::into_raw(tensor);
    // SAFETY: a capsule over the leaked tensor, freed by its destructor
    // unless a consumer takes it; the name is a static C string.
    let capsule = unsafe {
        pyo3::ffi::PyCapsule_New(
            tensor.cast::<c_void>(),
            NAME.as_ptr(),
            Some(capsule_destructor),
        )
    };
    if capsule.is_null() {
        // SAFETY: the capsule was not made: the tensor is still ours.
        unsafe { delete(tensor) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference returned by PyCapsule_New.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}
