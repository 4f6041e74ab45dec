//! One cache folder shared by several ranks (each connection to a pack
//! keeps its own accounting, as separate processes do): the budget holds
//! for the folder, a shard one rank fetched is read by the others from the
//! folder, a damaged cached shard is fetched again, and a dead fetch's
//! part file is never read as a shard.

use super::{BUCKET, cifar, epoch_bytes, loader, none, opts, source};
use adapt_pack::{PackDataset, write_pack};
use adapt_remote::testing::S3Server;
use adapt_remote::{RemoteOptions, RemoteStorage, publish};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const URL: &str = "s3://packs/shared";

/// A server holding a pack of 5 shards of 20 samples, the local pack's
/// epochs 0 and 1, and the largest shard's size.
fn setup(t: &Path) -> (S3Server, [Vec<u8>; 2], u64) {
    let server = S3Server::start(&t.join("s3"), BUCKET).unwrap();
    let c = cifar(&t.join("c"), 100);
    let o = server.options(&t.join("c0"));
    let (m, _) = publish(&c, &source(), URL, &opts(20), &o, &none).unwrap();
    write_pack(&c, &source(), &t.join("local"), &opts(20), &none).unwrap();
    let local = Arc::new(PackDataset::open(&t.join("local")).unwrap());
    let mut l = loader(&local, 1, true);
    let want = [
        epoch_bytes(&mut l, 0).unwrap(),
        epoch_bytes(&mut l, 1).unwrap(),
    ];
    let shard = m.shards.iter().map(|s| s.bytes).max().unwrap();
    (server, want, shard)
}

fn rank(o: &RemoteOptions) -> (Arc<RemoteStorage>, Arc<PackDataset>) {
    let storage = Arc::new(RemoteStorage::connect(URL, o).unwrap());
    let pack = Arc::new(PackDataset::open_in(storage.clone()).unwrap());
    (storage, pack)
}

/// Bytes of the files in `dir` (shards and part files), the lock aside.
fn on_disk(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|f| f.unwrap())
        .filter(|f| f.file_name() != ".lock")
        .map(|f| f.metadata().map_or(0, |m| m.len()))
        .sum()
}

#[test]
fn ranks_sharing_a_folder_keep_one_budget_for_it() {
    let t = tempfile::tempdir().unwrap();
    let (server, want, shard) = setup(t.path());
    let o = RemoteOptions {
        cache_bytes: 2 * shard + shard / 2,
        prefetch_shards: 1,
        chunk_bytes: 16 << 10,
        ..server.options(&t.path().join("cache"))
    };
    let ranks: Vec<_> = (0..3).map(|_| rank(&o)).collect();
    let dir = ranks[0].0.cache_dir().to_owned();
    let stop = AtomicBool::new(false);
    let most = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                most.fetch_max(on_disk(&dir), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
        });
        let runs: Vec<_> = ranks
            .iter()
            .map(|(_, pack)| {
                s.spawn(|| {
                    let mut l = loader(pack, 1, true);
                    [
                        epoch_bytes(&mut l, 0).unwrap(),
                        epoch_bytes(&mut l, 1).unwrap(),
                    ]
                })
            })
            .collect();
        for r in runs {
            assert!(
                r.join().unwrap() == want,
                "a rank's epochs differ from the local pack's"
            );
        }
        stop.store(true, Ordering::Relaxed);
    });
    let most = most.load(Ordering::Relaxed);
    assert!(
        most <= o.cache_bytes,
        "{most} bytes in a folder of {}",
        o.cache_bytes
    );
    assert!(most >= shard, "the ranks cached something ({most} bytes)");
}

#[test]
fn a_shard_one_rank_fetched_is_read_by_the_others_from_the_folder() {
    let t = tempfile::tempdir().unwrap();
    let (server, want, _) = setup(t.path());
    let o = server.options(&t.path().join("cache"));
    // Both connected before anything is cached.
    let (_, first) = rank(&o);
    let (_, second) = rank(&o);
    assert!(epoch_bytes(&mut loader(&first, 2, true), 0).unwrap() == want[0]);
    let bytes = server.bytes_out();
    assert!(epoch_bytes(&mut loader(&second, 2, true), 0).unwrap() == want[0]);
    // At most the first read of each shard (before the folder is looked
    // at) goes to the store: one frame each, not the shards again.
    let extra = server.bytes_out() - bytes;
    let pack: u64 = first.manifest().shards.iter().map(|s| s.bytes).sum();
    assert!(extra < pack / 4, "{extra} bytes fetched again of {pack}");
}

#[test]
fn a_damaged_cached_shard_is_fetched_again_and_a_dead_fetch_is_never_read() {
    let t = tempfile::tempdir().unwrap();
    let (server, want, _) = setup(t.path());
    let o = server.options(&t.path().join("cache"));
    let (storage, pack) = rank(&o);
    let dir = storage.cache_dir().to_owned();
    assert!(epoch_bytes(&mut loader(&pack, 2, true), 0).unwrap() == want[0]);
    let names: Vec<String> = pack
        .manifest()
        .shards
        .iter()
        .map(|s| s.file.clone())
        .collect();
    drop((storage, pack));
    let objects = server.root().join(BUCKET).join("shared");
    // A cached shard damaged on disk (same size), and another's fetch cut
    // by a kill: its part file, full size, from a process that is gone.
    let damaged = dir.join(&names[1]);
    let mut bytes = std::fs::read(&damaged).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&damaged, &bytes).unwrap();
    std::fs::remove_file(dir.join(&names[3])).unwrap();
    let dead = dir.join(format!(".{}.part-4194305-0", names[3]));
    std::fs::write(&dead, vec![0u8; bytes.len()]).unwrap();
    let (_, pack) = rank(&o);
    assert!(!dead.exists(), "a dead process's part file is removed");
    let mut l = loader(&pack, 2, true);
    assert!(
        epoch_bytes(&mut l, 0).unwrap() == want[0],
        "the epoch is the local pack's"
    );
    drop(l);
    drop(pack);
    for n in [&names[1], &names[3]] {
        assert_eq!(
            std::fs::read(dir.join(n)).unwrap(),
            std::fs::read(objects.join(n)).unwrap(),
            "{n} is cached whole again"
        );
    }
}

#[test]
fn a_rank_lets_go_of_shards_another_evicted_and_caches_them_again() {
    let t = tempfile::tempdir().unwrap();
    let (server, want, _) = setup(t.path());
    let (storage, pack) = rank(&server.options(&t.path().join("cache")));
    let dir = storage.cache_dir().to_owned();
    let mut l = loader(&pack, 2, true);
    assert!(epoch_bytes(&mut l, 0).unwrap() == want[0]);
    let names: Vec<String> = pack
        .manifest()
        .shards
        .iter()
        .map(|s| s.file.clone())
        .collect();
    // Another process evicts every shard; this one, reading its cache,
    // notices within the touch interval (10 s) rather than holding the
    // removed files' space for as long as it runs.
    for n in &names {
        std::fs::remove_file(dir.join(n)).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(10_500));
    assert!(epoch_bytes(&mut l, 1).unwrap() == want[1]);
    drop(l);
    drop(pack);
    drop(storage);
    for n in &names {
        assert!(dir.join(n).exists(), "{n} fetched into the folder again");
    }
}
