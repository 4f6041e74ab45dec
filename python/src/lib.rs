//! `adapt._adapt`: the Rust half of the Python package (`python/adapt` is
//! the other). It exposes a loader built from a pipeline description, batches
//! as numpy arrays over the loader's own buffers (no copy: the array's base
//! object holds the batch, whose buffer returns to the pool when the array is
//! released), checkpoints, ranks from the launcher, the tuner and profiles.
//!
//! It is not the Python API users call (that is `adapt.DataLoader`, in
//! Python, with PyTorch's names and torch conversion) and holds no loader
//! logic: it binds the front crate `adapt` (`RawLoader` is `adapt::Run`
//! method for method; `tune` is `adapt::tune`), and picks each exception
//! class from the error's `adapt::ErrorKind`.
//!
//! The key design choice is that the Python thread that iterates drives the
//! epoch itself (through `adapt_loader::Feed`, a loader owning its current
//! epoch), with the GIL released: no extra thread or hand-off per batch, and
//! without workers the batches are built in that thread, as PyTorch's main
//! process builds them. Waiting re-attaches every 50 ms to run Python's
//! signal handlers, so Ctrl-C ends the epoch promptly and the loader stays
//! usable.

mod data;
mod dlpack;
mod plan;
mod steps;
mod tune;

use adapt::{
    AdaptError as Error, Batch, Distributed, ErrorKind, LoaderState, Pipeline, Run, RunOptions,
};
use numpy::ndarray::ArrayView4;
use numpy::{PyArray1, PyArray4};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyMemoryError, PyRuntimeError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Mutex, MutexGuard, TryLockError};
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

/// The exception for an error: its class follows the error's kind.
fn py_error(e: Error) -> PyErr {
    let text = e.to_string();
    match e.kind() {
        ErrorKind::Config => ConfigError::new_err(text),
        ErrorKind::Data => DataError::new_err(text),
        ErrorKind::Sample => SampleError::new_err(text),
        ErrorKind::Worker => WorkerError::new_err(text),
        ErrorKind::Timeout => LoaderTimeout::new_err(text),
        ErrorKind::Checkpoint => CheckpointError::new_err(text),
        ErrorKind::Memory => PyMemoryError::new_err(text),
        ErrorKind::Interrupted => pyo3::exceptions::PyKeyboardInterrupt::new_err(text),
        _ => AdaptError::new_err(text),
    }
}

fn pipeline(json: &str) -> PyResult<Pipeline> {
    Pipeline::from_json(json).map_err(|e| py_error(e.into()))
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
///
/// One call at a time: a second thread using it while one iterates is
/// refused by name, never blocked or interleaved. A forked child's copy is
/// refused (the loader's threads exist only in the process that opened
/// it) and, when collected there, left alone rather than joined.
#[pyclass(frozen, module = "adapt._adapt")]
struct RawLoader {
    /// `None` once closed.
    run: Mutex<Option<Run>>,
    /// The process that opened it.
    pid: u32,
    info: Py<PyDict>,
}

impl RawLoader {
    /// The loader's run for one call, refusing a forked child, a second
    /// thread and a closed loader, each by name.
    fn lock(&self) -> PyResult<MutexGuard<'_, Option<Run>>> {
        let here = std::process::id();
        if here != self.pid {
            return Err(PyRuntimeError::new_err(format!(
                "this adapt.DataLoader was created in process {} and is used in process {here}, \
                 a fork of it: its threads do not exist here; create the loader in the child, \
                 or start children with multiprocessing's 'spawn' or 'forkserver'",
                self.pid
            )));
        }
        match self.run.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "this adapt.DataLoader is in use by another thread: iterate a loader from one \
                 thread at a time (give each thread its own DataLoader)",
            )),
        }
    }

    /// `f` on the open run (see [`RawLoader::lock`]).
    fn with_run<T>(&self, f: impl FnOnce(&mut Run) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self.lock()?;
        let run = guard
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this adapt.DataLoader was closed"))?;
        f(run)
    }
}

impl Drop for RawLoader {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            // A forked child's copy: its threads were never here, and
            // joining them would wait for ever. Leave it to the exit.
            let run = self.run.get_mut().unwrap_or_else(|p| p.into_inner()).take();
            std::mem::forget(run);
        }
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

/// The loader's options as `adapt.DataLoader` passes them: one object,
/// by name (an unknown or mistyped name is refused naming it).
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct LoaderOptions {
    batch_size: usize,
    shuffle: bool,
    /// PyTorch's four knobs, by their names (adapt::LoaderKnobs).
    knobs: adapt::LoaderKnobs,
    drop_last: bool,
    seed: u64,
    rank: Option<usize>,
    world_size: Option<usize>,
    timeout: Option<f64>,
    #[serde(default)]
    stream: Option<usize>,
    #[serde(default)]
    autotune: bool,
    #[serde(default)]
    autotune_profile: Option<std::path::PathBuf>,
    #[serde(default)]
    interleave: Option<usize>,
    #[serde(default = "yes")]
    stage_timing: bool,
}

