//! The tuner on small generated data.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

use adapt_pipeline::{DatasetSpec, Pipeline};
use adapt_search::{AvlOptions, NoisePolicy};
use adapt_tune::{
    KnobSpace, LoaderKnobs, Machine, Profile, Strategy, TrialSpec, TuneError, TuneOptions, replay,
    run, tune_command,
};
use std::path::Path;

fn quiet(_: &str) {}

fn small_cifar(dir: &Path) {
    adapt_synth::cifar10(
        dir,
        adapt_synth::Cifar10Spec {
            train: 600,
            test: 10,
            seed: 3,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
}

fn options(dir: &Path, strategy: Strategy) -> TuneOptions {
    TuneOptions {
        pipeline: Pipeline::new(DatasetSpec::named("cifar10", dir).unwrap()),
        batch_sizes: vec![32],
        strategy,
        trial: TrialSpec {
            samples: 256,
            epochs: 2,
            seed: 1,
        },
        final_repeats: 1,
        final_samples: Some(256),
        // Short fixed trials: these tests check behaviour, not timings.
        trial_seconds: None,
        noise_repeats: 0,
        ..TuneOptions::default()
    }
}

/// Whether two JSON values have the same key structure: the same keys in
/// every object, recursively, and arrays alike element by element where
/// both have one. How many elements an array has is data, not structure:
/// the AVL path is empty in a run whose root was best at every level, and
/// which run that is depends on the trials' timings. So is which trace
/// entry is a trial cut short or skipped by pruning (a note, no seconds):
/// the trace's entries are not compared.
fn same_shape(a: &serde_json::Value, b: &serde_json::Value) -> Result<(), String> {
    use serde_json::Value as V;
    match (a, b) {
        (V::Object(x), V::Object(y)) => {
            let (kx, ky): (Vec<_>, Vec<_>) = (x.keys().collect(), y.keys().collect());
            if kx != ky {
                return Err(format!("keys {kx:?} against {ky:?}"));
            }
            // A prefetch factor is null with 0 workers (PyTorch's None), a
            // number with workers: which one is picked is timing, not shape.
            let prefetch = |k: &str, v: &V, w: &V| {
                k == "prefetch_factor" && (v.is_null() || v.is_u64()) && (w.is_null() || w.is_u64())
            };
            x.iter()
                .filter(|(k, v)| *k != "trace" && !prefetch(k, v, &y[*k]))
                .try_for_each(|(k, v)| same_shape(v, &y[k]).map_err(|e| format!("{k}.{e}")))
        }
        (V::Array(x), V::Array(y)) => x
            .iter()
            .zip(y)
            .try_for_each(|(u, v)| same_shape(u, v).map_err(|e| format!("[]{e}"))),
        (V::Null, V::Null) => Ok(()),
        (V::Null, _)
        | (_, V::Null)
        | (V::Object(_), _)
        | (_, V::Object(_))
        | (V::Array(_), _)
        | (_, V::Array(_)) => Err(format!("{a} against {b}")),
        _ => Ok(()),
    }
}

#[test]
fn both_strategies_pick_from_the_space_and_report_table_1() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path());
    let report = run(&options(dir.path(), Strategy::Both), &quiet).unwrap();
    let machine = Machine::detect();
    let space = KnobSpace::for_machine(&machine);
    let configs = space.space().configurations();
    let r = &report.runs[0];
    assert_eq!(r.grid_size, configs.len());
    assert_eq!(r.grid_size, 1 + 2 * machine.cores * 12 * 2);
    assert!(configs.contains(&space.config(&r.adapt.config)));
    assert!(r.adapt_rank.is_some_and(|k| k >= 1 && k <= r.grid_size));
    assert_eq!(r.default.config, LoaderKnobs::DEFAULT);
    // Every canonical configuration ran once in the grid (none pruned here).
    assert_eq!(
        r.search.grid.as_ref().unwrap().trials,
        r.grid_size - r.pruned
    );
    assert!(r.search.avl.as_ref().unwrap().trials > 0);
    assert_eq!(r.grid.len(), r.grid_size);
    assert!(
        r.trace.iter().any(|t| t.strategy == "avl") && r.trace.iter().any(|t| t.strategy == "grid")
    );
    let json = serde_json::to_value(&report).unwrap();
    for key in [
        "default",
        "recommended",
        "optimal",
        "adapt",
        "adapt_rank",
        "grid_size",
        "search",
        "trace",
    ] {
        assert!(json["runs"][0].get(key).is_some(), "missing {key}");
    }
    assert_eq!(
        json["runs"][0]["adapt"]["config"]
            .as_object()
            .unwrap()
            .len(),
        4
    );
    assert!(report.table().contains("batch size 32"));

    // Replay on the recorded grid: no trials run, stats for each strategy.
    let strategies = [
        ("plain", AvlOptions::plain()),
        (
            "refined+noise",
            AvlOptions {
                refine: true,
                noise: NoisePolicy {
                    threshold: 0.05,
                    max_repeats: 3,
                    candidates: 3,
                },
                prune: false,
            },
        ),
    ];
    let stats = replay(&report, &strategies, 10, 0.05).unwrap();
    assert_eq!(stats.len(), 2);
    // A report of an earlier version (a prefetch factor of 2 beside 0
    // workers) replays the same.
    let mut older = report.clone();
    let mut changed = 0;
    for c in &mut older.runs[0].grid {
        if c.config.num_workers == 0 {
            c.config.prefetch_factor = Some(2);
            changed += 1;
        }
    }
    assert_eq!(
        changed, 1,
        "the grid holds the no-workers configuration once"
    );
    assert_eq!(
        replay(&older, &strategies, 10, 0.05).unwrap(),
        replay(&report, &strategies, 10, 0.05).unwrap()
    );
    // A report read back with nonsense times is refused, not replayed.
    for bad in [-1.0, 0.0, f64::NAN] {
        let mut broken = report.clone();
        broken.runs[0].grid[0].seconds = bad;
        assert!(replay(&broken, &strategies, 10, 0.0).is_err(), "{bad} s");
    }
    assert!(
        replay(&report, &strategies, 10, 1.5).is_err(),
        "noise past 100%"
    );
    assert!(replay(&report, &strategies, 0, 0.0).is_err(), "no seed");
    assert!(
        stats
            .iter()
            .all(|s| (0.0..=1.0).contains(&s.within_5_percent) && s.mean_trials > 0.0)
    );

    // The SVG plot is written.
    let svg = dir.path().join("plot.svg");
    adapt_tune::write_svg(&report, &svg).unwrap();
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn same_seed_gives_the_same_json_structure() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path());
    let a =
        serde_json::to_value(run(&options(dir.path(), Strategy::Avl), &quiet).unwrap()).unwrap();
    let b =
        serde_json::to_value(run(&options(dir.path(), Strategy::Avl), &quiet).unwrap()).unwrap();
    if let Err(e) = same_shape(&a, &b) {
        panic!("the two reports differ in structure at {e}");
    }
}

