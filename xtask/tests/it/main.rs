//! The command line end to end, as separate OS processes: ranks from the
//! launcher's variables, a rank killed with SIGKILL mid-epoch and restarted
//! from its checkpoint.

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

mod tidy;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");
const WORLD: usize = 3;

fn gen_cifar(dir: &Path) {
    let ok = Command::new(XTASK)
        .args(["gen", "--dataset", "cifar10", "--count", "150", "--out"])
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(ok.success());
}

fn load(dir: &Path, rank: usize, extra: &[&str]) -> Command {
    let mut c = Command::new(XTASK);
    c.args([
        "load",
        "--dataset",
        "cifar10",
        "--batch-size",
        "4",
        "--shuffle",
        "--seed",
        "5",
    ])
    .args([
        "--num-workers",
        "1",
        "--print-batches",
        "--distributed",
        "auto",
    ])
    .args([
        "--transform",
        "random_crop(32,padding=4),hflip,normalize(cifar10)",
    ])
    .arg("--path")
    .arg(dir)
    .args(extra)
    .env("RANK", rank.to_string())
    .env("WORLD_SIZE", WORLD.to_string())
    .env("LOCAL_RANK", rank.to_string())
    .stderr(Stdio::null());
    if !extra.contains(&"--epochs") {
        c.args(["--epochs", "2"]);
    }
    c
}

/// The per-batch lines of a run: (epoch, batch, sha256 and indices).
fn batch_lines(text: &str) -> Vec<(u64, u64, String)> {
    text.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("batch").is_some())
        .map(|v| {
            (
                v["epoch"].as_u64().unwrap(),
                v["batch"].as_u64().unwrap(),
                format!("{} {}", v["sha256"], v["indices"]),
            )
        })
        .collect()
}

