//! adapt's Rust steps over a Python dataset's samples: `Steps` binds
//! `adapt::SampleSteps`, so a worker hands each u8 image it read to the
//! same steps and collation the Rust loader runs, written straight into the
//! sample's row of the pooled batch buffer, without the GIL.

use crate::py_error;
use adapt::{Layout, SampleSteps, SampleView, Shape, StepScratch};
use numpy::{PyReadonlyArrayDyn, PyReadwriteArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::cell::RefCell;

thread_local! {
    static SCRATCH: RefCell<StepScratch> = RefCell::new(StepScratch::default());
}

/// The steps of a transform text for samples of (height, width, channels)
/// (height and width 0: sizes differ, a step fixes it).
#[pyclass(frozen, module = "adapt._adapt")]
pub(crate) struct Steps(SampleSteps);

#[pymethods]
impl Steps {
    #[new]
    fn new(text: &str, output: &str, height: u32, width: u32, channels: u32) -> PyResult<Self> {
        SampleSteps::new(text, output, Shape::new(height, width, channels))
            .map(Self)
            .map_err(py_error)
    }

    /// (height, width, channels) of a sample after the steps.
    #[getter]
    fn shape(&self) -> (u32, u32, u32) {
        let s = self.0.shape();
        (s.height, s.width, s.channels)
    }

    /// Bytes one sample takes in a batch.
    #[getter]
    fn sample_bytes(&self) -> usize {
        self.0.sample_bytes()
    }

    /// Runs the steps on `image` (u8, C-contiguous, HWC or, with `planar`,
    /// CHW), seeded from `draw` = (seed, epoch, key), and writes the sample
    /// into `out[offset:offset + sample_bytes]`.
    fn write(
        &self,
        py: Python<'_>,
        image: PyReadonlyArrayDyn<'_, u8>,
        planar: bool,
        draw: (u64, u64, u64),
        mut out: PyReadwriteArray1<'_, u8>,
        offset: usize,
    ) -> PyResult<()> {
        let dims = image.shape().to_vec();
        let shape = match (planar, dims.as_slice()) {
            (false, &[h, w, c]) => Shape::new(h as u32, w as u32, c as u32),
            (false, &[h, w]) => Shape::new(h as u32, w as u32, 1),
            (true, &[c, h, w]) => Shape::new(h as u32, w as u32, c as u32),
            _ => {
                return Err(PyValueError::new_err(format!(
                    "an image of shape {dims:?}: expected HWC (or HW) u8, or CHW for a torch tensor"
                )));
            }
        };
        let pixels = image
            .as_slice()
            .map_err(|_| PyValueError::new_err("the image is not contiguous"))?;
        let n = self.0.sample_bytes();
        let out = out
            .as_slice_mut()
            .map_err(|_| PyValueError::new_err("the batch buffer is not contiguous"))?;
        let Some(dst) = out.get_mut(offset..offset + n) else {
            return Err(PyValueError::new_err(format!(
                "the batch buffer has no {n} bytes at {offset}"
            )));
        };
        let steps = &self.0;
        py.detach(|| {
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                let layout = if planar {
                    Layout::Planar
                } else {
                    Layout::Interleaved
                };
                let view = SampleView {
                    pixels,
                    shape,
                    layout,
                    label: 0,
                };
                steps.write(view, draw, dst, &mut s)
            })
        })
        .map_err(py_error)
    }
}