#[test]
fn the_budget_prunes_before_running() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path());
    let batch_bytes = 32 * 3072 * 4;
    // Room for 5 batches: num_workers × prefetch_factor ≤ 4.
    let opts = TuneOptions {
        budget_bytes: Some(5 * batch_bytes),
        ..options(dir.path(), Strategy::Avl)
    };
    let report = run(&opts, &quiet).unwrap();
    let r = &report.runs[0];
    let fits = |k: &LoaderKnobs| k.num_workers * k.effective_prefetch() <= 4;
    assert!(fits(&r.adapt.config));
    assert!(
        r.trace
            .iter()
            .filter(|t| t.seconds.is_some())
            .all(|t| fits(&t.config))
    );
    assert!(
        r.trace.iter().filter(|t| t.seconds.is_none()).all(|t| t
            .note
            .as_deref()
            .unwrap_or("")
            .starts_with("infeasible"))
    );
    let space = KnobSpace::for_machine(&Machine::detect());
    let expected = space
        .space()
        .configurations()
        .iter()
        .filter(|c| !fits(&KnobSpace::knobs(c)))
        .count();
    assert_eq!(r.pruned, expected);
    // Less than two batches: nothing can run.
    let opts = TuneOptions {
        budget_bytes: Some(batch_bytes),
        ..options(dir.path(), Strategy::Avl)
    };
    assert!(matches!(
        run(&opts, &quiet),
        Err(TuneError::NothingMeasured(_))
    ));
}

