//! The tuner for Python: `tune` over a pipeline (adapt's loader),
//! `tune_trials` over a trial function the Python side runs (PyTorch's
//! DataLoader over the user's dataset) and `tune_given` over a knob space
//! Python names (Ray Data's) — the Rust tuner's search, noise, race and
//! comparison every way; profiles and the spaces.

use crate::{AdaptError, pipeline, py_error};
use adapt::{
    LoaderKnobs, Measured, SpaceKind, TrialData, TrialFailure, TrialRequest, TrialRunner,
    TrialSpec, TuneOptions,
};
use pyo3::exceptions::{PyKeyboardInterrupt, PySystemExit};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// An error raised by Python code the tuner called that must end the
/// run (Ctrl-C), kept to be raised again when the tuner returns.
type Pending = Arc<Mutex<Option<PyErr>>>;

fn is_stop(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<PyKeyboardInterrupt>(py) || e.is_instance_of::<PySystemExit>(py)
}

/// The tuning options Python passes as a dict (the names of `adapt.tune`'s
/// arguments); absent keys keep the tuner's defaults.
fn options(d: &Bound<'_, PyDict>) -> PyResult<TuneOptions> {
    fn get<'py, T: FromPyObjectOwned<'py>>(
        d: &Bound<'py, PyDict>,
        key: &str,
    ) -> PyResult<Option<T>> {
        match d.get_item(key)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract().map_err(Into::into)?)),
            _ => Ok(None),
        }
    }
    let err = |e: adapt::engines::tune::TuneError| py_error(e.into());
    let mut o = TuneOptions::default();
    if let Some(b) = get::<Vec<usize>>(d, "batch_sizes")? {
        o.batch_sizes = b;
    }
    if let Some(s) = get::<String>(d, "strategy")? {
        o.strategy = s.parse().map_err(err)?;
    }
    if let Some(s) = get::<String>(d, "space")? {
        o.space = s.parse::<SpaceKind>().map_err(err)?;
    }
    o.profile = get(d, "profile")?;
    o.retune = get(d, "retune")?.unwrap_or(false);
    o.budget_bytes = get(d, "budget_bytes")?;
    o.trial = TrialSpec {
        samples: get(d, "trial_samples")?.unwrap_or(o.trial.samples),
        seed: get(d, "seed")?.unwrap_or(0),
        ..o.trial
    };
    let descent = get::<String>(d, "avl")?;
    o.avl = if get(d, "plain")?.unwrap_or(false) {
        if descent.is_some() {
            return Err(err(adapt::engines::tune::TuneError::InvalidOption(
                "plain=True is avl=\"plain\", race=False: pass one or the other".into(),
            )));
        }
        adapt::AvlOptions::plain()
    } else {
        TuneOptions::avl_named(
            descent.as_deref(),
            get(d, "race")?.unwrap_or(true),
            get(d, "prune")?.unwrap_or(true),
        )
        .map_err(err)?
    };
    o.final_repeats = get(d, "final_repeats")?.unwrap_or(o.final_repeats);
    o.trial_seconds = get::<f64>(d, "trial_seconds")?.filter(|t| *t > 0.0);
    o.noise_repeats = get(d, "noise_repeats")?.unwrap_or(o.noise_repeats);
    o.train_step = adapt::step_from_ms(get(d, "step_ms")?).map_err(py_error)?;
    Ok(o)
}

/// A progress callback that hands each line to a Python callable (none:
/// silent). A Ctrl-C raised in it is kept in `pending`; other errors are
/// dropped (a progress display must not end a tuning run).
fn progress_to(callback: Option<Py<PyAny>>, pending: Pending) -> impl Fn(&str) + Send + Sync {
    move |line: &str| {
        let Some(cb) = &callback else { return };
        Python::attach(|py| {
            if let Err(e) = cb.call1(py, (line,))
                && is_stop(py, &e)
            {
                *pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            }
        });
    }
}

/// Raises what Python raised to stop the run, else the tuner's error.
fn finish<T>(r: Result<T, adapt::AdaptError>, pending: &Pending) -> PyResult<T> {
    if let Some(e) = pending.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(e);
    }
    r.map_err(py_error)
}

fn report_json(report: &adapt::Report) -> PyResult<String> {
    serde_json::to_string(report).map_err(|e| AdaptError::new_err(e.to_string()))
}