fn yes() -> bool {
    true
}

impl LoaderOptions {
    /// The front's options, the timeout and the rank checked.
    fn run_options(self) -> PyResult<RunOptions> {
        let timeout = match self.timeout {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                return Err(ConfigError::new_err(format!(
                    "timeout {t} must be a positive number of seconds"
                )));
            }
            t => t.map(Duration::from_secs_f64),
        };
        let distributed = match (self.rank, self.world_size) {
            (Some(rank), Some(world_size)) => Some(Distributed { rank, world_size }),
            (None, None) => None,
            _ => return Err(ConfigError::new_err("rank and world_size go together")),
        };
        Ok(RunOptions {
            batch_size: self.batch_size,
            shuffle: self.shuffle,
            knobs: self.knobs,
            drop_last: self.drop_last,
            seed: self.seed,
            distributed,
            timeout,
            stream: self.stream,
            interleave: self.interleave,
            autotune: self.autotune.then(|| adapt::Autotune {
                profile: self.autotune_profile,
                ..adapt::Autotune::default()
            }),
            stage_timing: self.stage_timing && RunOptions::default().stage_timing,
            ..RunOptions::default()
        })
    }
}

#[pymethods]
impl RawLoader {
    /// A loader over the pipeline `pipeline_json` (adapt::Pipeline as
    /// JSON) with the loader options `options_json` ([`LoaderOptions`] as
    /// JSON: PyTorch's knob names). Every impossible value is refused here,
    /// as PyTorch refuses it.
    #[new]
    fn new(py: Python<'_>, pipeline_json: &str, options_json: &str) -> PyResult<Self> {
        let pipeline = pipeline(pipeline_json)?;
        let options = serde_json::from_str::<LoaderOptions>(options_json)
            .map_err(|e| ConfigError::new_err(format!("loader options: {e}")))?
            .run_options()?;
        let run = py
            .detach(|| Run::open(&pipeline, &options))
            .map_err(py_error)?;
        let i = run.info();
        let dict = PyDict::new(py);
        dict.set_item("identity", &i.identity)?;
        dict.set_item("device_normalize", i.device_normalize.clone())?;
        dict.set_item("sample_shape", i.sample_shape)?;
        dict.set_item("output", i.output)?;
        dict.set_item("page_locked", i.page_locked)?;
        dict.set_item("transforms", &i.transforms)?;
        Ok(Self {
            run: Mutex::new(Some(run)),
            pid: std::process::id(),
            info: dict.unbind(),
        })
    }

    /// With autotune: (settled knobs or None, [(knobs, mean wait seconds)]
    /// tried, current (num_workers, prefetch_factor)).
    #[allow(clippy::type_complexity)]
    fn autotune_status(
        &self,
    ) -> PyResult<
        Option<(
            Option<(usize, Option<usize>)>,
            Vec<((usize, Option<usize>), f64)>,
            (usize, Option<usize>),
        )>,
    > {
        self.with_run(|run| {
            Ok(run.autotune().map(|a| {
                let t = a.tuner();
                let pair = |k: &adapt::LoaderKnobs| (k.num_workers, k.prefetch_factor);
                (
                    t.settled().as_ref().map(pair),
                    t.tried().iter().map(|(k, w)| (pair(k), *w)).collect(),
                    pair(&t.knobs()),
                )
            }))
        })
    }

    /// Starts epoch `epoch`; returns its number of batches.
    fn start(&self, py: Python<'_>, epoch: u64) -> PyResult<usize> {
        // Starting an epoch may join the last one's workers: no GIL.
        self.with_run(|run| py.detach(|| run.start(epoch)).map_err(py_error))
    }

    /// Refuses, now, a checkpoint this loader cannot resume (another
    /// pipeline, dataset, seed or batching), as `resume` would; returns
    /// the checkpoint's epoch.
    fn check_state(&self, state: &str) -> PyResult<u64> {
        let state = LoaderState::from_text(state).map_err(|e| py_error(e.into()))?;
        self.with_run(|run| run.check_resumable(&state).map_err(py_error))?;
        Ok(state.epoch)
    }

    /// Resumes from a checkpoint's text; returns (epoch, batches left).
    fn resume(&self, py: Python<'_>, state: &str) -> PyResult<(u64, usize)> {
        let state = LoaderState::from_text(state).map_err(|e| py_error(e.into()))?;
        let left = self.with_run(|run| py.detach(|| run.resume(&state)).map_err(py_error))?;
        Ok((state.epoch, left))
    }

    /// The next batch of the epoch: (data, labels), or None at the end of
    /// the epoch. Ctrl-C while waiting ends the epoch with KeyboardInterrupt;
    /// the loader can start another.
    #[allow(clippy::type_complexity)]
    fn next<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(Bound<'py, BatchData>, Bound<'py, PyArray1<i64>>)>> {
        let (item, raised) =
            self.with_run(|run| Ok(detached(py, |interrupt| run.next(interrupt))))?;
        match item {
            None => Ok(None),
            Some(Err(e)) if e.kind() == ErrorKind::Interrupted => Err(raised
                .unwrap_or_else(|| pyo3::exceptions::PyKeyboardInterrupt::new_err("interrupted"))),
            Some(Err(e)) => Err(py_error(e)),
            Some(Ok(batch)) => {
                let labels = PyArray1::from_slice(py, batch.labels());
                let data = Bound::new(py, BatchData { batch })?;
                Ok(Some((data, labels)))
            }
        }
    }