#[test]
fn a_profile_round_trips_and_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path());
    let profile = dir.path().join("profile.json");
    let opts = TuneOptions {
        profile: Some(profile.clone()),
        ..options(dir.path(), Strategy::Avl)
    };
    let first = run(&opts, &quiet).unwrap();
    assert_eq!(first.runs[0].adapt_picked_by, "avl");
    let second = run(&opts, &quiet).unwrap();
    assert_eq!(second.runs[0].adapt_picked_by, "profile");
    assert!(second.runs[0].search.avl.is_none());
    assert_eq!(second.runs[0].adapt.config, first.runs[0].adapt.config);
    let retuned = run(
        &TuneOptions {
            retune: true,
            ..opts.clone()
        },
        &quiet,
    )
    .unwrap();
    assert_eq!(retuned.runs[0].adapt_picked_by, "avl");

    let p = Profile::load(&profile).unwrap();
    // Profiles are keyed by the pipeline's identity (data, steps, output).
    let fingerprint = first.dataset["pipeline"]["identity"].as_str().unwrap();
    let machine = Machine::detect();
    let base = adapt_loader::LoaderConfig {
        batch_size: 32,
        ..Default::default()
    };
    let c = p.loader_config(fingerprint, &base, &machine).unwrap();
    // The retuned run replaced the entry.
    assert_eq!(
        c.knobs.num_workers,
        retuned.runs[0].adapt.config.num_workers
    );
    let other = Machine {
        cores: machine.cores + 7,
        ..machine
    };
    assert!(
        p.loader_config(fingerprint, &base, &other).is_none(),
        "another machine's profile is not used"
    );

    // Knobs read back from a profile are checked as a user's would be.
    let text = std::fs::read_to_string(&profile).unwrap();
    let absurd = text.replacen("\"num_workers\": ", "\"num_workers\": 9999999", 1);
    std::fs::write(&profile, absurd).unwrap();
    let err = Profile::load(&profile).unwrap_err();
    assert!(err.to_string().contains("unusable knobs"), "{err}");

    std::fs::write(&profile, "{ not json").unwrap();
    let err = run(&opts, &quiet).unwrap_err();
    assert!(
        matches!(&err, TuneError::File { path, .. } if path == &profile),
        "{err}"
    );
}

#[test]
fn command_tuning_finds_the_known_optimum_and_reports_failures() {
    // Sleeps 30 ms per worker away from 2: the optimum is num_workers = 2.
    let template = "n={num_workers}; sleep 0.0$(( (n > 2 ? n - 2 : 2 - n) * 3 ))";
    let opts = TuneOptions {
        final_repeats: 1,
        avl: AvlOptions {
            refine: true,
            noise: NoisePolicy::OFF,
            prune: false,
        },
        ..TuneOptions::default()
    };
    let report = tune_command(template, &opts, &quiet).unwrap();
    assert_eq!(report.runs[0].adapt.config.num_workers, 2);

    // Every configuration with workers fails: the failures are traced with
    // their exit status, and the only working configuration is chosen.
    let report = tune_command("exit {num_workers}", &opts, &quiet).unwrap();
    let r = &report.runs[0];
    assert_eq!(r.adapt.config.num_workers, 0);
    assert!(r.trace.iter().any(|t| {
        t.note
            .as_deref()
            .is_some_and(|n| n.contains("exit status") && n.contains("exit 1"))
    }));
    assert!(
        tune_command("true", &opts, &quiet).is_err(),
        "a command without placeholders is refused"
    );
}

