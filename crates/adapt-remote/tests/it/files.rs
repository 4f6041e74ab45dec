//! WebDataset tars in a store, fetched whole into the cache folder and read
//! in place there (`fetch_files`): from an HTTP server and from S3, equal
//! to the local shards; fetched once, by one of several fetchers at a time;
//! fetched again when the store's copy changed; other datasets' files
//! evicted to keep the bound, a dataset larger than it refused before any
//! fetch; a dead fetcher's part file never read.

use super::BUCKET;
use adapt_dataset::Dataset;
use adapt_formats::{WebDataset, WebDatasetOptions, WebDatasetWriter};
use adapt_remote::testing::{HttpServer, S3Server};
use adapt_remote::{RemoteError, RemoteOptions, fetch_files};
use std::path::{Path, PathBuf};

/// Three shards of 40 PNGs (a gradient per sample, `cls` its index mod 7)
/// written to `dir`, named `{prefix}-00000N.tar`.
fn shards(dir: &Path, prefix: &str, salt: u8) -> Vec<PathBuf> {
    let mut w = WebDatasetWriter::new(dir, prefix, 40).unwrap();
    for i in 0..120u32 {
        let px: Vec<u8> = (0..16 * 12 * 3)
            .map(|j| (j as u32 * 7 + i * 13) as u8 ^ salt)
            .collect();
        let png = adapt_formats::encode_png(Path::new("x.png"), &px, 16, 12, 3).unwrap();
        let cls = (i % 7).to_string();
        let key = format!("s{i:05}");
        w.write(&key, &[("png", &png), ("cls", cls.as_bytes())])
            .unwrap();
    }
    w.finish().unwrap();
    (0..3)
        .map(|n| dir.join(format!("{prefix}-{n:06}.tar")))
        .collect()
}

fn opts() -> WebDatasetOptions {
    WebDatasetOptions::default()
}

fn same_samples(got: &[PathBuf], want: &[PathBuf]) {
    let a = WebDataset::open_shards(got.to_vec(), &opts()).unwrap();
    let b = WebDataset::open_shards(want.to_vec(), &opts()).unwrap();
    assert_eq!(a.len(), b.len());
    for i in 0..b.len() {
        assert_eq!(a.get(i).unwrap(), b.get(i).unwrap(), "sample {i}");
    }
}

fn urls(base: &str, prefix: &str) -> Vec<String> {
    (0..3)
        .map(|n| format!("{base}/{prefix}-{n:06}.tar"))
        .collect()
}

fn cache(t: &Path, name: &str, bytes: u64) -> RemoteOptions {
    RemoteOptions {
        cache_dir: t.join(name),
        cache_bytes: bytes,
        chunk_bytes: 16 << 10,
        ..RemoteOptions::default()
    }
}

#[test]
fn tars_over_http_and_s3_are_fetched_once_and_read_as_the_local_ones() {
    let t = tempfile::tempdir().unwrap();
    let local = shards(&t.path().join("www/wds"), "train", 0);
    let http = HttpServer::start(&t.path().join("www")).unwrap();
    let s3 = S3Server::start(&t.path().join("s3"), BUCKET).unwrap();
    let in_bucket = t.path().join("s3").join(BUCKET).join("wds");
    std::fs::create_dir_all(&in_bucket).unwrap();
    for f in &local {
        std::fs::copy(f, in_bucket.join(f.file_name().unwrap())).unwrap();
    }
    let over_http = urls(&format!("{}/wds", http.url()), "train");
    let o = cache(t.path(), "cache", 1 << 30);
    let got = fetch_files(&over_http, &o).unwrap();
    same_samples(&got, &local);
    assert!(got[0].starts_with(t.path().join("cache/files")), "{got:?}");
    let gets = http.gets();
    assert!(gets >= 3, "{gets} GETs");
    let fetched_at = std::fs::metadata(&got[0]).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(fetch_files(&over_http, &o).unwrap(), got);
    assert_eq!(http.gets(), gets, "the second open fetched nothing");
    assert_eq!(
        std::fs::metadata(&got[0]).unwrap().modified().unwrap(),
        fetched_at,
        "a use marks the version sidecar, not the copy, whose time keys its member list"
    );
    let s3o = RemoteOptions {
        cache_dir: t.path().join("cache-s3"),
        ..s3.options(t.path())
    };
    let from_s3 = fetch_files(&urls("s3://packs/wds", "train"), &s3o).unwrap();
    same_samples(&from_s3, &local);
}

