//! The tuning run: per batch size, search, compare, report.

use crate::monitor::time_loader;
use crate::report::{Searches, TraceEntry};
use crate::space::Budgeted;
use crate::{
    Budget, CommandObjective, ConfigTime, KnobSpace, Knobs, LoaderObjective, Machine, Profile,
    ProfileEntry, ProfileKey, Report, RunReport, SearchCost, TrialSpec, TuneError,
};
use adapt_dataset::{Concat, Dataset, Mapped, Normalize, Resize};
use adapt_formats::{
    CelebA, CelebAOptions, Cifar10, DIGIFACE_IMAGE_SIZE, DatasetKind, DigiFace, DigiFaceOptions,
    ImageFolder, OpenOptions, Split,
};
use adapt_loader::LoaderConfig;
use adapt_pack::{PackDataset, ShardStream};
use adapt_search::{
    AvlOptions, Config, NoisePolicy, Objective, Outcome, Trial, avl_search, grid_search,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which searches to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The AVL search only.
    Avl,
    /// The grid only (its best is the pick).
    Grid,
    /// Both, with the paper's Table 1 comparison.
    Both,
}

/// Which dataset to tune on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetChoice {
    /// Full-size CIFAR-10 in this folder, generated in the real binary
    /// layout when absent.
    DefaultCifar10(PathBuf),
    /// A dataset by format name (`cifar10`, `celeba`, `digiface`,
    /// `imagefolder`, `celeba+digiface`) at a path.
    Named {
        /// The format name.
        kind: String,
        /// The folder (for `celeba+digiface`, a folder holding `celeba/` and `digiface/`).
        path: PathBuf,
    },
}

/// Everything a tuning run needs.
#[derive(Clone, Debug)]
pub struct TuneOptions {
    /// The dataset.
    pub dataset: DatasetChoice,
    /// Batch sizes, each tuned separately.
    pub batch_sizes: Vec<usize>,
    /// Searches to run.
    pub strategy: Strategy,
    /// Memory budget in bytes; `None` = half the available memory.
    pub budget_bytes: Option<u64>,
    /// Trial length.
    pub trial: TrialSpec,
    /// AVL search options.
    pub avl: AvlOptions,
    /// Repeats of the final comparison.
    pub final_repeats: usize,
    /// Samples per epoch of the final comparison; `None` = the whole
    /// dataset up to 60,000.
    pub final_samples: Option<usize>,
    /// Profile file to reuse and update.
    pub profile: Option<PathBuf>,
    /// Search again even when the profile has an entry.
    pub retune: bool,
    /// Resize every sample to (width, height) after the format's fixed
    /// steps (needed for image folders of mixed sizes).
    pub resize: Option<(u32, u32)>,
}

impl Default for TuneOptions {
    fn default() -> Self {
        Self {
            dataset: DatasetChoice::DefaultCifar10(PathBuf::from("datasets/cifar10")),
            batch_sizes: vec![128],
            strategy: Strategy::Avl,
            budget_bytes: None,
            trial: TrialSpec::default(),
            avl: AvlOptions {
                refine: true,
                noise: NoisePolicy {
                    threshold: 0.05,
                    max_repeats: 3,
                },
            },
            final_repeats: 3,
            final_samples: None,
            profile: None,
            retune: false,
            resize: None,
        }
    }
}

/// Progress messages (one per trial and per phase).
pub type Progress<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// A dataset opened by format name, with what the command line needs.
pub struct OpenedDataset {
    /// The samples.
    pub dataset: Arc<dyn Dataset>,
    /// The usual normalisation for this data.
    pub normalize: Normalize,
    /// The pack, when the format is `pack` (for origins and streaming).
    pub pack: Option<Arc<PackDataset>>,
    /// Class names, when the format has them.
    pub class_names: Option<Vec<String>>,
}

impl OpenedDataset {
    /// The same data resized to `width` × `height` (bilinear) after the
    /// format's fixed steps: what a folder of images of many sizes needs
    /// before it can be batched.
    pub fn resized(mut self, width: u32, height: u32) -> Result<Self, TuneError> {
        let resize =
            Resize::new(width, height).map_err(|e| TuneError::InvalidOption(e.to_string()))?;
        // Every reader produces RGB, so the resized shape is known even when
        // the source's sizes differ.
        let shape = adapt_dataset::Shape::new(height, width, 3);
        self.dataset = Arc::new(Mapped::new(self.dataset, resize).with_shape(shape));
        Ok(self)
    }
}