#[test]
fn bad_options_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let named = |kind: &str, path: &Path| TuneOptions {
        pipeline: Pipeline::new(DatasetSpec::named(kind, path).unwrap()),
        ..TuneOptions::default()
    };
    // An unknown format is refused where the name is read, listing them.
    let err = DatasetSpec::named("mnist", dir.path()).unwrap_err();
    assert!(err.to_string().contains("unknown dataset"), "{err}");
    assert!(err.to_string().contains("webdataset"), "{err}");
    let err = run(&named("cifar10", &dir.path().join("absent")), &quiet).unwrap_err();
    assert!(err.to_string().contains("does not exist"), "{err}");
    let err = run(
        &TuneOptions {
            batch_sizes: vec![0],
            ..named("cifar10", dir.path())
        },
        &quiet,
    )
    .unwrap_err();
    assert!(matches!(err, TuneError::InvalidOption(_)), "{err}");
}

/// Issue 14: an external command that hangs is ended with its whole process
/// group at the trial limit, and one that prints without end cannot fill
/// the tuner's memory.
#[test]
fn command_trials_are_bounded_in_time_and_output() {
    use adapt_search::Objective;
    let space = adapt_tune::KnobSpace::for_machine(&Machine::detect());
    let config = space.config(&adapt_tune::LoaderKnobs::DEFAULT);
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("child-alive");
    // A shell that leaves a grandchild behind: the group kill must end it.
    let template = format!(
        "(sleep 3; touch {}) & sleep 30 # {{num_workers}}",
        marker.display()
    );
    let mut hang = adapt_tune::CommandObjective::new(&template).with_limit(
        adapt_tune::TrialLimit::Fixed(std::time::Duration::from_millis(500)),
    );
    let start = std::time::Instant::now();
    let err = hang.measure(&config).unwrap_err().to_string();
    assert!(err.contains("trial limit"), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(3));
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert!(
        !marker.exists(),
        "the trial's background child was killed with its group"
    );

    // The default limit follows the trials measured: a configuration
    // that hangs after a fast one finished is ended at the multiple of it
    // (here the floor), not after the first trial's limit.
    let measured = adapt_tune::TrialLimit::Measured {
        first: std::time::Duration::from_secs(20),
        multiple: 3.0,
        floor: std::time::Duration::from_millis(400),
    };
    let mut mixed = adapt_tune::CommandObjective::new(
        "if [ {num_workers} -ge 1 ]; then sleep 30; else sleep 0.05; fi",
    )
    .with_limit(measured);
    let fast = space.config(&adapt_tune::LoaderKnobs {
        num_workers: 0,
        ..adapt_tune::LoaderKnobs::DEFAULT
    });
    let slow = space.config(&adapt_tune::LoaderKnobs {
        num_workers: 1,
        ..adapt_tune::LoaderKnobs::DEFAULT
    });
    assert!(mixed.slowest_finished().is_none());
    assert!(mixed.describe_limit().contains("no trial finished"));
    mixed.measure(&fast).unwrap();
    let finished = mixed.slowest_finished().unwrap();
    assert!(finished >= std::time::Duration::from_millis(50));
    let start = std::time::Instant::now();
    let err = mixed.clone().measure(&slow).unwrap_err().to_string();
    let took = start.elapsed();
    assert!(
        took >= std::time::Duration::from_millis(400) && took < std::time::Duration::from_secs(10),
        "ended after {took:?}"
    );
    assert!(err.contains("trial limit of 0.400 s"), "{err}");
    assert!(err.contains("slowest finished trial"), "{err}");
    assert_eq!(
        mixed.slowest_finished(),
        Some(finished),
        "a clone shares the record; an ended trial is not a finished one"
    );

    let mut loud = adapt_tune::CommandObjective::new(
        "head -c 50000000 /dev/zero | tr '\\0' x; echo; echo last words; exit 3 # {num_workers}",
    );
    let err = loud.measure(&config).unwrap_err().to_string();
    assert!(err.contains("last words"), "{err}");
    assert!(err.len() < 100_000, "output kept: {} bytes", err.len());
}

