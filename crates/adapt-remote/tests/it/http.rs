//! Packs read from a plain HTTP server (tower-http's `ServeDir` on
//! 127.0.0.1, Range requests as nginx or a CDN answers them): the same
//! samples and epochs as the local pack, random and streamed, cached and by
//! range requests only; the faults of [`super::faults`] ridden out or named;
//! a missing pack and a publish refused with the URL named; a redirect to
//! another host followed without the token, a redirect loop named.

use super::{cifar, epoch_bytes, loader, none, opts, same_as_local, source};
use adapt_pack::{PackDataset, write_pack};
use adapt_remote::testing::{Fault, HttpServer};
use adapt_remote::{RemoteOptions, open_pack, publish, verify_pack};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A server over `t/www` holding a pack at `/packs/cifar`, the local copy
/// and the pack's URL.
fn setup(t: &Path) -> (HttpServer, Arc<PackDataset>, String) {
    let c = cifar(&t.join("c"), 200);
    let dir = t.join("www/packs/cifar");
    write_pack(&c, &source(), &dir, &opts(40), &none).unwrap();
    let server = HttpServer::start(&t.join("www")).unwrap();
    let url = format!("{}/packs/cifar", server.url());
    (server, Arc::new(PackDataset::open(&dir).unwrap()), url)
}

fn options(cache: &Path, cache_bytes: u64) -> RemoteOptions {
    RemoteOptions {
        cache_dir: cache.to_owned(),
        cache_bytes,
        chunk_bytes: 16 << 10,
        retries: 3,
        retry_timeout: Duration::from_secs(4),
        request_timeout: Duration::from_secs(1),
        ..RemoteOptions::default()
    }
}

#[test]
fn a_pack_on_an_http_server_reads_as_the_local_pack() {
    let t = tempfile::tempdir().unwrap();
    let (server, local, url) = setup(t.path());
    for (cache_bytes, stream) in [(0, false), (0, true), (1 << 30, false), (1 << 30, true)] {
        let cache = t.path().join(format!("cache-{cache_bytes}-{stream}"));
        let remote = Arc::new(open_pack(&url, &options(&cache, cache_bytes)).unwrap());
        assert_eq!(remote.dir(), Path::new(&url));
        if !stream {
            same_as_local(&remote, &local);
        }
        let mut lr = loader(&remote, 2, stream);
        let mut ll = loader(&local, 2, stream);
        for epoch in 0..2 {
            let gets = server.gets();
            assert!(
                epoch_bytes(&mut lr, epoch).unwrap() == epoch_bytes(&mut ll, epoch).unwrap(),
                "cache {cache_bytes}, stream {stream}, epoch {epoch}"
            );
            if cache_bytes > 0 && epoch == 1 {
                assert_eq!(server.gets(), gets, "epoch 1 read only the local cache");
            } else if cache_bytes == 0 {
                assert!(server.gets() > gets, "range requests only: read over HTTP");
            }
        }
    }
    verify_pack(&url, &options(&t.path().join("verify"), 1 << 30)).unwrap();
}

#[test]
fn faults_over_http_are_ridden_out_or_named() {
    let t = tempfile::tempdir().unwrap();
    let (server, local, url) = setup(t.path());
    let want = epoch_bytes(&mut loader(&local, 2, true), 0).unwrap();
    let faults = [
        Fault::Status(503),
        Fault::Reset,
        Fault::ShortBody,
        Fault::LongLength,
        Fault::Stall(Duration::from_secs(3)),
        Fault::Endless,
    ];
    for (i, fault) in faults.into_iter().enumerate() {
        let o = options(&t.path().join(format!("burst-{i}")), 1 << 30);
        let pack = Arc::new(open_pack(&url, &o).unwrap());
        server.inject(fault, 2, Some(8));
        let got = epoch_bytes(&mut loader(&pack, 2, true), 0);
        server.clear_faults();
        assert!(got.unwrap() == want, "{fault:?}: a burst changed the epoch");
        let o = options(&t.path().join(format!("outage-{i}")), 1 << 30);
        let pack = Arc::new(open_pack(&url, &o).unwrap());
        let mut l = loader(&pack, 2, true);
        server.inject(fault, 1, None);
        let err = epoch_bytes(&mut l, 0).map(|_| ()).unwrap_err();
        server.clear_faults();
        let text = err.to_string();
        assert!(text.contains(&format!("{url}/shard-")), "{fault:?}: {text}");
        assert!(
            epoch_bytes(&mut l, 0).unwrap() == want,
            "{fault:?}: whole again"
        );
    }
    // A server that ignores `Range` (200 with the whole shard): an error
    // naming the shard's URL and why, the shard not read whole into memory.
    let o = options(&t.path().join("no-range"), 1 << 30);
    let pack = Arc::new(open_pack(&url, &o).unwrap());
    server.inject(Fault::IgnoreRange, 1, None);
    let err = epoch_bytes(&mut loader(&pack, 2, true), 0)
        .map(|_| ())
        .unwrap_err();
    server.clear_faults();
    let text = format!("{err:?}");
    assert!(
        text.contains(&format!("{url}/shard-")) && text.contains("Range"),
        "{text}"
    );
}

#[test]
fn a_missing_pack_and_a_publish_over_http_name_the_url() {
    let t = tempfile::tempdir().unwrap();
    let (server, _, _) = setup(t.path());
    let o = options(&t.path().join("cache"), 1 << 30);
    let missing = format!("{}/packs/none", server.url());
    let text = open_pack(&missing, &o).err().unwrap().to_string();
    assert!(
        text.contains(&missing) && text.contains("no manifest"),
        "{text}"
    );
    let c = cifar(&t.path().join("c2"), 10);
    let to = format!("{}/packs/new", server.url());
    let text = publish(&c, &source(), &to, &opts(5), &o, &none)
        .unwrap_err()
        .to_string();
    assert!(text.contains(&to) && text.contains("s3://"), "{text}");
    assert!(!t.path().join("www/packs/new").exists());
}

#[test]
fn a_redirect_to_another_host_is_followed_without_the_token() {
    let t = tempfile::tempdir().unwrap();
    // The CDN holds the files; the origin answers every request with a
    // redirect to it, as the Hub does.
    let (cdn, local, _) = setup(t.path());
    let origin = HttpServer::start(&t.path().join("empty")).unwrap();
    origin.redirect_to(Some(cdn.url()));
    let url = format!("{}/packs/cifar", origin.url());
    let o = RemoteOptions {
        http_token: Some("secret-token".into()),
        ..options(&t.path().join("cache"), 1 << 30)
    };
    let pack = Arc::new(open_pack(&url, &o).unwrap());
    let want = epoch_bytes(&mut loader(&local, 2, true), 0).unwrap();
    assert!(epoch_bytes(&mut loader(&pack, 2, true), 0).unwrap() == want);
    assert!(cdn.gets() > 0, "the files came from the host redirected to");
    assert!(
        origin.authorized_requests() > 0,
        "the token went to its host"
    );
    assert_eq!(
        cdn.authorized_requests(),
        0,
        "the token stayed with its host"
    );
    // A redirect that leads back to itself ends in an error naming the
    // URL, not a loop.
    let lost = HttpServer::start(&t.path().join("empty")).unwrap();
    lost.redirect_to(Some(lost.url()));
    let url = format!("{}/packs/cifar", lost.url());
    let text = open_pack(&url, &options(&t.path().join("loop"), 1 << 30))
        .err()
        .unwrap()
        .to_string();
    assert!(text.contains(&url) && text.contains("redirect"), "{text}");
}
