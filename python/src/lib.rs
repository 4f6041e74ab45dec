//! `adapt._adapt`: the Rust half of the Python package (`python/adapt` is
//! the other). It exposes a loader built from a pipeline description, batches
//! as numpy arrays over the loader's own buffers (no copy: the array's base
//! object holds the batch, whose buffer returns to the pool when the array is
//! released), checkpoints, ranks from the launcher, the tuner and profiles.
//!
//! It is not the Python API users call (that is `adapt.DataLoader`, in
//! Python, with PyTorch's names and torch conversion) and holds no loader
//! logic: it binds `adapt-pipeline`, `adapt-loader` and `adapt-tune`.
//!
//! The key design choice is that the Python thread that iterates drives the
//! epoch itself (through `adapt_loader::Driver`, a loader owning its current
//! epoch), with the GIL released: no extra thread or hand-off per batch, and
//! without workers the batches are built in that thread, as PyTorch's main
//! process builds them. Waiting re-attaches every 50 ms to run Python's
//! signal handlers, so Ctrl-C ends the epoch promptly and the loader stays
//! usable.

mod dlpack;

use adapt_loader::{
    Batch, Distributed, Driver, Launch, Loader, LoaderConfig, LoaderError, LoaderState,
};
use adapt_pipeline::{Pipeline, PipelineError};
use adapt_tune::MaybeTuned;
use numpy::ndarray::ArrayView4;
use numpy::{PyArray1, PyArray4};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::Mutex;
use std::time::Duration;

create_exception!(
    _adapt,
    AdaptError,
    PyException,
    "Base of every adapt error."
);
create_exception!(
    _adapt,
    ConfigError,
    AdaptError,
    "An impossible configuration or pipeline (names the option or step)."
);
create_exception!(
    _adapt,
    DataError,
    AdaptError,
    "A dataset that cannot be opened (names the file)."
);
create_exception!(
    _adapt,
    SampleError,
    AdaptError,
    "A sample that cannot be read or transformed (names the file or record)."
);
create_exception!(
    _adapt,
    WorkerError,
    AdaptError,
    "A worker panicked or exited."
);
create_exception!(
    _adapt,
    LoaderTimeout,
    AdaptError,
    "A batch did not arrive within the loader's timeout."
);
create_exception!(
    _adapt,
    CheckpointError,
    AdaptError,
    "A damaged checkpoint, or one of another pipeline, seed or dataset."
);

fn loader_error(e: LoaderError) -> PyErr {
    let text = e.to_string();
    match e {
        LoaderError::InvalidConfig(_) => ConfigError::new_err(text),
        LoaderError::SampleFailed { .. } => SampleError::new_err(text),
        LoaderError::WorkerPanicked { .. }
        | LoaderError::WorkersGone { .. }
        | LoaderError::Spawn(_) => WorkerError::new_err(text),
        LoaderError::Timeout { .. } => LoaderTimeout::new_err(text),
        LoaderError::Checkpoint(_) | LoaderError::CheckpointMismatch { .. } => {
            CheckpointError::new_err(text)
        }
        LoaderError::Buffer { .. } => PyMemoryError::new_err(text),
        _ => AdaptError::new_err(text),
    }
}

fn pipeline_error(e: PipelineError) -> PyErr {
    let text = e.to_string();
    match e {
        PipelineError::Format(_) | PipelineError::Pack(_) | PipelineError::MissingPath(_) => {
            DataError::new_err(text)
        }
        _ => ConfigError::new_err(text),
    }
}

/// One batch's data, owned: the base object of the numpy array over it.
#[pyclass(frozen, module = "adapt._adapt")]
struct BatchData {
    batch: Batch,
}