#[test]
fn command_tuning_can_time_what_the_program_prints() {
    // The wall time is the same for every configuration; the printed
    // metric is best at two workers.
    let template =
        "sleep 0.02; n={num_workers}; echo \"adapt-seconds: $(( (n > 2 ? n - 2 : 2 - n) + 1 ))\"";
    let opts = TuneOptions {
        final_repeats: 1,
        noise_repeats: 2,
        metric: Some("adapt-seconds: ([0-9.]+)".into()),
        ..TuneOptions::default()
    };
    let report = tune_command(template, &opts, &quiet).unwrap();
    let r = &report.runs[0];
    assert_eq!(r.adapt.config.num_workers, 2);
    assert_eq!(
        r.adapt.seconds, 1.0,
        "the printed number, not the wall time"
    );
    let n = r.noise.as_ref().unwrap();
    assert_eq!(n.relative_spread, 0.0, "identical printed numbers");
    let limit = report.notes.iter().find(|n| n.starts_with("trial limit"));
    assert!(
        limit.is_some_and(|n| n.contains("after the slowest finished trial's")),
        "the report says the limit it measured: {:?}",
        report.notes
    );
    let secs = report.dataset["trial_limit_seconds"].as_f64().unwrap();
    assert_eq!(secs, 60.0, "the floor, for trials of ~0.02 s");
    // A program that prints no match is a failed trial that says so.
    let err = tune_command(
        "echo nothing {num_workers}",
        &TuneOptions {
            noise_repeats: 0,
            ..opts.clone()
        },
        &quiet,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("printed no line matching"),
        "{err}"
    );
    let err = tune_command(
        template,
        &TuneOptions {
            metric: Some("(unclosed".into()),
            ..opts
        },
        &quiet,
    )
    .unwrap_err();
    assert!(matches!(err, TuneError::Metric { .. }), "{err}");
}

#[test]
fn reports_say_what_ran_measure_the_noise_and_name_the_cheapest() {
    let dir = tempfile::tempdir().unwrap();
    small_cifar(dir.path());
    let opts = TuneOptions {
        strategy: Strategy::Both,
        trial_seconds: Some(0.05),
        noise_repeats: 3,
        train_step: Some(std::time::Duration::from_millis(2)),
        ..options(dir.path(), Strategy::Both)
    };
    let report = run(&opts, &quiet).unwrap();
    let st = &report.strategy;
    assert_eq!((st.search.as_str(), st.avl.as_str()), ("both", "refined"));
    assert_eq!(st.threshold_from, "measured");
    assert_eq!(st.train_step_ms, 2.0);
    let r = &report.runs[0];
    let n = r.noise.as_ref().unwrap();
    assert_eq!(n.seconds.len(), 3);
    assert!(
        n.median >= 0.05 * 0.5,
        "trials were lengthened toward 0.05 s: {n:?}"
    );
    assert!(r.trial.unwrap().samples >= 256);
    // Measured on the recommended configuration and on the busiest one;
    // the noisier sets the threshold.
    assert_eq!(r.noise_probes.len(), 2);
    assert_eq!(
        r.noise_probes[0].config,
        adapt_tune::recommended_knobs(&report.machine)
    );
    assert_eq!(
        r.noise_probes[1].config.num_workers,
        2 * report.machine.cores
    );
    assert!(r.noise_probes.iter().all(|p| p.seconds.len() == 3));
    let widest = r
        .noise_probes
        .iter()
        .map(|p| p.relative_spread)
        .fold(0.0, f64::max);
    assert_eq!(n.relative_spread, widest);
    assert_eq!(r.trace.iter().filter(|t| t.strategy == "noise").count(), 6);
    // The searches start from the probes' trials: they never run a probe's
    // configuration as a first measurement (only as the race's next one);
    // the grid measures every configuration itself.
    for p in &r.noise_probes {
        let of = |s: &str| {
            r.trace
                .iter()
                .filter(|t| t.strategy == s && t.config == p.config)
                .map(|t| t.repeat)
                .collect::<Vec<_>>()
        };
        assert!(of("avl").iter().all(|&k| k > 3), "{:?}", of("avl"));
        assert_eq!(of("grid"), [1]);
    }
    // The other descent ran beside the picking one and the grid, with the
    // same race, and the report names it.
    let other = if report.strategy.avl == "refined" {
        "plain"
    } else {
        "refined"
    };
    assert!(r.search.avl_other.is_some() && r.other.is_some() && r.other_rank.is_some());
    assert_eq!(r.other_avl.as_deref(), Some(other));
    assert!(r.trace.iter().any(|t| t.strategy == format!("avl-{other}")));
    // The cheapest within the noise never uses more threads than the pick.
    let c = r.cheapest.as_ref().unwrap();
    assert!(
        c.config.num_workers
            <= r.optimal
                .as_ref()
                .unwrap()
                .config
                .num_workers
                .max(r.adapt.config.num_workers)
    );
    let text = report.table();
    assert!(
        text.contains("search: both over the machine space (AVL refined")
            && text.contains("cheapest"),
        "{text}"
    );
    assert!(text.contains("noise"), "{text}");
}