/// Opens a dataset by format name (`cifar10`, `celeba`, `digiface`,
/// `celeba+digiface` — a folder holding `celeba/` and `digiface/`, DigiFace
/// labels offset past CelebA's —, `imagefolder`, `pack`).
pub fn open_dataset(kind: &str, path: &Path, split: Split) -> Result<OpenedDataset, TuneError> {
    if !path.exists() {
        return Err(TuneError::InvalidOption(format!(
            "dataset path {} does not exist",
            path.display()
        )));
    }
    let plain = |dataset: Arc<dyn Dataset>, k: DatasetKind| OpenedDataset {
        dataset,
        normalize: k.default_normalize(),
        pack: None,
        class_names: None,
    };
    match kind.to_ascii_lowercase().as_str() {
        "celeba+digiface" => {
            let celeba = CelebA::open(&path.join("celeba"), CelebAOptions::default())?;
            let offset = celeba.num_classes().unwrap_or(0) as i64;
            let digi = DigiFace::open(
                &path.join("digiface"),
                DigiFaceOptions {
                    class_offset: offset,
                },
            )?;
            // CelebA's crop is 128×128, DigiFace's images 112×112: resize
            // CelebA to 112×112 (bilinear) so the two batch together.
            let resize = Resize::new(DIGIFACE_IMAGE_SIZE, DIGIFACE_IMAGE_SIZE)
                .map_err(|e| TuneError::InvalidOption(e.to_string()))?;
            let parts: Vec<Arc<dyn Dataset>> =
                vec![Arc::new(Mapped::new(celeba, resize)), Arc::new(digi)];
            Ok(plain(Arc::new(Concat::new(parts)), DatasetKind::CelebA))
        }
        "pack" => {
            let pack = Arc::new(PackDataset::open(path)?);
            let m = pack.manifest();
            let normalize = match m.source_dataset.parse::<DatasetKind>() {
                Ok(k) => k.default_normalize(),
                Err(_) => DatasetKind::CelebA.default_normalize(),
            };
            let class_names = m.class_names.clone();
            Ok(OpenedDataset {
                dataset: Arc::clone(&pack) as Arc<dyn Dataset>,
                normalize,
                pack: Some(pack),
                class_names,
            })
        }
        "cifar10" => {
            let c = Cifar10::open(path, split)?;
            let names = c.classes().to_vec();
            Ok(OpenedDataset {
                class_names: Some(names),
                ..plain(Arc::new(c), DatasetKind::Cifar10)
            })
        }
        "imagefolder" => {
            let f = ImageFolder::open(path)?;
            let names = f.classes().to_vec();
            Ok(OpenedDataset {
                class_names: Some(names),
                ..plain(Arc::new(f), DatasetKind::ImageFolder)
            })
        }
        other => {
            let k: DatasetKind = other.parse().map_err(|e: adapt_formats::UnknownDataset| {
                TuneError::InvalidOption(format!("{e} (or celeba+digiface, pack)"))
            })?;
            Ok(plain(
                adapt_formats::open(k, path, &OpenOptions::default())?,
                k,
            ))
        }
    }
}

/// Glue: a pack's shard-streaming order as a loader sampler.
#[derive(Debug)]
pub struct StreamSampler(pub ShardStream);

impl adapt_loader::Sampler for StreamSampler {
    fn order(&self, _len: usize, epoch: u64) -> Vec<usize> {
        self.0.order(epoch)
    }
}

/// A short, stable identity of a dataset: format, canonical path, length,
/// sample shape and where its first and last samples come from.
pub fn dataset_fingerprint(kind: &str, path: &Path, ds: &dyn Dataset) -> String {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let text = format!(
        "{kind}|{}|{}|{:?}|{}|{}",
        path.display(),
        ds.len(),
        ds.sample_shape(),
        ds.source(0),
        ds.source(ds.len().saturating_sub(1))
    );
    let h = text.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    format!("{kind}-{}-{h:016x}", ds.len())
}

fn check_options(options: &TuneOptions) -> Result<(), TuneError> {
    if options.batch_sizes.is_empty() || options.batch_sizes.contains(&0) {
        return Err(TuneError::InvalidOption(
            "batch sizes must be at least 1".into(),
        ));
    }
    if options.final_repeats == 0 {
        return Err(TuneError::InvalidOption(
            "the final comparison needs at least one repeat".into(),
        ));
    }
    Ok(())
}