#[pymethods]
impl BatchData {
    /// The images as a numpy array over the batch buffer (no copy):
    /// float32 `[B, C, H, W]`, or uint8 `[B, C, H, W]` / `[B, H, W, C]`.
    fn array<'py>(slf: Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let batch = &slf.get().batch;
        let dims = batch.shape();
        let dims = (dims[0], dims[1], dims[2], dims[3]);
        let bad = |e: numpy::ndarray::ShapeError| AdaptError::new_err(format!("batch shape: {e}"));
        let owner = slf.clone().into_any();
        // SAFETY: the array's memory is the batch buffer owned by `slf`,
        // which becomes the array's base object: it lives as long as the
        // array, and a frozen BatchData never changes or moves its buffer.
        match (batch.f32s(), batch.u8s()) {
            (Some(values), _) => {
                let view = ArrayView4::from_shape(dims, values).map_err(bad)?;
                Ok(unsafe { PyArray4::borrow_from_array(&view, owner) }.into_any())
            }
            (None, Some(values)) => {
                let view = ArrayView4::from_shape(dims, values).map_err(bad)?;
                Ok(unsafe { PyArray4::borrow_from_array(&view, owner) }.into_any())
            }
            (None, None) => Err(AdaptError::new_err("a batch whose buffer cannot be viewed")),
        }
    }

    /// DLPack export (CPU, compact NCHW/NHWC): the consumer's tensor reads
    /// the batch buffer, which stays alive until the consumer releases it.
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        slf: Bound<'_, Self>,
        stream: Option<Bound<'_, PyAny>>,
        max_version: Option<Bound<'_, PyAny>>,
        dl_device: Option<Bound<'_, PyAny>>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        let _ = (stream, max_version, dl_device);
        if copy == Some(true) {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "adapt batches export without a copy (copy=True refused)",
            ));
        }
        let py = slf.py();
        let batch = &slf.get().batch;
        let (ptr, shape, float) = (
            batch.bytes().as_ptr(),
            batch.shape(),
            batch.f32s().is_some(),
        );
        dlpack::export(py, slf.clone().into_any().unbind(), ptr, shape, float)
    }

    /// The device of a DLPack export: the CPU (kDLCPU = 1, device 0).
    fn __dlpack_device__(&self) -> (i32, i32) {
        (1, 0)
    }

    /// Dataset indices of the batch's samples.
    fn indices(&self) -> Vec<usize> {
        self.batch.indices().to_vec()
    }

    /// Address of the batch buffer (to check that no copy was made).
    fn address(&self) -> usize {
        self.batch.bytes().as_ptr() as usize
    }
}

/// A loader over a pipeline, driven from the Python thread that iterates
/// it (as PyTorch's main process drives its DataLoader): without workers
/// the batches are built here, with the GIL released.
#[pyclass(module = "adapt._adapt")]
struct RawLoader {
    /// `None` once closed.
    driver: Mutex<Option<MaybeTuned>>,
    batches_per_epoch: usize,
    info: Py<PyDict>,
    /// With autotune: the profile to save the settled knobs to, and the
    /// key's parts.
    autotune_profile: Option<(std::path::PathBuf, String, usize)>,
    saved: bool,
}

impl RawLoader {
    fn drive(&mut self) -> PyResult<&mut MaybeTuned> {
        self.driver
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .ok_or_else(|| AdaptError::new_err("the loader is closed"))
    }
    fn driver(&mut self) -> PyResult<&mut Driver> {
        Ok(self.drive()?.driver())
    }
}

/// Runs `f` without the GIL, giving it a check that re-attaches every
/// [`adapt_loader::POLL`] of waiting to run Python's signal handlers: a
/// KeyboardInterrupt they raise is returned beside `f`'s result.
fn detached<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(&mut dyn FnMut() -> bool) -> T + Send,
) -> (T, Option<PyErr>) {
    let mut raised = None;
    let out = py.detach(|| {
        let mut interrupt = || match Python::attach(|py| py.check_signals()) {
            Ok(()) => false,
            Err(e) => {
                raised = Some(e);
                true
            }
        };
        f(&mut interrupt)
    });
    (out, raised)
}