/// Samples that take a millisecond each to read (sleeping, not computing:
/// more workers overlap them on any machine).
struct Slow;
impl adapt_dataset::Dataset for Slow {
    fn len(&self) -> usize {
        600
    }
    fn read<'a>(
        &'a self,
        i: usize,
        buf: &mut adapt_dataset::Sample,
    ) -> Result<adapt_dataset::Read<'a>, adapt_dataset::Error> {
        adapt_dataset::check_index(i, 600)?;
        std::thread::sleep(std::time::Duration::from_millis(1));
        *buf = adapt_dataset::Sample::hwc(vec![(i % 251) as u8; 12], 2, 2, 3, i as i64)?;
        Ok(adapt_dataset::Read::Filled)
    }
    fn sample_shape(&self) -> Option<adapt_dataset::Shape> {
        Some(adapt_dataset::Shape::new(2, 2, 3))
    }
}

#[test]
fn tuning_while_training_keeps_the_data_and_ends_the_stall() {
    use adapt_loader::{Feed, Loader, LoaderConfig, OutputFormat};
    use std::sync::Arc;
    let config = LoaderConfig {
        batch_size: 4,
        shuffle: true,
        seed: 7,
        output: OutputFormat::U8Nhwc,
        ..LoaderConfig::default()
    };
    let step = std::time::Duration::from_millis(3);
    // PyTorch's defaults (no workers): the consumer waits for every batch.
    let mut fixed = Feed::new(Loader::new(Arc::new(Slow), config.clone()).unwrap());
    fixed.start(0).unwrap();
    let (mut want, mut fixed_waits) = (Vec::new(), Vec::new());
    loop {
        let t = std::time::Instant::now();
        let Some(b) = fixed.next(&mut || false) else {
            break;
        };
        fixed_waits.push(t.elapsed().as_secs_f64());
        want.push(b.unwrap().bytes().to_vec());
        std::thread::sleep(step);
    }
    let machine = Machine::detect();
    let mut auto = adapt_tune::AutotunedFeed::new(
        Feed::new(Loader::new(Arc::new(Slow), config).unwrap()),
        &machine,
        None,
        4,
        2,
    )
    .unwrap();
    auto.feed().start(0).unwrap();
    let mut got = Vec::new();
    while let Some(b) = auto.next(&mut || false) {
        got.push(b.unwrap().bytes().to_vec());
        std::thread::sleep(step);
    }
    assert_eq!(
        got, want,
        "the same batches, in the same order, through every switch"
    );
    let tried = auto.tuner().tried().len();
    assert!(tried >= 3, "it searched: {:?}", auto.tuner().tried());
    let settled = auto
        .tuner()
        .settled()
        .expect("settled within the first epoch");
    assert!(settled.num_workers >= 1, "{settled}");
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let waits = auto.waits();
    let late = mean(&waits[waits.len() * 3 / 4..]);
    let stalled = mean(&fixed_waits);
    println!(
        "consumer wait per batch: defaults {:.2} ms, autotuned (last quarter) {:.2} ms, settled on {settled}",
        stalled * 1e3,
        late * 1e3
    );
    assert!(late < stalled * 0.5, "late {late} vs defaults {stalled}");
}

