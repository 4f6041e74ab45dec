//! `cargo xtask bench --compare REV`: this tree's release `xtask` against
//! REV's, built into its own target folder, over a fixed short set of
//! loading jobs, alternated run by run; prints new/old ratios with their
//! spread and names a slowdown the spread does not explain.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A ratio under this, with every pair under 1, is named a slowdown.
const SLOWER: f64 = 0.9;

/// One job of the fixed set: a `load` over one of the generated datasets.
struct Job {
    name: &'static str,
    /// The dataset folder under the data root, and its `--dataset` kind.
    data: &'static str,
    kind: &'static str,
    batch: usize,
    transform: Option<&'static str>,
    epochs: usize,
}

const IMAGENET: &str = "random_resized_crop(224),hflip,normalize(imagenet)";
const CIFAR_TRAIN: &str = "random_crop(32,padding=4),hflip,normalize(cifar10)";

const JOBS: &[Job] = &[
    Job {
        name: "cifar10 default, batch 128",
        data: "cifar10",
        kind: "cifar10",
        batch: 128,
        transform: None,
        epochs: 25,
    },
    Job {
        name: "cifar10 default, batch 8",
        data: "cifar10",
        kind: "cifar10",
        batch: 8,
        transform: None,
        epochs: 15,
    },
    Job {
        name: "cifar10 train recipe",
        data: "cifar10",
        kind: "cifar10",
        batch: 128,
        transform: Some(CIFAR_TRAIN),
        epochs: 15,
    },
    Job {
        name: "JPEG folder, ImageNet recipe",
        data: "jpegs",
        kind: "imagefolder",
        batch: 64,
        transform: Some(IMAGENET),
        epochs: 3,
    },
    Job {
        name: "PNG (DigiFace)",
        data: "digiface",
        kind: "digiface",
        batch: 128,
        transform: None,
        epochs: 3,
    },
    Job {
        name: "raw pack (CIFAR-10)",
        data: "cifar10-pack",
        kind: "pack",
        batch: 128,
        transform: None,
        epochs: 4,
    },
];

/// The comparison's settings (from `bench`'s flags).
pub(crate) struct Compare {
    pub(crate) rev: String,
    pub(crate) runs: usize,
    pub(crate) data: Option<PathBuf>,
}

pub(crate) fn run(c: &Compare) -> anyhow::Result<()> {
    if c.runs < 2 {
        bail!(
            "--runs {}: at least 2 runs per side, to see a spread",
            c.runs
        );
    }
    let root = repo_root();
    let sha = git(
        &root,
        &["rev-parse", "--verify", &format!("{}^{{commit}}", c.rev)],
    )
    .with_context(|| format!("{} is not a commit of this repository", c.rev))?;
    let work = root.join("target").join("bench-compare");
    eprintln!("building this tree's release xtask");
    let new = build_here(&root)?;
    let old = build_rev(&root, &work, &sha)?;
    let data = c.data.clone().unwrap_or_else(|| work.join("data"));
    ensure_data(&new, &data)?;
    println!(
        "new: this tree ({}), old: {} ({}); {} runs per side, alternated; samples/s = median of the epochs after the first",
        describe(&root),
        c.rev,
        &sha[..12.min(sha.len())],
        c.runs
    );
    println!(
        "{:<30} {:>12} {:>12} {:>8} {:>15}",
        "job", "new /s", "old /s", "new/old", "pairs"
    );
    let mut slower = Vec::new();
    for job in JOBS {
        let row = compare_job(job, &new, &old, &data, c.runs)?;
        println!("{row}");
        if row.is_slowdown() {
            slower.push(job.name);
        }
    }
    if slower.is_empty() {
        println!("no slowdown outside the spread");
    } else {
        println!("SLOWER than {}: {}", c.rev, slower.join("; "));
    }
    Ok(())
}

/// One job's figures.
struct Row {
    name: &'static str,
    new: f64,
    old: f64,
    ratios: Vec<f64>,
}