/// Offline (`HF_HUB_OFFLINE=1` and the like), the copies the cache holds
/// are read with the store gone; one it does not hold, or holds cut short,
/// is an error naming its URL and the variables.
#[test]
fn offline_cached_files_are_read_without_the_store_and_a_missing_one_is_named() {
    let t = tempfile::tempdir().unwrap();
    let local = shards(&t.path().join("www"), "train", 0);
    let http = HttpServer::start(&t.path().join("www")).unwrap();
    let list = urls(&http.url(), "train");
    let o = cache(t.path(), "cache", 1 << 30);
    let got = fetch_files(&list[..2], &o).unwrap();
    drop(http);
    let offline = RemoteOptions {
        offline: true,
        ..o.clone()
    };
    assert_eq!(fetch_files(&list[..2], &offline).unwrap(), got);
    same_samples(&got, &local[..2]);
    let err = fetch_files(&list, &offline).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RemoteError::NotCached { .. }), "{text}");
    assert!(
        text.contains(&list[2]) && text.contains("HF_HUB_OFFLINE"),
        "{text}"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&got[1])
        .unwrap()
        .set_len(10)
        .unwrap();
    assert!(matches!(
        fetch_files(&list[1..2], &offline),
        Err(RemoteError::NotCached { .. })
    ));
}

#[test]
fn a_file_changed_in_the_store_is_fetched_again() {
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    shards(&www, "train", 0);
    let http = HttpServer::start(&www).unwrap();
    let list = urls(&http.url(), "train");
    let o = cache(t.path(), "cache", 1 << 30);
    fetch_files(&list, &o).unwrap();
    // Rewritten with other pixels one second later (Last-Modified moves;
    // the server sends no ETag), as a re-upload would be.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let new = shards(&t.path().join("new"), "train", 0x5a);
    std::fs::copy(&new[1], www.join("train-000001.tar")).unwrap();
    let got = fetch_files(&list, &o).unwrap();
    assert_eq!(
        std::fs::read(&got[1]).unwrap(),
        std::fs::read(&new[1]).unwrap()
    );
}

#[test]
fn the_bound_evicts_other_datasets_and_refuses_one_larger_than_itself() {
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    let a = shards(&www, "a", 0);
    shards(&www, "b", 1);
    let http = HttpServer::start(&www).unwrap();
    let size: u64 = a.iter().map(|f| f.metadata().unwrap().len()).sum();
    // Room for one dataset and a half.
    let o = cache(t.path(), "cache", size * 3 / 2);
    fetch_files(&urls(&http.url(), "a"), &o).unwrap();
    let b = fetch_files(&urls(&http.url(), "b"), &o).unwrap();
    let dir = b[0].parent().unwrap();
    let held: u64 = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert!(held <= size * 3 / 2, "{held} bytes held");
    assert!(
        !dir.join("a-000000.tar").exists(),
        "a's oldest file evicted"
    );
    let gets = http.gets();
    let small = cache(t.path(), "small", size / 2);
    let err = fetch_files(&urls(&http.url(), "a"), &small).unwrap_err();
    assert!(matches!(err, RemoteError::Config { .. }), "{err}");
    assert!(err.to_string().contains("--cache-bytes"), "{err}");
    assert_eq!(http.gets(), gets, "refused before any fetch");
}

