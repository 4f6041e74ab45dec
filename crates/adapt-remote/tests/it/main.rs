//! Packs published to, read from and checked in a real S3 server
//! (`s3s-fs` on 127.0.0.1, started by each test), with the server stopped,
//! restarted, slowed and failing, under the faults of [`faults`], and with
//! one cache folder shared by several ranks ([`shared_cache`]); packs read
//! from a plain HTTP server ([`http`]); whole files (WebDataset tars) fetched
//! into the cache folder ([`files`]).

#![allow(clippy::unwrap_used)] // Tests unwrap: a panic is the failure report.

mod faults;
mod files;
mod http;
mod shared_cache;

use adapt_dataset::Dataset;
use adapt_formats::{Cifar10, Split};
use adapt_loader::{Loader, LoaderConfig, LoaderError, LoaderKnobs, OutputFormat, Sampler};
use adapt_pack::{PackDataset, PackOptions, Payload, ShardStream, SourceInfo, write_pack};
use adapt_remote::testing::S3Server;
use adapt_remote::{RemoteError, RemoteOptions, open_pack, publish, upload_pack, verify_pack};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const BUCKET: &str = "packs";

fn none(_: u64) {}

fn source() -> SourceInfo {
    SourceInfo {
        dataset: "cifar10".into(),
        path: "test".into(),
        class_names: None,
    }
}

fn cifar(dir: &Path, train: usize) -> Cifar10 {
    adapt_synth::cifar10(
        dir,
        adapt_synth::Cifar10Spec {
            train,
            test: 1,
            seed: 1,
        },
        &adapt_synth::no_progress,
    )
    .unwrap();
    Cifar10::open(dir, Split::Train).unwrap()
}

fn opts(shard_size: usize) -> PackOptions {
    PackOptions {
        shard_size,
        seed: 3,
        frame_bytes: 8 << 10,
        store: Payload::Raw,
        ..PackOptions::default()
    }
}

/// Fast failure for fault tests: two retries within two seconds.
fn impatient(server: &S3Server, cache: &Path) -> RemoteOptions {
    RemoteOptions {
        retries: 2,
        retry_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..server.options(cache)
    }
}

/// Every pack sample equals the local pack's, in the same order.
fn same_as_local(remote: &PackDataset, local: &PackDataset) {
    assert_eq!(remote.len(), local.len());
    for i in 0..local.len() {
        assert_eq!(remote.get(i).unwrap(), local.get(i).unwrap(), "sample {i}");
    }
}

fn loader(pack: &Arc<PackDataset>, workers: usize, stream: bool) -> Loader {
    let sampler: Option<Arc<dyn Sampler>> =
        stream.then(|| Arc::new(ShardStream::new(pack, 5, 16)) as Arc<dyn Sampler>);
    Loader::new(
        Arc::clone(pack) as Arc<dyn Dataset>,
        LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: workers,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 10,
            output: OutputFormat::U8Nhwc,
            sampler,
            ..LoaderConfig::default()
        },
    )
    .unwrap()
}

/// All of an epoch's bytes, or its first error.
fn epoch_bytes(l: &mut Loader, epoch: u64) -> Result<Vec<u8>, LoaderError> {
    let mut out = Vec::new();
    for b in l.epoch(epoch)? {
        out.extend_from_slice(b?.bytes());
    }
    Ok(out)
}

