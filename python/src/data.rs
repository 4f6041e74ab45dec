//! adapt's datasets as data for Python: `Data` binds `adapt::Data`, so
//! `len(ds)`, `ds[i]`, `ds.targets` and `ds.classes` come from the same
//! readers the loader uses.

use crate::{pipeline, py_error};
use numpy::PyArray3;
use numpy::ndarray::Array3;
use pyo3::exceptions::PyIndexError;
use pyo3::prelude::*;

/// An opened adapt dataset (from a pipeline description's dataset).
#[pyclass(frozen, module = "adapt._adapt")]
pub(crate) struct Data(adapt::Data);

#[pymethods]
impl Data {
    #[new]
    fn new(py: Python<'_>, pipeline_json: &str) -> PyResult<Self> {
        let p = pipeline(pipeline_json)?;
        py.detach(|| adapt::Data::open(&p.dataset))
            .map(Self)
            .map_err(py_error)
    }

    fn __len__(&self) -> usize {
        self.0.len()
    }

    /// Sample `index` as (HWC u8 array, label).
    fn get<'py>(&self, py: Python<'py>, index: usize) -> PyResult<(Bound<'py, PyArray3<u8>>, i64)> {
        if index >= self.0.len() {
            return Err(PyIndexError::new_err(format!(
                "index {index} is out of range for a dataset of {}",
                self.0.len()
            )));
        }
        let s = py.detach(|| self.0.sample(index)).map_err(py_error)?;
        let shape = s.shape;
        let dims = (
            shape.height as usize,
            shape.width as usize,
            shape.channels as usize,
        );
        let pixels = s.hwc_bytes().into_owned();
        let array = Array3::from_shape_vec(dims, pixels)
            .map_err(|e| PyIndexError::new_err(format!("sample {index}: {e}")))?;
        Ok((PyArray3::from_owned_array(py, array), s.label))
    }

    /// Every sample's label, in order.
    fn labels(&self, py: Python<'_>) -> PyResult<Vec<i64>> {
        py.detach(|| self.0.labels()).map_err(py_error)
    }

    /// Class names in label order, or None.
    fn classes(&self) -> Option<Vec<String>> {
        self.0.classes().map(<[String]>::to_vec)
    }

    /// Where sample `index` comes from (file and record).
    fn source(&self, index: usize) -> String {
        self.0.source(index)
    }

    /// The texts (captions) of samples `indices`, in order, or None when
    /// the dataset was opened without a text field.
    fn texts(&self, py: Python<'_>, indices: Vec<usize>) -> PyResult<Option<Vec<String>>> {
        py.detach(|| self.0.texts(&indices)).map_err(py_error)
    }
}