/// Runs the tuner on a pipeline (its dataset, steps and output) and returns
/// the report as JSON text; `progress` gets a line per trial.
#[pyfunction]
#[pyo3(signature = (pipeline_json, options, progress=None))]
fn tune(
    py: Python<'_>,
    pipeline_json: &str,
    options: &Bound<'_, PyDict>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let options = TuneOptions {
        pipeline: pipeline(pipeline_json)?,
        ..self::options(options)?
    };
    let pending = Pending::default();
    let show = progress_to(progress, Arc::clone(&pending));
    let r = py.detach(|| adapt::tune(&options, &show));
    report_json(&finish(r, &pending)?)
}

/// A trial function of Python's as the tuner's trial runner: it is called
/// as `trial(knobs, batch_size, samples, epochs, seed, purpose,
/// give_up_after=None)`; its cost is its wall time, or the number it
/// returns. With `give_up_after` (seconds, pruning) it may stop once its
/// time passes it and return `("cut_short", estimate)`, the whole trial's
/// time estimated. An exception is a failed trial (its type and message in
/// the report); KeyboardInterrupt or SystemExit ends the run and is raised
/// again.
struct PythonTrials {
    trial: Py<PyAny>,
    pending: Pending,
}

impl TrialRunner for PythonTrials {
    fn run(&mut self, r: &TrialRequest) -> Result<f64, TrialFailure> {
        self.call(r, None).map(Measured::value)
    }

    fn run_until(&mut self, r: &TrialRequest, bound: f64) -> Result<Measured, TrialFailure> {
        self.call(r, Some(bound))
    }
}

impl PythonTrials {
    fn call(&mut self, r: &TrialRequest, bound: Option<f64>) -> Result<Measured, TrialFailure> {
        let shown = r.knobs.to_string();
        Python::attach(|py| {
            let knobs =
                knobs_dict(py, &r.knobs).map_err(|e| TrialFailure::Failed(e.to_string()))?;
            let args = (
                knobs,
                r.batch_size,
                r.samples,
                r.epochs,
                r.seed,
                r.purpose.name(),
            );
            let args = args
                .into_pyobject(py)
                .map_err(|e| TrialFailure::Failed(e.to_string()))?;
            call_trial(py, &self.trial, &args, bound, &shown, &self.pending)
        })
    }
}

/// Calls a Python trial function with `args` (and `give_up_after=bound`
/// when given): its wall time, or what it returned (seconds, or
/// `("cut_short", seconds)`). An exception is a failed trial naming
/// `shown`; KeyboardInterrupt or SystemExit is kept in `pending` and stops
/// the run, as does anything already pending.
fn call_trial(
    py: Python<'_>,
    trial: &Py<PyAny>,
    args: &Bound<'_, pyo3::types::PyTuple>,
    bound: Option<f64>,
    shown: &str,
    pending: &Pending,
) -> Result<Measured, TrialFailure> {
    if pending.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
        return Err(TrialFailure::Stop("interrupted".into()));
    }
    let kwargs = PyDict::new(py);
    if let Some(b) = bound {
        kwargs
            .set_item("give_up_after", b)
            .map_err(|e| TrialFailure::Failed(e.to_string()))?;
    }
    let start = Instant::now();
    let out = trial.bind(py).call(args, Some(&kwargs));
    let wall = start.elapsed().as_secs_f64();
    match out {
        Ok(v) if v.is_none() => Ok(Measured::Whole(wall)),
        Ok(v) => measured(py, &v.unbind()).ok_or_else(|| {
            TrialFailure::Failed(format!(
                "{shown}: the trial returned neither None, a number of seconds nor \
                 (\"cut_short\", seconds)"
            ))
        }),
        Err(e) if is_stop(py, &e) => {
            let why = e.to_string();
            *pending.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            Err(TrialFailure::Stop(why))
        }
        Err(e) => Err(TrialFailure::Failed(format!("{shown}: {e}"))),
    }
}

/// What a trial function returned: seconds, or `("cut_short", seconds)`.
fn measured(py: Python<'_>, v: &Py<PyAny>) -> Option<Measured> {
    if let Ok(s) = v.extract::<f64>(py) {
        return Some(Measured::Whole(s));
    }
    let (tag, s) = v.extract::<(String, f64)>(py).ok()?;
    (tag == "cut_short").then_some(Measured::CutShort(s))
}

