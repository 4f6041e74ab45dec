//! The soak's engine (`cargo xtask soak` parses its flags and calls
//! [`run`]): epochs for a given time over a random mix of
//! pipelines, sources (a CIFAR-10 folder, a pack read at random or
//! streamed, the same pack on the S3 test server with faults injected),
//! knobs changed between and inside epochs, and checkpoints resumed at
//! random batches, checking as it goes that every epoch's digest is the
//! uninterrupted reference's, that every error names what failed, and
//! that memory, threads and descriptors come back after every epoch. The
//! [`Report`] says what it saw; [`Report::failure`] whether that is a
//! failure (a mismatch, an unnamed or unexpected error, growth past the
//! margins).

use adapt::engines::remote::testing::{Fault, S3Server};
use adapt::generate::Request;
use adapt::{DatasetSpec, LoaderKnobs, PackOptions, Pipeline, RemoteOptions, Run, RunOptions};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What a soak is asked.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// How long to run.
    pub seconds: u64,
    /// Seed of the mix.
    pub seed: u64,
    /// Where the data and caches go (`None`: a temporary folder, removed
    /// after).
    pub dir: Option<PathBuf>,
}

/// What stopped a soak before its end (a failure it measured is its
/// [`Report::failure`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SoakError {
    /// Preparing the data or a run failed.
    #[error(transparent)]
    Adapt(#[from] adapt::AdaptError),
    /// A folder of the soak could not be made or cleared.
    #[error("{}: {source}", path.display())]
    Io {
        /// The folder.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// An epoch failed in a way the plan did not provoke.
    #[error("epoch {plan}: {source}")]
    Epoch {
        /// The epoch's plan.
        plan: String,
        /// What failed.
        source: Box<SoakError>,
    },
    /// A running epoch had no checkpoint to resume from.
    #[error("no checkpoint mid-epoch")]
    NoState,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> SoakError + '_ {
    move |source| SoakError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Resident memory may end an epoch this far above its baseline (the
/// allocator keeps freed pages, caches of decoded frames are bounded).
const RSS_MARGIN: u64 = 96 << 20;
/// Threads and descriptors must come back to the baseline, give or take
/// this many, within [`SETTLE`] after an epoch.
const THREADS_MARGIN: u64 = 0;
const FDS_MARGIN: u64 = 2;
const SETTLE: Duration = Duration::from_secs(3);

const URL: &str = "s3://soak/cifar";
const PIPELINES: [(&str, &str); 3] = [
    ("", "f32"),
    ("random_crop(32,padding=4),hflip,normalize(cifar10)", "f32"),
    ("random_resized_crop(16),hflip", "u8"),
];

/// The sources an epoch reads; a remote pack holds the local pack's bytes,
/// so the two share references.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    Folder,
    Pack { stream: bool },
    Remote { stream: bool, cached: bool },
}

impl Source {
    /// The source whose uninterrupted epochs are this one's reference.
    fn reference(self) -> Source {
        match self {
            Source::Remote { stream, .. } => Source::Pack { stream },
            s => s,
        }
    }
}

/// A small counter-based generator (splitmix64): the mix is the seed's.
struct Mix(u64);
impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// What a soak saw.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Seconds it ran.
    pub seconds: f64,
    /// Epochs read (the warm-up's aside).
    pub epochs: u64,
    /// Checkpoints resumed by a new run.
    pub resumes: u64,
    /// Knob changes inside an epoch.
    pub reconfigures: u64,
    /// Epochs whose digest was not the uninterrupted reference's.
    pub digest_mismatches: u64,
    /// Faults the test server injected.
    pub faults_injected: u64,
    /// Outages provoked (the fault on every request from a batch on).
    pub outages: u64,
    /// Errors that named the object that failed.
    pub named_errors: u64,
    /// Errors that named nothing.
    pub unnamed_errors: u64,
    /// Errors no fault provoked.
    pub unexpected_errors: u64,
    /// Resident memory past the baseline, at most.
    pub rss_growth_bytes: u64,
    /// Threads past the baseline, at most.
    pub threads_growth: u64,
    /// Descriptors past the baseline, at most.
    pub fds_growth: u64,
}

impl Report {
    /// Why this report is a failure, or `None`.
    pub fn failure(&self) -> Option<String> {
        let failed = self.digest_mismatches + self.unnamed_errors + self.unexpected_errors > 0
            || self.rss_growth_bytes > RSS_MARGIN
            || self.threads_growth > THREADS_MARGIN
            || self.fds_growth > FDS_MARGIN;
        failed.then(|| {
            format!(
                "the soak failed (margins: {} MiB resident, {THREADS_MARGIN} threads, \
                 {FDS_MARGIN} descriptors)",
                RSS_MARGIN >> 20
            )
        })
    }

    /// The report as the one JSON line the verb prints.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "seconds": (self.seconds * 10.0).round() / 10.0,
            "epochs": self.epochs,
            "resumes": self.resumes,
            "reconfigures": self.reconfigures,
            "digest_mismatches": self.digest_mismatches,
            "faults_injected": self.faults_injected,
            "outages": self.outages,
            "named_errors": self.named_errors,
            "unnamed_errors": self.unnamed_errors,
            "unexpected_errors": self.unexpected_errors,
            "rss_growth_bytes": self.rss_growth_bytes,
            "threads_growth": self.threads_growth,
            "fds_growth": self.fds_growth,
        })
    }
}