#[pymethods]
impl RawLoader {
    /// A loader over the pipeline `pipeline_json` (adapt_pipeline::Pipeline
    /// as JSON) with PyTorch's knobs. Every impossible value is refused
    /// here, as PyTorch refuses it.
    #[new]
    #[pyo3(signature = (pipeline_json, batch_size, shuffle, num_workers, prefetch_factor, pin_memory, persistent_workers, drop_last, seed, rank, world_size, timeout, stream=None, autotune=false, autotune_profile=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        pipeline_json: &str,
        batch_size: usize,
        shuffle: bool,
        num_workers: usize,
        prefetch_factor: Option<usize>,
        pin_memory: bool,
        persistent_workers: bool,
        drop_last: bool,
        seed: u64,
        rank: Option<usize>,
        world_size: Option<usize>,
        timeout: Option<f64>,
        stream: Option<usize>,
        autotune: bool,
        autotune_profile: Option<std::path::PathBuf>,
    ) -> PyResult<Self> {
        let pipeline = Pipeline::from_json(pipeline_json).map_err(pipeline_error)?;
        let timeout = match timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                return Err(ConfigError::new_err(format!(
                    "timeout {t} must be a positive number of seconds"
                )));
            }
            t => t.map(Duration::from_secs_f64),
        };
        let distributed = match (rank, world_size) {
            (Some(rank), Some(world_size)) => Some(Distributed { rank, world_size }),
            (None, None) => None,
            _ => return Err(ConfigError::new_err("rank and world_size go together")),
        };
        let (loader, batches, info) = py.detach(|| -> PyResult<_> {
            let built = pipeline.build().map_err(pipeline_error)?;
            let sampler = built
                .opened
                .pack_sampler(stream, seed, num_workers, prefetch_factor, batch_size)
                .map_err(pipeline_error)?;
            let config = built.loader_config(LoaderConfig {
                batch_size,
                shuffle,
                num_workers,
                prefetch_factor,
                pin_memory,
                persistent_workers,
                drop_last,
                seed,
                distributed,
                timeout,
                sampler,
                ..LoaderConfig::default()
            });
            // Page-locked buffers when a CUDA device is there; otherwise
            // pinned means ordinary memory, as on the host backend.
            let engine = pin_memory
                .then(|| adapt_transfer::TransferEngine::new(adapt_transfer::Device::Cuda(0)).ok())
                .flatten();
            let pinned = engine
                .as_ref()
                .and_then(|e| e.pinned_buffers(config.max_in_flight() + 2));
            let loader =
                Loader::with_buffers(built.dataset(), config, pinned).map_err(loader_error)?;
            let batches = loader.batches_per_epoch();
            let shape = loader.sample_shape();
            Ok((
                loader,
                batches,
                (
                    built.identity(),
                    built.device_normalize.clone(),
                    [shape.height, shape.width, shape.channels],
                    built.output.name(),
                    engine.is_some() && pin_memory,
                    built.transforms_text(),
                ),
            ))
        })?;
        let dict = PyDict::new(py);
        dict.set_item("identity", &info.0)?;
        dict.set_item("device_normalize", info.1)?;
        dict.set_item("sample_shape", info.2)?;
        dict.set_item("output", info.3)?;
        dict.set_item("page_locked", info.4)?;
        dict.set_item("transforms", info.5)?;
        let machine = adapt_tune::Machine::detect();
        let identity = info.0;
        let start = match &autotune_profile {
            Some(p) => adapt_tune::Profile::load(p)
                .map_err(|e| ConfigError::new_err(e.to_string()))?
                .lookup(&identity, batch_size, &machine)
                .map(|e| e.knobs),
            None => None,
        };
        let drive = if autotune {
            let auto = py
                .detach(|| {
                    adapt_tune::AutotunedDriver::new(Driver::new(loader), &machine, start, 8, 2)
                })
                .map_err(loader_error)?;
            MaybeTuned::Tuned(auto)
        } else {
            MaybeTuned::Fixed(Driver::new(loader))
        };
        Ok(Self {
            driver: Mutex::new(Some(drive)),
            batches_per_epoch: batches,
            info: dict.unbind(),
            autotune_profile: autotune_profile.map(|p| (p, identity, batch_size)),
            saved: false,
        })
    }

    /// With autotune: (settled knobs or None, [(knobs, mean wait seconds)]
    /// tried, current (num_workers, prefetch_factor)).
    #[allow(clippy::type_complexity)]
    fn autotune_status(
        &mut self,
    ) -> PyResult<
        Option<(
            Option<(usize, usize)>,
            Vec<((usize, usize), f64)>,
            (usize, usize),
        )>,
    > {
        Ok(match self.drive()?.tuned() {
            None => None,
            Some(a) => {
                let t = a.tuner();
                let pair = |k: &adapt_tune::Knobs| (k.num_workers, k.prefetch_factor);
                Some((
                    t.settled().as_ref().map(pair),
                    t.tried().iter().map(|(k, w)| (pair(k), *w)).collect(),
                    pair(&t.knobs()),
                ))
            }
        })
    }

    /// Starts epoch `epoch`; returns its number of batches.
    fn start(&mut self, py: Python<'_>, epoch: u64) -> PyResult<usize> {
        let driver = self.driver()?;
        // Starting an epoch may join the last one's workers: no GIL.
        py.detach(|| driver.start(epoch)).map_err(loader_error)
    }

    /// Resumes from a checkpoint's text; returns (epoch, batches left).
    fn resume(&mut self, py: Python<'_>, state: &str) -> PyResult<(u64, usize)> {
        let state = LoaderState::from_text(state).map_err(loader_error)?;
        let driver = self.driver()?;
        let left = py.detach(|| driver.resume(&state)).map_err(loader_error)?;
        Ok((state.epoch, left))
    }

    /// The next batch of the epoch: (data, labels), or None at the end of
    /// the epoch. Ctrl-C while waiting ends the epoch with KeyboardInterrupt;
    /// the loader can start another.
    #[allow(clippy::type_complexity)]
    fn next<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, BatchData>, Bound<'py, PyArray1<i64>>)>> {
        let drive = self.drive()?;
        let (item, raised) = detached(py, |interrupt| drive.next(interrupt));
        let settled = drive.tuned().and_then(|a| a.tuner().settled());
        if let (Some(k), Some((path, identity, batch)), false) =
            (settled, &self.autotune_profile, self.saved)
        {
            let mut p =
                adapt_tune::Profile::load(path).map_err(|e| AdaptError::new_err(e.to_string()))?;
            p.insert_settled(identity, *batch, &adapt_tune::Machine::detect(), k);
            p.save(path)
                .map_err(|e| AdaptError::new_err(e.to_string()))?;
            self.saved = true;
        }
        match item {
            None => Ok(None),
            Some(Err(LoaderError::Interrupted { .. })) => Err(raised
                .unwrap_or_else(|| pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"))),
            Some(Err(e)) => Err(loader_error(e)),
            Some(Ok(batch)) => {
                let labels = PyArray1::from_slice(py, batch.labels());
                let data = Bound::new(py, BatchData { batch })?;
                Ok(Some((data, labels)))
            }
        }
    }

    /// The checkpoint after the last batch handed out (None without an epoch).
    fn state(&mut self) -> PyResult<Option<String>> {
        Ok(self.driver()?.state().as_ref().map(LoaderState::to_text))
    }

    /// Batches per epoch for this rank.
    fn batches_per_epoch(&self) -> usize {
        self.batches_per_epoch
    }

    /// What the loader was built with: identity, sample shape, output…
    fn info(&self, py: Python<'_>) -> Py<PyDict> {
        self.info.clone_ref(py)
    }

    /// Stops the loader now: its epoch ends, its workers are joined.
    fn close(&mut self, py: Python<'_>) {
        let driver = self
            .driver
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        py.detach(|| drop(driver));
    }
}