    /// The checkpoint after the last batch handed out (None without an epoch).
    fn state(&self) -> PyResult<Option<String>> {
        self.with_run(|run| Ok(run.state().as_ref().map(LoaderState::to_text)))
    }

    /// Where the current (or just finished) epoch's time went, as the JSON
    /// text `load --stages` prints; None without an epoch or with stage
    /// timing off.
    fn stats(&self) -> PyResult<Option<String>> {
        self.with_run(|run| Ok(run.stages().map(|r| r.to_json().to_string())))
    }

    /// This rank's sample indices of epoch `epoch`, in the order its
    /// batches hold them.
    fn epoch_indices(&self, py: Python<'_>, epoch: u64) -> PyResult<Vec<usize>> {
        let plan = self.with_run(|run| run.plan().map_err(py_error))?;
        Ok(py.detach(|| plan.epoch(epoch).order))
    }

    /// Batches per epoch for this rank.
    fn batches_per_epoch(&self) -> PyResult<usize> {
        self.with_run(|run| Ok(run.info().batches_per_epoch))
    }

    /// What the loader was built with: identity, sample shape, output…
    fn info(&self, py: Python<'_>) -> Py<PyDict> {
        self.info.clone_ref(py)
    }

    /// Stops the loader now: its epoch ends, its workers are joined.
    /// Closing a closed loader does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let run = self.lock()?.take();
        py.detach(|| drop(run));
        Ok(())
    }
}

/// The stage report of the Python loader's own measurements, as JSON
/// text: seconds per named stage, the epoch's seconds, the workers'
/// (busy seconds, samples), the consumer's wait.
#[pyfunction]
fn stage_report(
    stages: Vec<(String, f64)>,
    seconds: f64,
    num_workers: usize,
    workers: Vec<(f64, u64)>,
    wait_seconds: f64,
) -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    adapt::StageReport::from_parts(stages, seconds, num_workers, workers, wait_seconds, cores)
        .to_json()
        .to_string()
}

/// The launcher's rank and world size: `(rank, world_size, local_rank,
/// local_world_size, launcher)` from torchrun's or Slurm's variables, or
/// None when neither is set.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn launch_from_env() -> PyResult<Option<(usize, usize, Option<usize>, Option<usize>, &'static str)>>
{
    Ok(adapt::Launch::from_env()
        .map_err(|e| py_error(e.into()))?
        .map(|l| {
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
    adapt::parse_transforms(text)
        .map(|t| adapt::transforms_text(&t))
        .map_err(|e| py_error(e.into()))
}

/// The command line (`python -m adapt`, the `adapt` script): the verbs and
/// flags of `cargo xtask`'s `gen`, `inspect`, `load`, `shard` and `tune`,
/// run by the same Rust code. `argv` starts with the program's name;
/// returns the exit status. The main job's default CIFAR-10 lives under
/// `datasets/cifar10` in the current folder.
#[pyfunction]
fn cli_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    let defaults = adapt::cli::Defaults {
        cifar10: "datasets/cifar10".into(),
    };
    py.detach(|| {
        // The command's remote flags are its own: later opens in this
        // process read the options as before it (the environment's).
        let saved = adapt::swap_default_options(None);
        let status = adapt::cli::main(argv, &defaults);
        adapt::swap_default_options(saved);
        status
    })
}

// Free-threading: every class is frozen (immutable, its state behind a
// Mutex) or borrow-checked by pyo3, and no global Python state is kept, so
// importing it does not turn the GIL back on. Untested: Debian 12 has no
// free-threaded CPython, and the abi3 wheel does not load there; a
// version-specific build (cp313t) is what uses this.
#[pymodule(gil_used = false)]
fn _adapt(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<RawLoader>()?;
    m.add_class::<BatchData>()?;
    m.add_class::<plan::IndexPlan>()?;
    m.add_class::<plan::EpochIndexPlan>()?;
    m.add_class::<steps::Steps>()?;
    m.add_class::<data::Data>()?;
    m.add_function(wrap_pyfunction!(launch_from_env, m)?)?;
    m.add_function(wrap_pyfunction!(parse_transform, m)?)?;
    m.add_function(wrap_pyfunction!(stage_report, m)?)?;
    tune::add_functions(m)?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add("AdaptError", py.get_type::<AdaptError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("DataError", py.get_type::<DataError>())?;
    m.add("SampleError", py.get_type::<SampleError>())?;
    m.add("WorkerError", py.get_type::<WorkerError>())?;
    m.add("LoaderTimeout", py.get_type::<LoaderTimeout>())?;
    m.add("CheckpointError", py.get_type::<CheckpointError>())?;
    Ok(())
}