/// One epoch's plan.
#[derive(Debug)]
struct Plan {
    pipeline: usize,
    source: Source,
    epoch: u64,
    knobs: (usize, usize),
    /// Resume at this batch with these knobs.
    resume: Option<(usize, (usize, usize))>,
    /// Reconfigure at this batch.
    reconfigure: Option<(usize, (usize, usize))>,
    /// A burst (fault, every, times), or the fault on every request from
    /// this batch on.
    burst: Option<(Fault, usize, usize)>,
    outage: Option<(Fault, usize)>,
}

struct Soak {
    dir: PathBuf,
    server: S3Server,
    references: HashMap<(usize, Source, u64), [u8; 32]>,
    report: Report,
    caches: u64,
}

/// Soaks for `options.seconds` and says what it saw.
pub fn run(options: &SoakOptions) -> Result<Report, SoakError> {
    let tmp;
    let dir = match &options.dir {
        Some(d) => d.clone(),
        None => {
            tmp = TempDir::new()?;
            tmp.0.clone()
        }
    };
    let mut soak = Soak::prepare(&dir)?;
    let mut mix = Mix(options.seed);
    let started = Instant::now();
    // A warm-up round over every source, so the baseline holds what stays
    // for the whole process (the S3 client's runtime, the allocator's
    // arenas).
    let warmup = [
        Source::Folder,
        Source::Pack { stream: true },
        Source::Remote {
            stream: true,
            cached: true,
        },
    ];
    for (i, s) in warmup.into_iter().enumerate() {
        soak.epoch(&plain(i % PIPELINES.len(), s))?;
    }
    let baseline = Usage::settled(None);
    let mut most = baseline;
    while started.elapsed() < Duration::from_secs(options.seconds) {
        let plan = soak.plan(&mut mix);
        soak.epoch(&plan).map_err(|e| SoakError::Epoch {
            plan: format!("{plan:?}"),
            source: Box::new(e),
        })?;
        let now = Usage::settled(Some(baseline));
        if now.threads > baseline.threads + THREADS_MARGIN || now.fds > baseline.fds + FDS_MARGIN {
            eprintln!(
                "after {plan:?}: {now:?} (baseline {baseline:?}): {}",
                threads()
            );
        }
        most = most.max(now);
    }
    let r = &mut soak.report;
    r.seconds = started.elapsed().as_secs_f64();
    r.rss_growth_bytes = most.rss.saturating_sub(baseline.rss);
    r.threads_growth = most.threads.saturating_sub(baseline.threads);
    r.fds_growth = most.fds.saturating_sub(baseline.fds);
    Ok(soak.report.clone())
}