/// Tunes the loader on a dataset and returns the report.
pub fn run(options: &TuneOptions, progress: Progress<'_>) -> Result<Report, TuneError> {
    check_options(options)?;
    let (kind, path) = match &options.dataset {
        DatasetChoice::DefaultCifar10(dir) => {
            progress(&format!(
                "checking the default CIFAR-10 under {}",
                dir.display()
            ));
            if adapt_synth::ensure_cifar10(
                dir,
                adapt_synth::Cifar10Spec::default(),
                &adapt_synth::no_progress,
            )? {
                progress("generated full-size synthetic CIFAR-10 in the real binary layout");
            }
            (
                "cifar10".to_owned(),
                dir.canonicalize().unwrap_or_else(|_| dir.clone()),
            )
        }
        DatasetChoice::Named { kind, path } => (kind.clone(), path.clone()),
    };
    let mut opened = open_dataset(&kind, &path, Split::Train)?;
    if let Some((w, h)) = options.resize {
        opened = opened.resized(w, h)?;
    }
    let OpenedDataset {
        dataset, normalize, ..
    } = opened;
    let shape = dataset.sample_shape().ok_or_else(|| {
        TuneError::InvalidOption(
            "the dataset's samples have no fixed size; tune it after a Resize".into(),
        )
    })?;
    let machine = Machine::detect();
    let space = KnobSpace::for_machine(&machine);
    // With a GPU, trials include the copy to device 0 (pin_memory then matters).
    let engine = match machine.gpu {
        Some(_) => Some(Arc::new(
            adapt_transfer::TransferEngine::new(adapt_transfer::Device::Cuda(0))
                .map_err(|e| TuneError::InvalidOption(format!("GPU found but unusable: {e}")))?,
        )),
        None => None,
    };
    let fingerprint = dataset_fingerprint(&kind, &path, &*dataset);
    let mut profile = match &options.profile {
        Some(p) => Some(Profile::load(p)?),
        None => None,
    };
    let budget_bytes = options.budget_bytes.unwrap_or(machine.available_bytes / 2);
    let final_samples = options.final_samples.unwrap_or(60_000).min(dataset.len());
    let final_set: Arc<dyn Dataset> = Arc::new(crate::Subset::random(
        Arc::clone(&dataset),
        final_samples,
        options.trial.seed,
    ));
    let mut notes = space.notes.clone();
    if cfg!(debug_assertions) {
        notes.push("built without optimisations: timings do not represent a release build".into());
    }
    let mut runs = Vec::new();
    for &batch_size in &options.batch_sizes {
        let base = LoaderConfig {
            batch_size,
            shuffle: true,
            seed: options.trial.seed,
            normalize: Some(normalize.clone()),
            ..LoaderConfig::default()
        };
        let budget = Budget {
            bytes: budget_bytes,
            batch_bytes: (batch_size * shape.len() * 4) as u64,
        };
        let saved = match (&profile, options.retune) {
            (Some(p), false) => p
                .lookup(&fingerprint, batch_size, &machine)
                .map(|e| e.knobs),
            _ => None,
        };
        progress(&format!("batch {batch_size}: warming up"));
        let objective = LoaderObjective::new(Arc::clone(&dataset), base.clone(), options.trial)?
            .with_engine(engine.clone());
        objective.warm_up()?;
        let mut objective = Budgeted {
            inner: objective,
            budget,
        };
        let mut final_time = |k: &Knobs| -> Result<f64, TuneError> {
            time_loader(&final_set, &base, k, 2, engine.as_deref())
        };
        let run = tune_one(
            &space,
            &mut objective,
            options,
            batch_size,
            saved,
            &mut final_time,
            &machine,
            progress,
        )?;
        if let Some(p) = &mut profile {
            p.insert(ProfileEntry {
                key: ProfileKey {
                    dataset: fingerprint.clone(),
                    batch_size,
                    machine: machine.clone(),
                },
                knobs: run.adapt.config,
                seconds: run.adapt.seconds,
            });
        }
        runs.push(run);
    }
    if let (Some(p), Some(path)) = (&profile, &options.profile) {
        p.save(path)?;
    }
    let dataset_json = serde_json::json!({
        "kind": kind,
        "path": path.display().to_string(),
        "samples": dataset.len(),
        "shape": [shape.height, shape.width, shape.channels],
        "fingerprint": fingerprint,
    });
    Ok(Report {
        machine,
        dataset: dataset_json,
        trial: options.trial,
        budget_bytes,
        final_repeats: options.final_repeats,
        final_samples,
        notes,
        runs,
    })
}