#[test]
fn trials_too_long_are_shortened_but_keep_enough_batches() {
    use adapt_loader::{LoaderConfig, OutputFormat};
    use adapt_tune::{LoaderObjective, MIN_TRIAL_BATCHES};
    use std::sync::Arc;
    let config = |batch_size| LoaderConfig {
        batch_size,
        shuffle: true,
        output: OutputFormat::U8Nhwc,
        ..LoaderConfig::default()
    };
    let spec = TrialSpec {
        samples: 600,
        epochs: 2,
        seed: 0,
    };
    // 1.2 s of 1-ms samples against a 0.05-s target: shortened, to no
    // fewer than MIN_TRIAL_BATCHES batches of 8.
    let mut o = LoaderObjective::new(Arc::new(Slow), config(8), spec).unwrap();
    let t = o.size_by_time(&LoaderKnobs::DEFAULT, 0.05).unwrap();
    let samples = o.spec().samples;
    assert!(
        (8 * MIN_TRIAL_BATCHES..600).contains(&samples),
        "{samples} samples"
    );
    assert_eq!(o.spec().epochs, 2);
    assert!(t < 1.0, "the shortened trial took {t} s");
    // At batch 128 the whole dataset is under MIN_TRIAL_BATCHES batches:
    // the trial keeps all of it, however long.
    let mut o = LoaderObjective::new(Arc::new(Slow), config(128), spec).unwrap();
    o.size_by_time(&LoaderKnobs::DEFAULT, 0.05).unwrap();
    assert_eq!(o.spec(), spec);
}

#[test]
fn a_search_trial_past_its_bound_is_cut_short_with_its_whole_time_estimated() {
    use adapt_loader::{LoaderConfig, OutputFormat};
    use adapt_search::{Measured, Objective};
    use adapt_tune::{KnobSpace, LoaderObjective};
    use std::sync::Arc;
    let config = LoaderConfig {
        batch_size: 8,
        shuffle: true,
        output: OutputFormat::U8Nhwc,
        ..LoaderConfig::default()
    };
    let spec = TrialSpec {
        samples: 160,
        epochs: 2,
        seed: 0,
    };
    // 320 samples of 1 ms without workers: about 0.32 s whole.
    let mut o = LoaderObjective::new(Arc::new(Slow), config, spec).unwrap();
    let space = KnobSpace::for_machine(&adapt_tune::Machine::detect());
    let c = space.config(&LoaderKnobs::DEFAULT);
    // A bound it does not reach: measured whole (at least the 0.32 s slept).
    let Measured::Whole(whole) = o.measure_until(&c, 30.0).unwrap() else {
        panic!("a trial under its bound was cut");
    };
    assert!(whole >= 0.32, "{whole} s");
    let started = std::time::Instant::now();
    let Measured::CutShort(estimate) = o.measure_until(&c, 0.05).unwrap() else {
        panic!("a {whole}-s trial was not cut at 0.05 s");
    };
    let spent = started.elapsed().as_secs_f64();
    assert!(spent < whole * 0.75, "stopped after {spent} s of {whole}");
    // The time so far scaled by the batches left: about the whole trial's.
    assert!(
        estimate > 0.05 && estimate > whole / 3.0 && estimate < whole * 3.0,
        "the whole trial ({whole} s) estimated at {estimate} s"
    );
    // Without workers batches come at a steady pace: a trial whose pace
    // projects it well past the bound stops before reaching it.
    let bound = whole * 0.6;
    let started = std::time::Instant::now();
    let Measured::CutShort(projected) = o.measure_until(&c, bound).unwrap() else {
        panic!("a {whole}-s trial was not cut at {bound} s");
    };
    let spent = started.elapsed().as_secs_f64();
    assert!(spent < bound, "stopped after {spent} s, bound {bound} s");
    assert!(projected > bound * 1.1, "{projected}");
}