/// An epoch with nothing changed inside it.
fn plain(pipeline: usize, source: Source) -> Plan {
    Plan {
        pipeline,
        source,
        epoch: 0,
        knobs: (2, 2),
        resume: None,
        reconfigure: None,
        burst: None,
        outage: None,
    }
}

impl Soak {
    /// Writes a CIFAR-10 folder, packs it, publishes the pack to a test
    /// server, and sets the remote options (three retries, one second a
    /// request) pipelines use.
    fn prepare(dir: &Path) -> Result<Self, SoakError> {
        let folder = dir.join("cifar10");
        if !folder.join("data_batch_1.bin").exists() {
            let request = Request {
                count: Some(640),
                ..Request::new(&adapt::Cifar10Format, 7)
            };
            adapt::generate(&request, &folder, &|_| {})?;
        }
        let s3 = dir.join("s3");
        let server = S3Server::start(&s3, "soak").map_err(io(&s3))?;
        let source = adapt::pack::Source::open(&DatasetSpec::new(&adapt::Cifar10Format, &folder))?;
        let options = PackOptions {
            shard_size: 128,
            frame_bytes: 64 << 10,
            overwrite: true,
            ..PackOptions::default()
        };
        let pack = dir.join("pack");
        if pack.exists() {
            std::fs::remove_dir_all(&pack).map_err(io(&pack))?;
        }
        let staging = server.options(&dir.join("staging"));
        adapt::pack::write(
            &source,
            &pack.to_string_lossy(),
            &options,
            &staging,
            &|_| {},
        )?;
        adapt::pack::write(&source, URL, &options, &staging, &|_| {})?;
        let soak = Self {
            dir: dir.to_owned(),
            server,
            references: HashMap::new(),
            report: Report::default(),
            caches: 0,
        };
        soak.remote_options(true);
        Ok(soak)
    }

    /// Sets the options of `s3://` pipelines: a fresh cache folder (or
    /// none: every read a range request).
    fn remote_options(&self, cached: bool) -> PathBuf {
        let cache = self.dir.join(format!("cache-{}", self.caches));
        adapt::set_default_options(RemoteOptions {
            retries: 3,
            retry_timeout: Duration::from_secs(4),
            request_timeout: Duration::from_secs(1),
            chunk_bytes: 64 << 10,
            cache_bytes: if cached { 1 << 30 } else { 0 },
            ..self.server.options(&cache)
        });
        cache
    }

    fn plan(&self, mix: &mut Mix) -> Plan {
        let source = match mix.below(5) {
            0 => Source::Folder,
            1 | 2 => Source::Pack {
                stream: mix.chance(50),
            },
            _ => Source::Remote {
                stream: mix.chance(70),
                cached: mix.chance(70),
            },
        };
        let mut knobs = || (mix.below(4) as usize, 1 + mix.below(4) as usize);
        let (k0, k1, k2) = (knobs(), knobs(), knobs());
        let batches = 20;
        let remote = matches!(source, Source::Remote { .. });
        let faults = [
            Fault::Status(500),
            Fault::Status(503),
            Fault::Reset,
            Fault::ShortBody,
            Fault::LongLength,
            Fault::Stall(Duration::from_millis(1500)),
        ];
        let fault = faults[mix.below(faults.len() as u64) as usize];
        Plan {
            pipeline: mix.below(PIPELINES.len() as u64) as usize,
            source,
            epoch: mix.below(3),
            knobs: k0,
            resume: mix.chance(40).then(|| (mix.below(batches) as usize, k1)),
            reconfigure: mix.chance(40).then(|| (mix.below(batches) as usize, k2)),
            // At most `retries` (3) faults a burst: every fault of a burst
            // can land on one request (its retries are the next requests
            // while the other workers wait), tried retries + 1 times.
            burst: (remote && mix.chance(60))
                .then(|| (fault, 2 + mix.below(4) as usize, 1 + mix.below(3) as usize)),
            outage: (remote && mix.chance(15)).then(|| (fault, mix.below(4) as usize)),
        }
    }