/// Tunes an external command by its wall time (`CommandObjective`); the
/// batch size in the report is 0.
pub fn tune_command(
    template: &str,
    options: &TuneOptions,
    progress: Progress<'_>,
) -> Result<Report, TuneError> {
    if options.final_repeats == 0 {
        return Err(TuneError::InvalidOption(
            "the final comparison needs at least one repeat".into(),
        ));
    }
    if ![
        "{num_workers}",
        "{prefetch_factor}",
        "{pin_memory}",
        "{persistent_workers}",
    ]
    .iter()
    .any(|p| template.contains(p))
    {
        return Err(TuneError::InvalidOption(
            "the command uses none of {num_workers} {prefetch_factor} {pin_memory} {persistent_workers}".into(),
        ));
    }
    let machine = Machine::detect();
    let space = KnobSpace::for_machine(&machine);
    // No batch bytes are known for an external program: the budget cannot prune.
    let budget = Budget {
        bytes: u64::MAX,
        batch_bytes: 0,
    };
    let mut objective = Budgeted {
        inner: CommandObjective::new(template),
        budget,
    };
    let mut finals = CommandObjective::new(template);
    let mut final_time = |k: &Knobs| -> Result<f64, TuneError> {
        finals
            .measure(&space.config(k))
            .map_err(|e| TuneError::NothingMeasured(e.to_string()))
    };
    let run = tune_one(
        &space,
        &mut objective,
        options,
        0,
        None,
        &mut final_time,
        &machine,
        progress,
    )?;
    Ok(Report {
        machine,
        dataset: serde_json::json!({ "command": template }),
        trial: options.trial,
        budget_bytes: budget.bytes,
        final_repeats: options.final_repeats,
        final_samples: 0,
        notes: space.notes.clone(),
        runs: vec![run],
    })
}

fn trace_entries(strategy: &str, trace: &[Trial]) -> Vec<TraceEntry> {
    trace
        .iter()
        .map(|t| {
            let (seconds, note) = match &t.outcome {
                Outcome::Cost { cost } => (Some(*cost), None),
                Outcome::Infeasible { reason } => (None, Some(format!("infeasible: {reason}"))),
                Outcome::Failed { message } => (None, Some(format!("failed: {message}"))),
            };
            TraceEntry {
                strategy: strategy.into(),
                config: KnobSpace::knobs(&t.config),
                seconds,
                note,
                repeat: t.repeat,
            }
        })
        .collect()
}

/// A progress-reporting wrapper around an objective.
struct Reporting<'a, O> {
    inner: &'a mut O,
    label: String,
    count: usize,
    progress: Progress<'a>,
}

impl<O: Objective> Objective for Reporting<'_, O> {
    fn feasible(&self, config: &Config) -> Result<(), String> {
        self.inner.feasible(config)
    }
    fn measure(&mut self, config: &Config) -> Result<f64, adapt_search::TrialError> {
        self.count += 1;
        let r = self.inner.measure(config);
        let shown = match &r {
            Ok(s) => format!("{s:.4} s"),
            Err(e) => format!("failed: {e}"),
        };
        (self.progress)(&format!(
            "{} trial {}: {} → {shown}",
            self.label,
            self.count,
            KnobSpace::knobs(config)
        ));
        r
    }
}