impl Row {
    fn ratio(&self) -> f64 {
        median(&self.ratios)
    }
    /// Below [`SLOWER`], and no pair at or above even.
    fn is_slowdown(&self) -> bool {
        self.ratio() < SLOWER && self.ratios.iter().all(|&r| r < 1.0)
    }
}

impl std::fmt::Display for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let lo = self.ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.ratios.iter().copied().fold(0.0, f64::max);
        write!(
            f,
            "{:<30} {:>12.0} {:>12.0} {:>8.3} {:>7.3}-{:<7.3}{}",
            self.name,
            self.new,
            self.old,
            self.ratio(),
            lo,
            hi,
            if self.is_slowdown() { " SLOWER" } else { "" }
        )
    }
}

/// `runs` pairs of the job, the order flipping each pair.
fn compare_job(job: &Job, new: &Path, old: &Path, data: &Path, runs: usize) -> anyhow::Result<Row> {
    let (mut news, mut olds, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..runs {
        let (n, o) = if k % 2 == 0 {
            let n = rate(new, job, data)?;
            (n, rate(old, job, data).context("the old build")?)
        } else {
            let o = rate(old, job, data).context("the old build")?;
            (rate(new, job, data)?, o)
        };
        news.push(n);
        olds.push(o);
        ratios.push(n / o);
    }
    Ok(Row {
        name: job.name,
        new: median(&news),
        old: median(&olds),
        ratios,
    })
}

/// The median samples/s of the epochs after the first of one `load`.
fn rate(xtask: &Path, job: &Job, data: &Path) -> anyhow::Result<f64> {
    let path = data.join(job.data);
    let mut cmd = Command::new(xtask);
    cmd.args(["load", "--dataset", job.kind, "--path"])
        .arg(&path)
        .args(["--batch-size", &job.batch.to_string()])
        .args([
            "--num-workers",
            "2",
            "--prefetch-factor",
            "4",
            "--persistent-workers",
        ])
        .args([
            "--shuffle",
            "--no-digest",
            "--epochs",
            &job.epochs.to_string(),
        ]);
    if let Some(t) = job.transform {
        cmd.args(["--transform", t]);
    }
    let out = cmd
        .output()
        .with_context(|| format!("running {}", xtask.display()))?;
    if !out.status.success() {
        bail!(
            "{} on {}: {}",
            xtask.display(),
            job.name,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    let rates: Vec<f64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["samples_per_s"].as_f64())
        .collect();
    if rates.len() < 2 {
        bail!(
            "{}: {} epoch lines, expected {}",
            job.name,
            rates.len(),
            job.epochs
        );
    }
    Ok(median(&rates[1..]))
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_owned)
}

fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .context("running git")?;
    if !out.status.success() {
        bail!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// HEAD's short hash, with "+ changes" when the tree differs from it.
fn describe(root: &Path) -> String {
    let head = git(root, &["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|_| "?".into());
    let dirty =
        git(root, &["status", "--porcelain", "--untracked-files=no"]).is_ok_and(|s| !s.is_empty());
    if dirty {
        format!("{head} + changes")
    } else {
        head
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// This tree's release xtask (the README's build: no optional feature).
fn build_here(root: &Path) -> anyhow::Result<PathBuf> {
    let target = root.join("target");
    cargo_build(root, &target)?;
    Ok(target.join("release").join("xtask"))
}

/// REV's release xtask, built once from a worktree of REV into its own
/// target folder and kept there; the worktree is removed after the build.
fn build_rev(root: &Path, work: &Path, sha: &str) -> anyhow::Result<PathBuf> {
    let dir = work.join(&sha[..12.min(sha.len())]);
    let binary = dir.join("xtask");
    if binary.is_file() {
        eprintln!("old build: {} (built before)", binary.display());
        return Ok(binary);
    }
    let src = dir.join("src");
    if src.exists() {
        // A build cut off before: start its worktree again.
        let _ = git(
            root,
            &["worktree", "remove", "--force", &src.to_string_lossy()],
        );
        std::fs::remove_dir_all(&src).ok();
    }
    git(root, &["worktree", "prune"])?;
    git(
        root,
        &["worktree", "add", "--detach", &src.to_string_lossy(), sha],
    )?;
    eprintln!("building {sha}'s release xtask in {}", src.display());
    let built = cargo_build(&src, &dir.join("target"));
    let copied = built.and_then(|()| {
        std::fs::copy(dir.join("target/release/xtask"), &binary)
            .map(drop)
            .context("keeping the old build's xtask")
    });
    git(
        root,
        &["worktree", "remove", "--force", &src.to_string_lossy()],
    )?;
    copied?;
    Ok(binary)
}

fn cargo_build(dir: &Path, target: &Path) -> anyhow::Result<()> {
    let status = Command::new(cargo())
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .args(["build", "--release", "--locked", "-q", "-p", "xtask"])
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!(
            "cargo build --release -p xtask in {} failed: {status}",
            dir.display()
        );
    }
    Ok(())
}

/// The fixed set's data, generated under `root` when absent (the same
/// seeds every time, so every comparison reads the same files).
fn ensure_data(xtask: &Path, root: &Path) -> anyhow::Result<()> {
    let gens: [(&str, &[&str]); 3] = [
        ("cifar10", &["--dataset", "cifar10"]),
        (
            "jpegs",
            &[
                "--dataset",
                "imagefolder",
                "--count",
                "600",
                "--classes",
                "10",
            ],
        ),
        ("digiface", &["--dataset", "digiface", "--count", "4000"]),
    ];
    for (name, args) in gens {
        let out = root.join(name);
        let spec = args.join(" ");
        if !complete(&out, &spec) {
            eprintln!("generating {}", out.display());
            std::fs::remove_dir_all(&out).ok();
            // A pack of the old data is stale with it.
            std::fs::remove_dir_all(root.join(format!("{name}-pack"))).ok();
            run_ok(
                Command::new(xtask)
                    .args(["gen"])
                    .args(args)
                    .arg("--out")
                    .arg(&out),
            )?;
            std::fs::write(out.join(".complete"), &spec)?;
        }
    }
    let pack = root.join("cifar10-pack");
    if !complete(&pack, "") {
        eprintln!("packing {}", pack.display());
        std::fs::remove_dir_all(&pack).ok();
        run_ok(
            Command::new(xtask)
                .args(["pack", "--dataset", "cifar10", "--path"])
                .arg(root.join("cifar10"))
                .arg("--out")
                .arg(&pack)
                .args(["--shard-size", "2000"]),
        )?;
        std::fs::write(pack.join(".complete"), b"")?;
    }
    Ok(())
}

/// Whether `dir` was written whole with `spec` (its `.complete` marker).
fn complete(dir: &Path, spec: &str) -> bool {
    std::fs::read_to_string(dir.join(".complete")).is_ok_and(|s| s == spec)
}

fn run_ok(cmd: &mut Command) -> anyhow::Result<()> {
    let out = cmd.output().context("running xtask")?;
    if !out.status.success() {
        bail!("{:?}: {}", cmd, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(ratios: &[f64]) -> Row {
        Row {
            name: "job",
            new: 1.0,
            old: 1.0,
            ratios: ratios.to_vec(),
        }
    }

    #[test]
    fn a_slowdown_is_named_only_outside_the_spread() {
        assert!(row(&[0.8, 0.85, 0.82]).is_slowdown());
        // One pair at even: the noise covers it.
        assert!(!row(&[0.7, 0.85, 1.02]).is_slowdown());
        assert!(!row(&[0.92, 0.95, 0.91]).is_slowdown());
        assert!((median(&[3.0, 1.0, 2.0, 10.0]) - 2.5).abs() < 1e-12);
    }
}