    fn pipeline(&self, index: usize, source: Source) -> Result<Pipeline, SoakError> {
        let spec = match source {
            Source::Folder => DatasetSpec::new(&adapt::Cifar10Format, self.dir.join("cifar10")),
            Source::Pack { .. } => DatasetSpec::new(&adapt::PackFormat, self.dir.join("pack")),
            Source::Remote { .. } => DatasetSpec::new(&adapt::PackFormat, URL),
        };
        let (steps, output) = PIPELINES[index];
        let pipeline = Pipeline::new(spec)
            .with_transforms(steps)
            .and_then(|p| p.with_output(output))
            .map_err(adapt::AdaptError::from)?;
        Ok(pipeline)
    }

    fn options(source: Source, knobs: (usize, usize)) -> RunOptions {
        let stream = match source {
            Source::Folder => false,
            Source::Pack { stream } | Source::Remote { stream, .. } => stream,
        };
        RunOptions {
            batch_size: 32,
            shuffle: true,
            seed: 5,
            knobs: LoaderKnobs::workers(knobs.0, knobs.1),
            stream: stream.then_some(96),
            ..RunOptions::default()
        }
    }

    /// The digest of the uninterrupted epoch `plan` must give: its
    /// reference source's, read with no workers, no faults.
    fn reference(&mut self, plan: &Plan) -> Result<[u8; 32], SoakError> {
        let key = (plan.pipeline, plan.source.reference(), plan.epoch);
        if let Some(d) = self.references.get(&key) {
            return Ok(*d);
        }
        let pipeline = self.pipeline(plan.pipeline, key.1)?;
        let mut run = Run::open(&pipeline, &Self::options(key.1, (0, 1)))?;
        run.start(plan.epoch)?;
        let mut digest = Sha256::new();
        while let Some(b) = run.next(&mut || false) {
            hash(&mut digest, &b?);
        }
        let d: [u8; 32] = digest.finalize().into();
        self.references.insert(key, d);
        Ok(d)
    }

    /// Runs one epoch as planned and checks it.
    fn epoch(&mut self, plan: &Plan) -> Result<(), SoakError> {
        let want = self.reference(plan)?;
        let cache = match plan.source {
            Source::Remote { cached, .. } => {
                self.caches += 1;
                Some(self.remote_options(cached))
            }
            _ => None,
        };
        let before = self.server.faults_injected();
        self.report.outages += u64::from(plan.outage.is_some());
        let outcome = self.load(plan);
        self.server.clear_faults();
        self.report.faults_injected += (self.server.faults_injected() - before) as u64;
        if let Some(c) = cache {
            let _ = std::fs::remove_dir_all(c);
        }
        self.report.epochs += 1;
        match outcome {
            Ok(got) => {
                if got != want {
                    self.report.digest_mismatches += 1;
                    eprintln!("digest mismatch: {plan:?}");
                }
            }
            Err(e) => {
                let text = format!("{e:#}");
                let expected = plan.outage.is_some();
                if !expected {
                    self.report.unexpected_errors += 1;
                    eprintln!("unexpected error: {plan:?}: {text}");
                } else if text.contains(&format!("{URL}/")) {
                    self.report.named_errors += 1;
                } else {
                    self.report.unnamed_errors += 1;
                    eprintln!("an error that names no object: {plan:?}: {text}");
                }
            }
        }
        Ok(())
    }