#[allow(clippy::too_many_arguments)]
fn tune_one<O: Objective>(
    space: &KnobSpace,
    objective: &mut O,
    options: &TuneOptions,
    batch_size: usize,
    saved: Option<Knobs>,
    final_time: &mut dyn FnMut(&Knobs) -> Result<f64, TuneError>,
    machine: &Machine,
    progress: Progress<'_>,
) -> Result<RunReport, TuneError> {
    let all = space.space().configurations();
    let infeasible: Vec<String> = all
        .iter()
        .filter_map(|c| objective.feasible(c).err())
        .collect();
    if infeasible.len() == all.len() {
        let reason = infeasible.first().cloned().unwrap_or_default();
        return Err(TuneError::NothingMeasured(format!(
            "every configuration is infeasible ({reason})"
        )));
    }
    let pruned = infeasible.len();
    let mut trace = Vec::new();
    let mut searches = Searches::default();
    let mut avl_path = Vec::new();
    let (mut pick, mut source) = (saved, "profile");
    if pick.is_none() && options.strategy != Strategy::Grid {
        let mut rep = Reporting {
            inner: &mut *objective,
            label: format!("batch {batch_size} avl"),
            count: 0,
            progress,
        };
        let r = avl_search(space.space(), &mut rep, &options.avl);
        trace.extend(trace_entries("avl", &r.trace));
        avl_path = r.path.iter().map(|s| KnobSpace::knobs(&s.config)).collect();
        searches.avl = Some(SearchCost {
            trials: r.trials,
            seconds: r.wall.as_secs_f64(),
        });
        let best = r
            .best
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&r.trace)))?;
        pick = Some(KnobSpace::knobs(&best));
        source = "avl";
    }
    let mut grid_ranked = Vec::new();
    let mut optimal = None;
    let mut grid = None;
    if options.strategy != Strategy::Avl {
        let mut rep = Reporting {
            inner: &mut *objective,
            label: format!("batch {batch_size} grid"),
            count: 0,
            progress,
        };
        let g = grid_search(space.space(), &mut rep);
        trace.extend(trace_entries("grid", &g.trace));
        searches.grid = Some(SearchCost {
            trials: g.trials,
            seconds: g.wall.as_secs_f64(),
        });
        let (best, _) = g
            .best()
            .ok_or_else(|| TuneError::NothingMeasured(failure_summary(&g.trace)))?;
        optimal = Some(KnobSpace::knobs(best));
        if pick.is_none() {
            pick = optimal;
            source = "grid";
        }
        grid_ranked = g
            .ranked
            .iter()
            .map(|(c, s)| ConfigTime {
                config: KnobSpace::knobs(c),
                seconds: *s,
            })
            .collect();
        grid = Some(g);
    }
    if let (Some(a), Some(g)) = (&searches.avl, &searches.grid) {
        searches.grid_over_avl = Some(g.seconds / a.seconds.max(1e-9));
    }
    let pick = pick.ok_or_else(|| TuneError::NothingMeasured("no search ran".into()))?;
    let recommended = Knobs::recommended(machine);
    // The final comparison: every contender measured again, interleaved, medians.
    let mut contenders = vec![Knobs::DEFAULT, recommended, pick];
    if let Some(o) = optimal {
        contenders.push(o);
    }
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); contenders.len()];
    let mut failures = Vec::new();
    for rep in 0..options.final_repeats {
        for (i, k) in contenders.iter().enumerate() {
            progress(&format!(
                "batch {batch_size} final comparison {}/{}: {k}",
                rep + 1,
                options.final_repeats
            ));
            // A contender that fails here (the recommended values may not
            // run at all) is reported with an infinite time, not fatal.
            times[i].push(final_time(k).unwrap_or_else(|e| {
                failures.push(format!("{k} failed in the final comparison: {e}"));
                f64::INFINITY
            }));
        }
    }
    failures.dedup();
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let secs: Vec<f64> = times.iter_mut().map(median).collect();
    let ct = |i: usize| ConfigTime {
        config: contenders[i],
        seconds: secs[i],
    };
    let adapt = ct(2);
    let rank = grid.as_ref().and_then(|g| g.rank_of(&space.config(&pick)));
    let optimal_ct = optimal.map(|_| ct(3));
    Ok(RunReport {
        batch_size,
        default: ct(0),
        recommended: ct(1),
        adapt_over_optimal: optimal_ct.as_ref().map(|o| adapt.seconds / o.seconds),
        optimal: optimal_ct,
        speedup_vs_default: secs[0] / adapt.seconds,
        speedup_vs_recommended: secs[1] / adapt.seconds,
        adapt,
        adapt_source: source.into(),
        adapt_rank: rank,
        grid_size: all.len(),
        pruned,
        search: searches,
        grid: grid_ranked,
        avl_path,
        trace,
        failures,
    })
}

fn failure_summary(trace: &[Trial]) -> String {
    trace
        .iter()
        .find_map(|t| match &t.outcome {
            Outcome::Failed { message } => Some(format!("e.g. {message}")),
            Outcome::Infeasible { reason } => Some(format!("e.g. infeasible: {reason}")),
            Outcome::Cost { .. } => None,
        })
        .unwrap_or_else(|| "no trial ran".into())
}