#[test]
fn a_published_pack_reads_back_identically_and_verifies() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 120);
    let o = server.options(&t.path().join("cache"));
    let url = "s3://packs/cifar/train";
    let (m, report) = publish(&c, &source(), url, &opts(40), &o, &none).unwrap();
    assert_eq!((report.uploaded, report.skipped), (3, 0));
    // The staging copy is gone once published.
    assert!(
        !t.path()
            .join("cache/staging")
            .read_dir()
            .unwrap()
            .any(|_| true)
    );
    let local_dir = t.path().join("local");
    write_pack(&c, &source(), &local_dir, &opts(40), &none).unwrap();
    let local = PackDataset::open(&local_dir).unwrap();
    assert_eq!(local.manifest().pack_id, m.pack_id);
    let remote = open_pack(url, &o).unwrap();
    assert_eq!(remote.dir(), Path::new(url));
    same_as_local(&remote, &local);
    verify_pack(url, &o).unwrap();
    // Publishing the same source again uploads nothing.
    let (_, again) = publish(&c, &source(), url, &opts(40), &o, &none).unwrap();
    assert_eq!((again.uploaded, again.skipped), (0, 3));
}

#[test]
fn an_interrupted_upload_is_never_seen_half_done_and_resumes() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 100);
    let local = t.path().join("local");
    write_pack(&c, &source(), &local, &opts(25), &none).unwrap();
    let o = RemoteOptions {
        retries: 0,
        ..server.options(&t.path().join("cache"))
    };
    let url = "s3://packs/p";
    server.fail_puts_after(Some(2));
    let err = upload_pack(&local, url, &o, false, &none).unwrap_err();
    assert!(matches!(err, RemoteError::Store { .. }), "{err}");
    assert!(err.to_string().contains("s3://packs/p/shard-"), "{err}");
    // Two shards are up, no manifest: not a pack yet.
    let open = open_pack(url, &o).err().unwrap();
    assert!(open.to_string().contains("no manifest"), "{open}");
    server.fail_puts_after(None);
    let puts = server.puts();
    let report = upload_pack(&local, url, &o, false, &none).unwrap();
    assert_eq!((report.uploaded, report.skipped), (2, 2));
    assert_eq!(server.puts() - puts, 3, "two shards and the manifest");
    same_as_local(
        &open_pack(url, &o).unwrap(),
        &PackDataset::open(&local).unwrap(),
    );
}

#[test]
fn large_shards_go_up_in_parts() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 300);
    let local = t.path().join("local");
    write_pack(&c, &source(), &local, &opts(300), &none).unwrap();
    let o = RemoteOptions {
        // ~920 KB shard: parts of 8 MiB would make one; force the path.
        multipart_threshold: 1 << 10,
        ..server.options(&t.path().join("cache"))
    };
    let shards = adapt_pack::Manifest::load(&local).unwrap().shards.len();
    assert_eq!(server.parts(), 0);
    upload_pack(&local, "s3://packs/mp", &o, false, &none).unwrap();
    // Every shard went up as a multipart upload (one part each at 8 MiB).
    assert!(
        server.parts() >= shards,
        "{} parts for {shards} shards",
        server.parts()
    );
    verify_pack("s3://packs/mp", &o).unwrap();
    // Under the default threshold, the same pack goes up in whole objects.
    let before = server.parts();
    let whole = server.options(&t.path().join("cache2"));
    upload_pack(&local, "s3://packs/whole", &whole, false, &none).unwrap();
    assert_eq!(server.parts(), before, "no part under the threshold");
}