#[test]
fn ranks_from_torchrun_variables_split_the_epoch() {
    let t = tempfile::tempdir().unwrap();
    gen_cifar(t.path());
    let mut seen = Vec::new();
    for rank in 0..WORLD {
        let out = load(t.path(), rank, &["--epochs", "1"]).output().unwrap();
        assert!(out.status.success());
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if let Some(ix) = v.get("indices") {
                seen.extend(ix.as_array().unwrap().iter().map(|i| i.as_u64().unwrap()));
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(
        seen,
        (0..150).collect::<Vec<u64>>(),
        "disjoint shares covering the epoch"
    );
}

#[test]
fn a_rank_killed_mid_epoch_resumes_from_its_checkpoint_exactly() {
    let t = tempfile::tempdir().unwrap();
    gen_cifar(t.path());
    let reference: Vec<_> = (0..WORLD)
        .map(|r| {
            let out = load(t.path(), r, &[]).output().unwrap();
            assert!(out.status.success());
            batch_lines(&String::from_utf8(out.stdout).unwrap())
        })
        .collect();
    assert_eq!(
        reference[1].len(),
        2 * 13,
        "50 samples a rank, batches of 4, 2 epochs"
    );
    let victim = 1;
    let ck = t.path().join("rank1.ckpt");
    let ck_arg = ck.to_str().unwrap();
    let mut child = load(
        t.path(),
        victim,
        &[
            "--checkpoint-every",
            "1",
            "--checkpoint",
            ck_arg,
            "--step-ms",
            "40",
        ],
    )
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut before = Vec::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    // Into the first epoch's second half, then SIGKILL.
    while before.len() < 9 {
        before.push(lines.next().unwrap().unwrap());
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
    // Whatever it printed before it died.
    before.extend(lines.map_while(Result::ok));
    let text = std::fs::read_to_string(&ck).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(text.rsplit_once("\n#checksum").unwrap().0).unwrap();
    let (epoch, pos) = (v["epoch"].as_u64().unwrap(), v["batches"].as_u64().unwrap());
    assert!(
        epoch == 0 && (8..13).contains(&pos),
        "checkpoint at {epoch}/{pos}: mid-epoch"
    );
    // What the killed run delivered up to its checkpoint, then the restart.
    let kept: Vec<_> = batch_lines(&before.join("\n"))
        .into_iter()
        .filter(|&(e, b, _)| e < epoch || (e == epoch && b < pos))
        .collect();
    let out = load(t.path(), victim, &["--resume", ck_arg])
        .output()
        .unwrap();
    assert!(out.status.success());
    let after = batch_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        [kept, after].concat(),
        reference[victim],
        "killed + resumed = uninterrupted"
    );
    // A checkpoint of another seed is refused, a damaged one too.
    let out = load(t.path(), victim, &["--resume", ck_arg, "--seed", "6"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    std::fs::write(&ck, text.replacen("\"batches\"", "\"batchez\"", 1)).unwrap();
    let out = load(t.path(), victim, &["--resume", ck_arg])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "a damaged checkpoint is an error, not a restart"
    );
}

fn xtask(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(XTASK).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn gen_cifar_seeded(dir: &Path, seed: &str) {
    let (ok, _, err) = xtask(&[
        "gen",
        "--dataset",
        "cifar10",
        "--count",
        "150",
        "--seed",
        seed,
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
}

#[test]
fn a_regenerated_source_is_not_taken_for_its_old_pack() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("cifar");
    let pack = t.path().join("pack");
    let (s, p) = (src.to_str().unwrap(), pack.to_str().unwrap());
    gen_cifar_seeded(&src, "1");
    let shard = |extra: &[&str]| {
        let mut a = vec![
            "pack",
            "--dataset",
            "cifar10",
            "--path",
            s,
            "--out",
            p,
            "--shard-size",
            "50",
        ];
        a.extend_from_slice(extra);
        xtask(&a)
    };
    let (ok, _, err) = shard(&[]);
    assert!(ok, "{err}");
    let (ok, out, err) = xtask(&["shard", "--verify", p, "--dataset", "cifar10", "--path", s]);
    assert!(ok && out.contains("as it is now"), "{out}{err}");
    // The same names and counts, other pixels.
    std::fs::remove_dir_all(&src).unwrap();
    gen_cifar_seeded(&src, "2");
    let (ok, _, err) = shard(&[]);
    assert!(!ok && err.contains("source has changed"), "{err}");
    let (ok, _, err) = xtask(&["shard", "--verify", p, "--dataset", "cifar10", "--path", s]);
    assert!(!ok && err.contains("stale"), "{err}");
    let (ok, _, err) = shard(&["--overwrite"]);
    assert!(ok, "{err}");
    let (ok, out, err) = xtask(&["shard", "--verify", p, "--dataset", "cifar10", "--path", s]);
    assert!(ok, "{out}{err}");
    // Only the new pack's files are left.
    let files = std::fs::read_dir(&pack).unwrap().count();
    assert_eq!(files, 3 + 1, "three shards and the manifest");
}

#[test]
fn a_pack_in_an_s3_store_is_written_verified_and_loaded_like_a_local_one() {
    let t = tempfile::tempdir().unwrap();
    let server =
        adapt::engines::remote::testing::S3Server::start(&t.path().join("s3"), "data").unwrap();
    let src = t.path().join("cifar");
    gen_cifar_seeded(&src, "1");
    let local = t.path().join("local");
    let cache = t.path().join("cache");
    let s3 = |args: &[&str]| {
        let out = Command::new(XTASK)
            .args(args)
            .args(["--s3-endpoint", &server.endpoint()])
            .arg("--cache-dir")
            .arg(&cache)
            .env(
                "AWS_ACCESS_KEY_ID",
                adapt::engines::remote::testing::ACCESS_KEY,
            )
            .env(
                "AWS_SECRET_ACCESS_KEY",
                adapt::engines::remote::testing::SECRET_KEY,
            )
            .env("AWS_REGION", "us-east-1")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let s = src.to_str().unwrap();
    let (ok, out, err) = s3(&[
        "shard",
        "--dataset",
        "cifar10",
        "--path",
        s,
        "--out",
        "s3://data/cifar",
        "--shard-size",
        "40",
    ]);
    assert!(ok && out.contains("uploaded 4 shards"), "{out}{err}");
    let (ok, _, err) = xtask(&[
        "shard",
        "--dataset",
        "cifar10",
        "--path",
        s,
        "--out",
        local.to_str().unwrap(),
        "--shard-size",
        "40",
    ]);
    assert!(ok, "{err}");
    let (ok, out, err) = s3(&[
        "shard",
        "--verify",
        "s3://data/cifar",
        "--dataset",
        "cifar10",
        "--path",
        s,
    ]);
    assert!(ok && out.contains("ok, 4 shards"), "{out}{err}");
    // The same batches from the store as from the local pack, streamed.
    fn load<'a>(path: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
        let mut a = vec![
            "load",
            "--dataset",
            "pack",
            "--path",
            path,
            "--batch-size",
            "16",
            "--epochs",
            "2",
            "--num-workers",
            "2",
            "--print-batches",
            "--output",
            "u8",
        ];
        a.extend_from_slice(extra);
        a
    }
    let (ok, remote_out, err) = s3(&load("s3://data/cifar", &["--stream", "32"]));
    assert!(ok, "{err}");
    let (ok, local_out, err) = xtask(&load(local.to_str().unwrap(), &["--stream", "32"]));
    assert!(ok, "{err}");
    let (r, l) = (batch_lines(&remote_out), batch_lines(&local_out));
    assert!(!r.is_empty());
    assert_eq!(r, l);
    let (ok, out, err) = s3(&[
        "inspect",
        "--dataset",
        "pack",
        "--path",
        "s3://data/cifar",
        "--index",
        "3",
    ]);
    assert!(ok && out.contains("sha256"), "{out}{err}");
    // A loose format cannot be read from a store: said plainly.
    let (ok, _, err) = s3(&["load", "--dataset", "cifar10", "--path", "s3://data/cifar"]);
    assert!(!ok && err.contains("only packs"), "{err}");
}

/// The pids whose command line holds `marker`.
fn pids_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
        })
        .collect()
}

/// Whether `pid` is running (gone, or a zombie awaiting its reaper, is not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// #26 item 3: a signal to the tuner ends the trial's process group before
/// the tuner exits; no trial command outlives it.
#[test]
fn a_signal_to_the_tuner_ends_its_trial_first() {
    for signal in ["TERM", "INT", "HUP"] {
        let marker = format!("adapt-signal-test-{signal}-{}", std::process::id());
        let mut tuner = Command::new(XTASK)
            .args([
                "tune",
                "--command",
                &format!("sleep 300; echo {marker} {{num_workers}}"),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let trial = loop {
            let found: Vec<u32> = pids_with(&marker)
                .into_iter()
                .filter(|&p| p != tuner.id())
                .collect();
            if let Some(&p) = found.first() {
                break p;
            }
            assert!(std::time::Instant::now() < deadline, "no trial started");
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let sent = Command::new("kill")
            .args([&format!("-{signal}"), &tuner.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        let status = tuner.wait().unwrap();
        assert!(!status.success(), "{signal}: {status:?}");
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert!(
            !alive(trial),
            "{signal}: the trial's shell {trial} outlived the tuner"
        );
        let left: Vec<u32> = pids_with(&marker)
            .into_iter()
            .filter(|&p| alive(p))
            .collect();
        assert!(left.is_empty(), "{signal}: {left:?} outlived the tuner");
    }
}

#[test]
fn load_stages_names_each_step_and_the_bottleneck() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("folder");
    let (ok, _, err) = xtask(&[
        "gen",
        "--dataset",
        "imagefolder",
        "--count",
        "24",
        "--size",
        "64x48",
        "--out",
        data.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let args = [
        "load",
        "--dataset",
        "imagefolder",
        "--path",
        data.to_str().unwrap(),
        "--transform",
        "random_resized_crop(32),hflip,normalize(imagenet)",
        "--batch-size",
        "8",
        "--num-workers",
        "2",
        "--epochs",
        "2",
    ];
    let (ok, out, err) = xtask(&[&args[..], &["--stages"]].concat());
    assert!(ok, "{err}");
    let lines: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    for line in &lines {
        let s = &line["stages"];
        let seconds = s["seconds"].as_object().unwrap();
        let names: Vec<&str> = seconds.keys().map(String::as_str).collect();
        for want in ["read", "decode", "random_horizontal_flip(p=0.5)", "collate"] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("random_resized_crop(32")),
            "{names:?}"
        );
        assert!(seconds["decode"].as_f64().unwrap() > 0.0, "{s}");
        let samples: u64 = s["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["samples"].as_u64().unwrap())
            .sum();
        assert_eq!(Some(samples), line["samples"].as_u64());
        let verdict = s["verdict"].as_str().unwrap();
        assert!(
            verdict.contains("-bound") || verdict.starts_with("consumer"),
            "{verdict}"
        );
    }
    // Without --stages the line has none; with timing off neither.
    let (ok, out, err) = xtask(&[&args[..], &["--no-stage-timing"]].concat());
    assert!(ok, "{err}");
    assert!(!out.contains("\"stages\""), "{out}");
}

/// Headless Chromium from the distribution's packages, where installed.
fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
}

#[test]
fn tune_report_is_one_page_a_browser_renders_with_the_figures() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("cifar");
    gen_cifar_seeded(&data, "3");
    let page = dir.path().join("report.html");
    let json = dir.path().join("report.json");
    let (ok, out, err) = xtask(&[
        "tune",
        "--dataset",
        "cifar10",
        "--path",
        data.to_str().unwrap(),
        "--batch-size",
        "16",
        "--trial-samples",
        "64",
        "--trial-seconds",
        "0",
        "--noise-repeats",
        "2",
        "--final-repeats",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--report",
        page.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("report page: "), "{out}");
    let html = std::fs::read_to_string(&page).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &report["runs"][0];
    let adapt_seconds = format!("{:.3}", run["adapt"]["seconds"].as_f64().unwrap());
    let figures = [
        "Batch size 16",
        adapt_seconds.as_str(),
        "read",
        "collate",
        "consumer's wait",
        "The noise",
    ];
    for figure in figures {
        assert!(html.contains(figure), "{figure} is not on the page");
    }
    assert_eq!(
        html.matches("class=\"verdict\"").count(),
        2,
        "default and pick"
    );
    let Some(browser) = chromium() else {
        eprintln!("no Chromium installed: the page was not rendered in a browser");
        return;
    };
    let url = format!("file://{}", page.display());
    let shot = dir.path().join("shot.png");
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--window-size=1100,2400",
    ];
    let screenshot = Command::new(browser)
        .args(common)
        .arg(format!("--screenshot={}", shot.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(screenshot.status.success(), "{screenshot:?}");
    let png = std::fs::read(&shot).unwrap();
    assert!(
        png.len() > 10_000 && png.starts_with(b"\x89PNG"),
        "{} bytes",
        png.len()
    );
    let dom = Command::new(browser)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    for figure in figures {
        assert!(dom.contains(figure), "{figure} is not in the rendered page");
    }
}
