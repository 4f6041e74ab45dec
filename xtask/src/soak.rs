//! `cargo xtask soak`: epochs for a given time over a random mix of
//! pipelines, sources (a CIFAR-10 folder, a pack read at random or
//! streamed, the same pack on the S3 test server with faults injected),
//! knobs changed between and inside epochs, and checkpoints resumed at
//! random batches, checking as it goes that every epoch's digest is the
//! uninterrupted reference's, that every error names what failed, and
//! that memory, threads and descriptors come back after every epoch. Ends
//! with one JSON line; exits non-zero on a mismatch, an unnamed or
//! unexpected error, or growth past the margins.

use adapt::engines::remote::testing::{Fault, S3Server};
use adapt::generate::Request;
use adapt::{DatasetSpec, LoaderKnobs, PackOptions, Pipeline, RemoteOptions, Run, RunOptions};
use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// How long to run.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// Seed of the mix.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the data and caches go (a temporary folder by default).
    #[arg(long)]
    dir: Option<PathBuf>,
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

#[derive(Default)]
struct Report {
    seconds: f64,
    epochs: u64,
    resumes: u64,
    reconfigures: u64,
    digest_mismatches: u64,
    faults_injected: u64,
    outages: u64,
    named_errors: u64,
    unnamed_errors: u64,
    unexpected_errors: u64,
    rss_growth_bytes: u64,
    threads_growth: u64,
    fds_growth: u64,
}

impl Report {
    fn to_json(&self) -> serde_json::Value {
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

pub fn run(args: Args) -> anyhow::Result<()> {
    let tmp;
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => {
            tmp = TempDir::new()?;
            tmp.0.clone()
        }
    };
    let mut soak = Soak::prepare(&dir)?;
    let mut mix = Mix(args.seed);
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
    while started.elapsed() < Duration::from_secs(args.seconds) {
        let plan = soak.plan(&mut mix);
        soak.epoch(&plan)
            .with_context(|| format!("epoch {:?}", plan))?;
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
    println!("{}", r.to_json());
    let failed = r.digest_mismatches + r.unnamed_errors + r.unexpected_errors > 0
        || r.rss_growth_bytes > RSS_MARGIN
        || r.threads_growth > THREADS_MARGIN
        || r.fds_growth > FDS_MARGIN;
    if failed {
        bail!(
            "the soak failed (margins: {} MiB resident, {THREADS_MARGIN} threads, \
             {FDS_MARGIN} descriptors)",
            RSS_MARGIN >> 20
        );
    }
    Ok(())
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
    fn prepare(dir: &Path) -> anyhow::Result<Self> {
        let folder = dir.join("cifar10");
        if !folder.join("data_batch_1.bin").exists() {
            let request = Request {
                count: Some(640),
                ..Request::new(&adapt::Cifar10Format, 7)
            };
            adapt::generate(&request, &folder, &|_| {})?;
        }
        let server = S3Server::start(&dir.join("s3"), "soak")?;
        let source = adapt::pack::Source::open(&DatasetSpec::new(&adapt::Cifar10Format, &folder))?;
        let options = PackOptions {
            shard_size: 128,
            frame_bytes: 64 << 10,
            overwrite: true,
            ..PackOptions::default()
        };
        let pack = dir.join("pack");
        if pack.exists() {
            std::fs::remove_dir_all(&pack)?;
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

    fn pipeline(&self, index: usize, source: Source) -> anyhow::Result<Pipeline> {
        let spec = match source {
            Source::Folder => DatasetSpec::new(&adapt::Cifar10Format, self.dir.join("cifar10")),
            Source::Pack { .. } => DatasetSpec::new(&adapt::PackFormat, self.dir.join("pack")),
            Source::Remote { .. } => DatasetSpec::new(&adapt::PackFormat, URL),
        };
        let (steps, output) = PIPELINES[index];
        Ok(Pipeline::new(spec)
            .with_transforms(steps)?
            .with_output(output)?)
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
    fn reference(&mut self, plan: &Plan) -> anyhow::Result<[u8; 32]> {
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
    fn epoch(&mut self, plan: &Plan) -> anyhow::Result<()> {
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
    fn load(&mut self, plan: &Plan) -> anyhow::Result<[u8; 32]> {
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
                let state = run.state().context("no state mid-epoch")?;
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
    fn new() -> anyhow::Result<Self> {
        let d = std::env::temp_dir().join(format!("adapt-soak-{}", std::process::id()));
        std::fs::create_dir_all(&d)?;
        Ok(Self(d))
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