#[test]
fn streaming_fetches_ahead_and_the_second_epoch_reads_the_cache() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 200);
    let o = server.options(&t.path().join("cache"));
    let url = "s3://packs/stream";
    publish(&c, &source(), url, &opts(40), &o, &none).unwrap();
    let local_dir = t.path().join("local");
    write_pack(&c, &source(), &local_dir, &opts(40), &none).unwrap();
    let local = Arc::new(PackDataset::open(&local_dir).unwrap());
    // Shards of ~120 KiB fetched in 16 KiB chunks: reads are served from
    // partly fetched shards, chunk by chunk.
    for (workers, chunk) in [(0, 8 << 20), (2, 8 << 20), (2, 16 << 10), (1, 16 << 10)] {
        let cache = t.path().join(format!("cache-{workers}-{chunk}"));
        let o = RemoteOptions {
            chunk_bytes: chunk,
            parallel_requests: 3,
            ..server.options(&cache)
        };
        let remote = Arc::new(open_pack(url, &o).unwrap());
        let mut lr = loader(&remote, workers, true);
        let mut ll = loader(&local, workers, true);
        let first = epoch_bytes(&mut lr, 0).unwrap();
        assert_eq!(first, epoch_bytes(&mut ll, 0).unwrap(), "{workers} workers");
        let gets = server.gets();
        let second = epoch_bytes(&mut lr, 1).unwrap();
        assert_eq!(second, epoch_bytes(&mut ll, 1).unwrap());
        assert_eq!(server.gets(), gets, "epoch 1 read only the local cache");
        // Whole shards were fetched: five shards' bytes, not one per frame.
        let cached: u64 = std::fs::read_dir(t.path().join(&cache).join("remote"))
            .unwrap()
            .flat_map(|d| std::fs::read_dir(d.unwrap().path()).unwrap())
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum();
        let total: u64 = remote.manifest().shards.iter().map(|s| s.bytes).sum();
        assert_eq!(cached, total);
    }
}

#[test]
fn the_cache_stays_within_its_bound() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 200);
    let url = "s3://packs/bounded";
    let o = server.options(&t.path().join("cache"));
    let (m, _) = publish(&c, &source(), url, &opts(20), &o, &none).unwrap();
    let shard = m.shards.iter().map(|s| s.bytes).max().unwrap();
    let o = RemoteOptions {
        cache_bytes: 3 * shard,
        prefetch_shards: 1,
        cache_dir: t.path().join("small"),
        ..o
    };
    let storage = Arc::new(adapt_remote::RemoteStorage::connect(url, &o).unwrap());
    let pack = Arc::new(PackDataset::open_in(storage.clone()).unwrap());
    let mut l = loader(&pack, 2, true);
    for e in 0..2 {
        let epoch = l.epoch(e).unwrap();
        for b in epoch {
            b.unwrap();
            assert!(storage.cached_bytes() <= 3 * shard);
        }
    }
    let on_disk: u64 = std::fs::read_dir(storage.cache_dir())
        .unwrap()
        .map(|f| f.unwrap().metadata().unwrap().len())
        .sum();
    assert!(on_disk <= 3 * shard, "{on_disk} > {}", 3 * shard);
}

#[test]
fn a_stopped_server_is_an_error_naming_the_shard_and_a_restarted_one_works() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 200);
    let url = "s3://packs/faults";
    publish(
        &c,
        &source(),
        url,
        &opts(40),
        &server.options(&t.path().join("c0")),
        &none,
    )
    .unwrap();
    // Range requests only (every batch goes to the server), and streaming
    // with shards fetched ahead in small chunks.
    for (cache_bytes, stream) in [(0, false), (1 << 30, true)] {
        let o = RemoteOptions {
            cache_bytes,
            chunk_bytes: 16 << 10,
            ..impatient(&server, &t.path().join(format!("cache-{stream}")))
        };
        let pack = Arc::new(open_pack(url, &o).unwrap());
        let mut l = loader(&pack, 2, stream);
        let want = epoch_bytes(&mut l, 0).unwrap();
        // A fresh cache, so the next epoch needs the server.
        let pack = Arc::new(
            open_pack(
                url,
                &RemoteOptions {
                    cache_dir: t.path().join(format!("fresh-{stream}")),
                    ..o.clone()
                },
            )
            .unwrap(),
        );
        let mut l = loader(&pack, 2, stream);
        let mut epoch = l.epoch(0).unwrap();
        epoch.next().unwrap().unwrap();
        server.stop();
        let started = std::time::Instant::now();
        let err = epoch.find_map(Result::err);
        drop(epoch);
        // Streaming may have fetched everything before the stop (small
        // shards, fast fetches): then there is no error to see.
        if let Some(err) = err {
            let text = err.to_string();
            assert!(matches!(err, LoaderError::SampleFailed { .. }), "{text}");
            assert!(text.contains("s3://packs/faults/shard-"), "{text}");
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "bounded retries: {:?}",
                started.elapsed()
            );
        } else {
            assert!(stream, "range reads must fail with the server stopped");
        }
        server.restart().unwrap();
        assert_eq!(
            epoch_bytes(&mut l, 0).unwrap(),
            want,
            "works again after a restart"
        );
    }
}