#[test]
fn fetchers_share_the_work_and_a_dead_ones_part_file_is_never_read() {
    let t = tempfile::tempdir().unwrap();
    let www = t.path().join("www");
    let local = shards(&www, "train", 0);
    let http = HttpServer::start(&www).unwrap();
    let list = urls(&http.url(), "train");
    let o = cache(t.path(), "cache", 1 << 30);
    // A full-size part file of a process that died mid-fetch (no process
    // has pid 4194305, above Linux's pid_max).
    let first = fetch_files(&list[..1], &cache(t.path(), "probe", 1 << 30)).unwrap();
    let dir = o
        .cache_dir
        .join("files")
        .join(first[0].parent().unwrap().file_name().unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let size = local[0].metadata().unwrap().len() as usize;
    std::fs::write(
        dir.join(".train-000000.tar.part-4194305-0"),
        vec![7u8; size],
    )
    .unwrap();
    let gets = http.gets();
    let got: Vec<Vec<PathBuf>> = std::thread::scope(|s| {
        let fetchers: Vec<_> = (0..3).map(|_| s.spawn(|| fetch_files(&list, &o))).collect();
        fetchers
            .into_iter()
            .map(|f| f.join().unwrap().unwrap())
            .collect()
    });
    assert!(got.iter().all(|g| g == &got[0]));
    same_samples(&got[0], &local);
    let total: u64 = local.iter().map(|f| f.metadata().unwrap().len()).sum();
    let chunks = local
        .iter()
        .map(|f| f.metadata().unwrap().len().div_ceil(16 << 10) as usize)
        .sum::<usize>();
    // A one-byte probe of Range support per file, then each chunk once.
    assert_eq!(
        http.gets() - gets,
        local.len() + chunks,
        "each chunk fetched once for {total} bytes"
    );
    assert!(!dir.join(".train-000000.tar.part-4194305-0").exists());
}

#[test]
fn a_missing_file_is_an_error_naming_its_url() {
    let t = tempfile::tempdir().unwrap();
    shards(&t.path().join("www"), "train", 0);
    let http = HttpServer::start(&t.path().join("www")).unwrap();
    let missing = format!("{}/train-000009.tar", http.url());
    let o = cache(t.path(), "cache", 1 << 30);
    let err = fetch_files(std::slice::from_ref(&missing), &o).unwrap_err();
    assert!(err.to_string().contains(&missing), "{err}");
    let folder = format!("{}/", http.url());
    let err = fetch_files(&[folder], &o).unwrap_err();
    assert!(err.to_string().contains("brace pattern"), "{err}");
}

#[test]
fn servers_that_send_more_than_asked_are_errors_naming_the_url() {
    use adapt_remote::testing::Fault;
    let t = tempfile::tempdir().unwrap();
    let local = shards(&t.path().join("www"), "train", 0);
    let http = HttpServer::start(&t.path().join("www")).unwrap();
    let url = format!("{}/train-000000.tar", http.url());
    // A body that never ends under a length that lies, fetched whole (one
    // chunk) and in ranges: an error naming the URL, nothing kept.
    for (i, chunk) in [1u64 << 30, 16 << 10].into_iter().enumerate() {
        let o = RemoteOptions {
            chunk_bytes: chunk,
            ..cache(t.path(), &format!("cache-{i}"), 1 << 30)
        };
        http.inject(Fault::Endless, 1, None);
        let err = fetch_files(std::slice::from_ref(&url), &o).unwrap_err();
        http.clear_faults();
        let text = err.to_string();
        assert!(
            text.contains(&url) && text.contains("more than"),
            "{chunk}: {text}"
        );
        let kept: Vec<String> = std::fs::read_dir(&o.cache_dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.ends_with(".tar"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(kept.is_empty(), "{chunk}: {kept:?}");
        // The same server answering properly: fetched.
        assert_eq!(
            fetch_files(std::slice::from_ref(&url), &o).unwrap().len(),
            1
        );
    }
    // A server that ignores Range (as Python's http.server does) is read
    // in one GET, the same bytes.
    let o = cache(t.path(), "cache-no-range", 1 << 30);
    http.inject(Fault::IgnoreRange, 1, None);
    let got = fetch_files(std::slice::from_ref(&url), &o).unwrap();
    http.clear_faults();
    assert_eq!(
        std::fs::read(&got[0]).unwrap(),
        std::fs::read(&local[0]).unwrap()
    );
}

#[test]
fn a_cache_folder_others_may_write_is_refused_naming_it() {
    use std::os::unix::fs::PermissionsExt;
    let t = tempfile::tempdir().unwrap();
    shards(&t.path().join("www"), "train", 0);
    let http = HttpServer::start(&t.path().join("www")).unwrap();
    let url = format!("{}/train-000000.tar", http.url());
    let o = cache(t.path(), "shared", 1 << 30);
    std::fs::create_dir_all(&o.cache_dir).unwrap();
    std::fs::set_permissions(&o.cache_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = fetch_files(std::slice::from_ref(&url), &o).unwrap_err();
    assert!(matches!(err, RemoteError::UnsafeCacheDir { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("shared") && text.contains("every user"),
        "{text}"
    );
    assert_eq!(http.gets(), 0, "nothing fetched into it");
}