/// Tunes a loader Python runs: `trial` (see `PythonTrials`) over the data
/// `data_json` describes ([`TrialData`] as JSON: `len`, `identity` its
/// profile key, `description` what the report says of it, `gpu` the
/// accelerator torch sees (None: pin_memory fixed off), `batch_bytes` one
/// batch's size when known). Returns the report as JSON text.
#[pyfunction]
#[pyo3(signature = (trial, data_json, options, progress=None))]
fn tune_trials(
    py: Python<'_>,
    trial: Py<PyAny>,
    data_json: &str,
    options: &Bound<'_, PyDict>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let options = self::options(options)?;
    let data: TrialData = serde_json::from_str(data_json)
        .map_err(|e| AdaptError::new_err(format!("trial data: {e}")))?;
    let pending = Pending::default();
    let show = progress_to(progress, Arc::clone(&pending));
    let mut runner = PythonTrials {
        trial,
        pending: Arc::clone(&pending),
    };
    let r = py.detach(|| adapt::tune_trials(&mut runner, &data, &options, &show));
    report_json(&finish(r, &pending)?)
}

/// A trial function of Python's over a given space: called as
/// `trial(config, purpose, give_up_after=None)` with `config` a dict of the
/// knobs' values; its cost is its wall time, or what it returns (as
/// [`PythonTrials`]'s).
struct PythonGivenTrials {
    trial: Py<PyAny>,
    pending: Pending,
}

impl adapt::GivenTrials for PythonGivenTrials {
    fn run(
        &mut self,
        config: &adapt::GivenConfig,
        purpose: adapt::TrialPurpose,
        bound: Option<f64>,
    ) -> Result<Measured, TrialFailure> {
        let shown = format!("{config:?}");
        Python::attach(|py| {
            let failed = |e: PyErr| TrialFailure::Failed(e.to_string());
            let knobs = PyDict::new(py);
            for (k, v) in config {
                knobs.set_item(k, v).map_err(failed)?;
            }
            let args = (knobs, purpose.name()).into_pyobject(py).map_err(failed)?;
            call_trial(py, &self.trial, &args, bound, &shown, &self.pending)
        })
    }
}

/// Tunes a knob space Python names: `knobs_json` the knobs outermost
/// first (`[{"name", "values", "default"}, ...]`), `trial` run for each
/// configuration (see `PythonGivenTrials`), `options` the descent's
/// (`avl`, `race`, `prune`, `plain`) and the repeats (`noise_repeats`,
/// `final_repeats`). Returns the report as JSON text.
#[pyfunction]
#[pyo3(signature = (trial, knobs_json, options, progress=None))]
fn tune_given(
    py: Python<'_>,
    trial: Py<PyAny>,
    knobs_json: &str,
    options: &Bound<'_, PyDict>,
    progress: Option<Py<PyAny>>,
) -> PyResult<String> {
    let err = |e: adapt::engines::tune::TuneError| py_error(e.into());
    let knobs: Vec<adapt::GivenKnob> = serde_json::from_str(knobs_json)
        .map_err(|e| py_error(adapt::AdaptError::Option(format!("the knobs to tune: {e}"))))?;
    let space = adapt::GivenSpace::new(knobs).map_err(err)?;
    let tuned = self::options(options)?;
    let options = adapt::GivenOptions {
        avl: tuned.avl,
        noise_repeats: tuned.noise_repeats,
        final_repeats: tuned.final_repeats,
    };
    let pending = Pending::default();
    let show = progress_to(progress, Arc::clone(&pending));
    let mut trials = PythonGivenTrials {
        trial,
        pending: Arc::clone(&pending),
    };
    let r = py.detach(|| adapt::tune_given(&space, &mut trials, &options, &show));
    let report = finish(r, &pending)?;
    serde_json::to_string(&report).map_err(|e| AdaptError::new_err(e.to_string()))
}

/// Knobs as `torch.utils.data.DataLoader` keyword arguments: without
/// workers `prefetch_factor` is None and `persistent_workers` False, as
/// PyTorch requires.
fn knobs_dict<'py>(py: Python<'py>, k: &LoaderKnobs) -> PyResult<Bound<'py, PyDict>> {
    let k = k.canonical();
    let d = PyDict::new(py);
    d.set_item("num_workers", k.num_workers)?;
    d.set_item("prefetch_factor", k.prefetch_factor)?;
    d.set_item("pin_memory", k.pin_memory)?;
    d.set_item("persistent_workers", k.persistent_workers)?;
    Ok(d)
}