#[test]
fn a_slow_server_trips_the_loaders_timeout() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 60);
    let url = "s3://packs/slow";
    publish(
        &c,
        &source(),
        url,
        &opts(30),
        &server.options(&t.path().join("c0")),
        &none,
    )
    .unwrap();
    let o = RemoteOptions {
        cache_bytes: 0,
        ..server.options(&t.path().join("cache"))
    };
    let pack = Arc::new(open_pack(url, &o).unwrap());
    server.set_delay(Duration::from_secs(3));
    let mut l = Loader::new(
        Arc::clone(&pack) as Arc<dyn Dataset>,
        LoaderConfig {
            knobs: LoaderKnobs {
                num_workers: 1,
                ..LoaderKnobs::DEFAULT
            },
            batch_size: 10,
            timeout: Some(Duration::from_millis(500)),
            ..LoaderConfig::default()
        },
    )
    .unwrap();
    let err = l.epoch(0).unwrap().find_map(Result::err).unwrap();
    assert!(matches!(err, LoaderError::Timeout { .. }), "{err}");
    server.set_delay(Duration::ZERO);
}

#[test]
fn another_pack_is_replaced_only_when_asked_and_only_our_objects_go() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 60);
    let url = "s3://packs/owned";
    let o = server.options(&t.path().join("cache"));
    let (old, _) = publish(&c, &source(), url, &opts(20), &o, &none).unwrap();
    // The user's own objects under the prefix, one named like a shard.
    let objects = server.root().join(BUCKET).join("owned");
    std::fs::write(objects.join("notes.txt"), b"mine").unwrap();
    let lookalike = "shard-0123456789abcdef-00000.adpk";
    std::fs::write(objects.join(lookalike), b"also mine").unwrap();
    let other = PackOptions {
        seed: 99,
        ..opts(20)
    };
    let err = publish(&c, &source(), url, &other, &o, &none).unwrap_err();
    assert!(matches!(err, RemoteError::Exists { .. }), "{err}");
    assert_eq!(open_pack(url, &o).unwrap().manifest().pack_id, old.pack_id);
    let over = PackOptions {
        overwrite: true,
        ..other
    };
    let (new, report) = publish(&c, &source(), url, &over, &o, &none).unwrap();
    assert_eq!(report.removed, 3);
    let now = open_pack(url, &o).unwrap();
    assert_eq!(now.manifest().pack_id, new.pack_id);
    for s in &old.shards {
        assert!(!objects.join(&s.file).exists(), "{}", s.file);
    }
    assert_eq!(std::fs::read(objects.join("notes.txt")).unwrap(), b"mine");
    assert_eq!(
        std::fs::read(objects.join(lookalike)).unwrap(),
        b"also mine"
    );
}

#[test]
fn remote_damage_is_found_and_named() {
    let t = tempfile::tempdir().unwrap();
    let server = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let c = cifar(&t.path().join("c"), 40);
    let url = "s3://packs/damaged";
    let o = server.options(&t.path().join("cache"));
    let (m, _) = publish(&c, &source(), url, &opts(20), &o, &none).unwrap();
    let victim = server
        .root()
        .join(BUCKET)
        .join("damaged")
        .join(&m.shards[1].file);
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[200] ^= 0x10;
    std::fs::write(&victim, bytes).unwrap();
    let err = verify_pack(
        url,
        &RemoteOptions {
            cache_dir: t.path().join("fresh"),
            ..o.clone()
        },
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("{url}/{}", m.shards[1].file)),
        "{text}"
    );
    assert!(!text.contains(&m.shards[0].file), "{text}");
}