/// The launcher's rank and world size: `(rank, world_size, local_rank,
/// local_world_size, launcher)` from torchrun's or Slurm's variables, or
/// None when neither is set.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn launch_from_env() -> PyResult<Option<(usize, usize, Option<usize>, Option<usize>, &'static str)>>
{
    Ok(Launch::from_env().map_err(loader_error)?.map(|l| {
        (
            l.distributed.rank,
            l.distributed.world_size,
            l.local_rank,
            l.local_world_size,
            l.launcher,
        )
    }))
}

/// Checks a transform text; returns its canonical form.
#[pyfunction]
fn parse_transform(text: &str) -> PyResult<String> {
    adapt_pipeline::parse_transforms(text)
        .map(|t| adapt_pipeline::transforms_text(&t))
        .map_err(pipeline_error)
}

/// Runs the tuner on a pipeline (its dataset, steps and output) and returns
/// the report as JSON text.
#[pyfunction]
#[pyo3(signature = (pipeline_json, batch_sizes, strategy="avl", profile=None, retune=false, budget_bytes=None, trial_samples=16384, final_repeats=5, plain=false, seed=0, trial_seconds=Some(1.0), noise_repeats=5, step_ms=None))]
#[allow(clippy::too_many_arguments)]
fn tune(
    py: Python<'_>,
    pipeline_json: &str,
    batch_sizes: Vec<usize>,
    strategy: &str,
    profile: Option<std::path::PathBuf>,
    retune: bool,
    budget_bytes: Option<u64>,
    trial_samples: usize,
    final_repeats: usize,
    plain: bool,
    seed: u64,
    trial_seconds: Option<f64>,
    noise_repeats: usize,
    step_ms: Option<f64>,
) -> PyResult<String> {
    let step = match step_ms {
        Some(ms) if ms.is_finite() && ms >= 0.0 => {
            Some(std::time::Duration::from_secs_f64(ms / 1e3))
        }
        Some(ms) => {
            return Err(ConfigError::new_err(format!(
                "step_ms {ms} must be a non-negative number"
            )));
        }
        None => None,
    };
    let pipeline = Pipeline::from_json(pipeline_json).map_err(pipeline_error)?;
    let strategy = match strategy {
        "avl" => adapt_tune::Strategy::Avl,
        "grid" => adapt_tune::Strategy::Grid,
        "both" => adapt_tune::Strategy::Both,
        other => {
            return Err(ConfigError::new_err(format!(
                "strategy {other:?}: expected avl, grid or both"
            )));
        }
    };
    let defaults = adapt_tune::TuneOptions::default();
    let options = adapt_tune::TuneOptions {
        dataset: adapt_tune::DatasetChoice::Named {
            kind: pipeline.dataset.kind.clone(),
            path: pipeline.dataset.path.clone(),
        },
        batch_sizes,
        strategy,
        budget_bytes,
        trial: adapt_tune::TrialSpec {
            samples: trial_samples,
            seed,
            ..adapt_tune::TrialSpec::default()
        },
        avl: if plain {
            adapt_search::AvlOptions::plain()
        } else {
            defaults.avl
        },
        final_repeats,
        profile,
        retune,
        resize: pipeline.dataset.resize,
        transforms: pipeline.transforms.clone(),
        output: pipeline.output,
        exact_decode: pipeline.exact_decode,
        trial_seconds: trial_seconds.filter(|t| *t > 0.0),
        noise_repeats,
        step,
        ..defaults
    };
    let report = py
        .detach(|| adapt_tune::run(&options, &|_| {}))
        .map_err(|e| ConfigError::new_err(e.to_string()))?;
    serde_json::to_string(&report).map_err(|e| AdaptError::new_err(e.to_string()))
}