/// The configurations of the space `kind` (`machine` or `paper`) as
/// DataLoader keyword arguments; `gpu`: the accelerator (None: pin_memory
/// fixed off).
#[pyfunction]
#[pyo3(signature = (kind, gpu=None))]
fn space_configurations<'py>(
    py: Python<'py>,
    kind: &str,
    gpu: Option<String>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let kind: SpaceKind = kind
        .parse()
        .map_err(|e: adapt::engines::tune::TuneError| py_error(e.into()))?;
    adapt::space_configurations(kind, gpu)
        .iter()
        .map(|k| knobs_dict(py, k))
        .collect()
}

/// The knobs a profile holds for this pipeline and batch size on this
/// machine, or None.
#[pyfunction]
fn profile_knobs<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    pipeline_json: &str,
    batch_size: usize,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let pipeline = pipeline(pipeline_json)?;
    let found = py
        .detach(|| adapt::profile_knobs(&path, &pipeline, batch_size))
        .map_err(py_error)?;
    found.map(|k| knobs_dict(py, &k)).transpose()
}

/// The knobs a profile holds for a caller's dataset `identity` at
/// `batch_size` on this machine with accelerator `gpu`, or None.
#[pyfunction]
#[pyo3(signature = (path, identity, batch_size, gpu=None))]
fn profile_knobs_of<'py>(
    py: Python<'py>,
    path: std::path::PathBuf,
    identity: &str,
    batch_size: usize,
    gpu: Option<String>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let found = py
        .detach(|| adapt::profile_knobs_of(&path, identity, batch_size, gpu))
        .map_err(py_error)?;
    found.map(|k| knobs_dict(py, &k)).transpose()
}

/// Writes the SVG plot of a tuning report (JSON text, as `tune` returns
/// it) to `path`: the grid's times and the searches' trials per batch size.
#[pyfunction]
fn plot(py: Python<'_>, report_json: &str, path: std::path::PathBuf) -> PyResult<()> {
    let report: adapt::Report = serde_json::from_str(report_json)
        .map_err(|e| AdaptError::new_err(format!("not a tuning report: {e}")))?;
    py.detach(|| adapt::write_svg(&report, &path))
        .map_err(|e| py_error(e.into()))
}

/// Writes the HTML page of a tuning report (JSON text) to `path`. With
/// `pipeline_json` (the pipeline tuned), the default's and the pick's
/// stages are measured first, one epoch each; without it the page says
/// `why` in their place.
#[pyfunction]
#[pyo3(signature = (report_json, path, pipeline_json=None, why=None))]
fn report_page(
    py: Python<'_>,
    report_json: &str,
    path: std::path::PathBuf,
    pipeline_json: Option<&str>,
    why: Option<&str>,
) -> PyResult<()> {
    let report: adapt::Report = serde_json::from_str(report_json)
        .map_err(|e| AdaptError::new_err(format!("not a tuning report: {e}")))?;
    let pipeline = pipeline_json.map(pipeline).transpose()?;
    let why = why.unwrap_or("No stages were measured.");
    py.detach(|| {
        let stages = match &pipeline {
            Some(p) => adapt::measure_stage_pairs(p, &report, &|_: &str| {})?,
            None => report
                .runs
                .iter()
                .map(|r| adapt::StagePair::missing(r.batch_size, why))
                .collect(),
        };
        adapt::write_report_html(&report, &stages, &path)
    })
    .map_err(py_error)
}

/// Adds this module's functions to `_adapt`.
pub(crate) fn add_functions(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(tune, m)?)?;
    m.add_function(wrap_pyfunction!(tune_trials, m)?)?;
    m.add_function(wrap_pyfunction!(tune_given, m)?)?;
    m.add_function(wrap_pyfunction!(space_configurations, m)?)?;
    m.add_function(wrap_pyfunction!(profile_knobs, m)?)?;
    m.add_function(wrap_pyfunction!(profile_knobs_of, m)?)?;
    m.add_function(wrap_pyfunction!(plot, m)?)?;
    m.add_function(wrap_pyfunction!(report_page, m)?)?;
    Ok(())
}