    /// The epoch's digest, through resumes, reconfigures and faults.
    fn load(&mut self, plan: &Plan) -> Result<[u8; 32], SoakError> {
        let pipeline = self.pipeline(plan.pipeline, plan.source)?;
        let mut run = Run::open(&pipeline, &Self::options(plan.source, plan.knobs))?;
        if let Some((fault, every, times)) = plan.burst {
            self.server.inject(fault, every, Some(times));
        }
        run.start(plan.epoch)?;
        let mut digest = Sha256::new();
        let mut n = 0;
        loop {
            if plan.resume.is_some_and(|(at, _)| at == n) {
                let state = run.state().ok_or(SoakError::NoState)?;
                drop(run);
                let knobs = plan.resume.map_or(plan.knobs, |(_, k)| k);
                run = Run::open(&pipeline, &Self::options(plan.source, knobs))?;
                run.resume(&state)?;
                self.report.resumes += 1;
            }
            if let Some((at, (w, p))) = plan.reconfigure
                && at == n
            {
                run.reconfigure(LoaderKnobs::workers(w, p))?;
                self.report.reconfigures += 1;
            }
            if let Some((fault, at)) = plan.outage
                && at == n
            {
                self.server.inject(fault, 1, None);
            }
            let Some(b) = run.next(&mut || false) else {
                break;
            };
            hash(&mut digest, &b?);
            n += 1;
        }
        Ok(digest.finalize().into())
    }
}

fn hash(digest: &mut Sha256, batch: &adapt::Batch) {
    digest.update(batch.bytes());
    for l in batch.labels() {
        digest.update(l.to_le_bytes());
    }
}

/// Resident bytes, threads (the test server's aside) and open descriptors
/// of this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Usage {
    rss: u64,
    threads: u64,
    fds: u64,
}

impl Usage {
    fn now() -> Self {
        let count = |d: &str| std::fs::read_dir(d).map_or(0, |r| r.count() as u64);
        let rss = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(0, |kb| kb << 10);
        // The test server's threads are not the loader's: in use it is
        // another process (its blocking pool grows with the requests).
        let threads = std::fs::read_dir("/proc/self/task")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|t| {
                std::fs::read_to_string(t.path().join("comm"))
                    .map_or(true, |n| n.trim() != "s3-test-server")
            })
            .count() as u64;
        Self {
            rss,
            threads,
            fds: count("/proc/self/fd"),
        }
    }

    /// The usage once threads and descriptors of the last epoch are gone
    /// (waiting up to [`SETTLE`] for them to come back to `baseline`).
    fn settled(baseline: Option<Usage>) -> Self {
        let deadline = Instant::now() + SETTLE;
        loop {
            let u = Self::now();
            let back = baseline.is_none_or(|b| {
                u.threads <= b.threads + THREADS_MARGIN && u.fds <= b.fds + FDS_MARGIN
            });
            if back || Instant::now() >= deadline {
                if baseline.is_none() {
                    std::thread::sleep(Duration::from_millis(500));
                    return Self::now();
                }
                return u;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn max(self, o: Usage) -> Usage {
        Usage {
            rss: self.rss.max(o.rss),
            threads: self.threads.max(o.threads),
            fds: self.fds.max(o.fds),
        }
    }
}

/// The names of this process's threads, counted: what stayed.
fn threads() -> String {
    let mut names: HashMap<String, usize> = HashMap::new();
    for t in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        *names.entry(name.trim().to_owned()).or_default() += 1;
    }
    let mut v: Vec<_> = names
        .into_iter()
        .map(|(n, c)| format!("{n} x{c}"))
        .collect();
    v.sort();
    v.join(", ")
}

/// A temporary folder, removed when dropped.
struct TempDir(PathBuf);
impl TempDir {
    fn new() -> Result<Self, SoakError> {
        let d = std::env::temp_dir().join(format!("adapt-soak-{}", std::process::id()));
        std::fs::create_dir_all(&d).map_err(io(&d))?;
        Ok(Self(d))
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