/// The knobs a profile holds for this pipeline and batch size on this
/// machine, or None.
#[pyfunction]
fn profile_knobs(
    py: Python<'_>,
    path: std::path::PathBuf,
    pipeline_json: &str,
    batch_size: usize,
) -> PyResult<Option<Py<PyDict>>> {
    let pipeline = Pipeline::from_json(pipeline_json).map_err(pipeline_error)?;
    let built = pipeline.build().map_err(pipeline_error)?;
    let profile =
        adapt_tune::Profile::load(&path).map_err(|e| ConfigError::new_err(e.to_string()))?;
    let machine = adapt_tune::Machine::detect();
    let Some(entry) = profile.lookup(&built.identity(), batch_size, &machine) else {
        return Ok(None);
    };
    let k = entry.knobs;
    let d = PyDict::new(py);
    d.set_item("num_workers", k.num_workers)?;
    d.set_item(
        "prefetch_factor",
        (k.num_workers > 0).then_some(k.prefetch_factor),
    )?;
    d.set_item("pin_memory", k.pin_memory)?;
    d.set_item("persistent_workers", k.persistent_workers)?;
    Ok(Some(d.unbind()))
}

#[pymodule]
fn _adapt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<RawLoader>()?;
    m.add_class::<BatchData>()?;
    m.add_function(wrap_pyfunction!(launch_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(parse_transform, m)?)?;
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(profile_knobs, m)?)?;
    m.add("AdaptError", py.get_type::<AdaptError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("SampleError", py.get_type::<SampleError>())?;
    m.add("WorkerError", py.get_type::<WorkerError>())?;
    m.add("LoaderTimeout", py.get_type::<LoaderTimeout>())?;
    m.add("CheckpointError", py.get_type::<CheckpointError>())?;
    Ok(())
}
