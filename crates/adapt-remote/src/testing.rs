//! Real object servers for tests and benchmarks — S3, and plain HTTP in
//! [`HttpServer`]. The S3 server is `s3s-fs` (an S3
//! implementation over a folder) served on 127.0.0.1, with switches for
//! the faults a loader must survive — stopped, restarted on the same port,
//! slow, failing writes, and [`Fault`]s injected into reads (error
//! statuses, connections cut mid-body, short bodies, wrong lengths,
//! stalls). Not a mock of this crate's client: requests go over HTTP,
//! signed, to a server that stores objects as files.

mod http_server;

pub use http_server::HttpServer;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Access key the server accepts.
pub const ACCESS_KEY: &str = "adapt-test";
/// Secret key the server accepts.
pub const SECRET_KEY: &str = "adapt-test-secret";

/// Request counters and fault switches, shared with the serving tasks.
#[derive(Default)]
struct Shared {
    gets: AtomicUsize,
    puts: AtomicUsize,
    /// PUT requests that were parts of multipart uploads.
    parts: AtomicUsize,
    other: AtomicUsize,
    bytes_out: AtomicU64,
    delay_ms: AtomicU64,
    /// PUT requests (whole objects and parts) allowed before they fail
    /// with 500; `usize::MAX` = no limit.
    puts_left: AtomicUsize,
    failing: AtomicBool,
    injection: Mutex<Option<Injection>>,
    injected: AtomicUsize,
}

/// A fault the server injects into the answers to GET requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answered with this status (500, 503 …) and no body.
    Status(u16),
    /// The connection is cut halfway through the body (its
    /// `Content-Length` announced the whole).
    Reset,
    /// Half the body, with a `Content-Length` that says half: a short body
    /// that looks whole on the wire (only `Content-Range` disagrees).
    ShortBody,
    /// The whole body, with a `Content-Length` 100 bytes larger, then the
    /// connection closed.
    LongLength,
    /// Nothing sent for this long, then the answer.
    Stall(Duration),
    /// HTTP server only (the S3 server answers as usual): the `Range`
    /// header ignored, the whole file sent with 200, as a server without
    /// range support answers.
    IgnoreRange,
    /// HTTP server only (the S3 server answers as usual): the answer's
    /// body never ends (zeros until the client hangs up) under a
    /// `Content-Length` that lies (1 TiB).
    Endless,
}

/// Which GET requests get the fault.
#[derive(Clone, Copy, Debug)]
struct Injection {
    fault: Fault,
    every: usize,
    left: Option<usize>,
    seen: usize,
}

/// A running S3 server over a folder; stopped when dropped.
pub struct S3Server {
    root: PathBuf,
    addr: SocketAddr,
    shared: Arc<Shared>,
    rt: tokio::runtime::Runtime,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl S3Server {
    /// Serves the folder `root` (each subfolder is a bucket; `bucket` is
    /// created) on a free port of 127.0.0.1.
    pub fn start(root: &Path, bucket: &str) -> std::io::Result<Self> {
        std::fs::create_dir_all(root.join(bucket))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("s3-test-server")
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            puts_left: AtomicUsize::new(usize::MAX),
            ..Shared::default()
        });
        let s = Self {
            root: root.to_owned(),
            addr,
            shared,
            rt,
            task: Mutex::new(None),
        };
        s.serve(listener)?;
        Ok(s)
    }

    fn serve(&self, listener: tokio::net::TcpListener) -> std::io::Result<()> {
        let fs = s3s_fs::FileSystem::new(&self.root)
            .map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        let service = {
            let mut b = s3s::service::S3ServiceBuilder::new(fs);
            b.set_auth(s3s::auth::SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            b.build()
        };
        let shared = Arc::clone(&self.shared);
        let task = self.rt.spawn(async move {
            let mut conns = tokio::task::JoinSet::new();
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    continue;
                };
                let service = service.clone();
                let shared = Arc::clone(&shared);
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let service = service.clone();
                        let shared = Arc::clone(&shared);
                        async move { handle(&service, &shared, req).await }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(socket), svc)
                        .await;
                });
            }
        });
        *self.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
        Ok(())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Client options for this server (endpoint, credentials, region), with
    /// a cache in `cache_dir`.
    pub fn options(&self, cache_dir: &Path) -> crate::RemoteOptions {
        crate::RemoteOptions {
            endpoint: Some(self.endpoint()),
            region: Some("us-east-1".into()),
            credentials: Some((ACCESS_KEY.into(), SECRET_KEY.into())),
            cache_dir: cache_dir.to_owned(),
            ..crate::RemoteOptions::default()
        }
    }

    /// The folder objects are stored in (`root/bucket/key`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stops serving: the listener closes and open connections are cut.
    pub fn stop(&self) {
        if let Some(t) = self.task.lock().unwrap_or_else(|p| p.into_inner()).take() {
            t.abort();
            // Aborting the accept loop drops its JoinSet, which aborts every
            // connection; wait until the port is free.
            let _ = self.rt.block_on(t);
        }
    }

    /// Serves again on the same port.
    pub fn restart(&self) -> std::io::Result<()> {
        self.stop();
        let listener = self.rt.block_on(tokio::net::TcpListener::bind(self.addr))?;
        self.serve(listener)
    }

    /// Delays every response by `delay`.
    pub fn set_delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }

    /// Lets `n` more PUT requests through, then fails each with 500
    /// (`None`: no limit).
    pub fn fail_puts_after(&self, n: Option<usize>) {
        self.shared
            .puts_left
            .store(n.unwrap_or(usize::MAX), Ordering::Relaxed);
    }

    /// Every request answered 500 while on.
    pub fn set_failing(&self, on: bool) {
        self.shared.failing.store(on, Ordering::Relaxed);
    }

    /// Injects `fault` into every `every`-th GET request from now on, at
    /// most `times` times (`None`: until [`Self::clear_faults`]).
    pub fn inject(&self, fault: Fault, every: usize, times: Option<usize>) {
        self.shared.inject(fault, every, times);
    }

    /// Stops injecting faults.
    pub fn clear_faults(&self) {
        self.shared.clear_faults();
    }

    /// Faults injected so far.
    pub fn faults_injected(&self) -> usize {
        self.shared.injected.load(Ordering::Relaxed)
    }

    /// GET requests served so far.
    pub fn gets(&self) -> usize {
        self.shared.gets.load(Ordering::Relaxed)
    }

    /// PUT requests served so far (objects and parts).
    pub fn puts(&self) -> usize {
        self.shared.puts.load(Ordering::Relaxed)
    }

    /// PUT requests that were parts of a multipart upload.
    pub fn parts(&self) -> usize {
        self.shared.parts.load(Ordering::Relaxed)
    }

    /// Bytes of GET response bodies (as the objects' sizes say).
    pub fn bytes_out(&self) -> u64 {
        self.shared.bytes_out.load(Ordering::Relaxed)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Shared {
    fn inject(&self, fault: Fault, every: usize, times: Option<usize>) {
        *self.injection.lock().unwrap_or_else(|p| p.into_inner()) = Some(Injection {
            fault,
            every: every.max(1),
            left: times,
            seen: 0,
        });
    }

    fn clear_faults(&self) {
        *self.injection.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The fault for the GET request being served, if it gets one.
    fn next_fault(&self) -> Option<Fault> {
        let mut inj = self.injection.lock().unwrap_or_else(|p| p.into_inner());
        let i = inj.as_mut()?;
        i.seen += 1;
        if i.seen % i.every != 0 || i.left == Some(0) {
            return None;
        }
        if let Some(left) = &mut i.left {
            *left -= 1;
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        Some(i.fault)
    }
}

/// A body of byte pieces that may end in an error (the connection cut).
struct Pieces(std::collections::VecDeque<Result<bytes::Bytes, s3s::StdError>>);

impl futures::Stream for Pieces {
    type Item = Result<bytes::Bytes, s3s::StdError>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.pop_front())
    }
}

impl s3s::stream::ByteStream for Pieces {}

/// The pieces of a body `whole` damaged as `fault` says, and the
/// `Content-Length` to announce for them.
fn damage(whole: bytes::Bytes, fault: Fault) -> (usize, Vec<Result<bytes::Bytes, s3s::StdError>>) {
    let half = whole.slice(..whole.len() / 2);
    match fault {
        Fault::Reset => (
            whole.len(),
            vec![Ok(half), Err("connection cut by the test server".into())],
        ),
        Fault::ShortBody => (half.len(), vec![Ok(half)]),
        _ => (whole.len() + 100, vec![Ok(whole)]),
    }
}

/// `resp` with its body (read whole) damaged as `fault` says.
async fn damaged(
    resp: Response<s3s::Body>,
    fault: Fault,
) -> Result<Response<s3s::Body>, s3s::HttpError> {
    use futures::StreamExt;
    let (mut parts, mut body) = resp.into_parts();
    let mut whole = Vec::new();
    while let Some(piece) = body.next().await {
        whole.extend_from_slice(&piece.map_err(s3s::HttpError::new)?);
    }
    let (length, pieces) = damage(whole.into(), fault);
    parts.headers.insert(
        http::header::CONTENT_LENGTH,
        http::HeaderValue::from(length),
    );
    let stream: s3s::stream::DynByteStream = Box::pin(Pieces(pieces.into()));
    Ok(Response::from_parts(parts, s3s::Body::from(stream)))
}

async fn handle(
    service: &s3s::service::S3Service,
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<s3s::Body>, s3s::HttpError> {
    let delay = shared.delay_ms.load(Ordering::Relaxed);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    let fail = || {
        Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(s3s::Body::empty())
            .map_err(|e| s3s::HttpError::new(Box::new(e)))
    };
    if shared.failing.load(Ordering::Relaxed) {
        return fail();
    }
    match *req.method() {
        http::Method::GET => {
            shared.gets.fetch_add(1, Ordering::Relaxed);
        }
        http::Method::PUT => {
            let left = shared.puts_left.load(Ordering::Relaxed);
            if left == 0 {
                return fail();
            }
            if left != usize::MAX {
                shared.puts_left.fetch_sub(1, Ordering::Relaxed);
            }
            shared.puts.fetch_add(1, Ordering::Relaxed);
            // UploadPart is a PUT with the part's number in its query.
            if req.uri().query().is_some_and(|q| q.contains("partNumber=")) {
                shared.parts.fetch_add(1, Ordering::Relaxed);
            }
        }
        _ => {
            shared.other.fetch_add(1, Ordering::Relaxed);
        }
    }
    let is_get = req.method() == http::Method::GET;
    let fault = if is_get { shared.next_fault() } else { None };
    match fault {
        Some(Fault::Status(code)) => {
            return Response::builder()
                .status(code)
                .body(s3s::Body::empty())
                .map_err(|e| s3s::HttpError::new(Box::new(e)));
        }
        Some(Fault::Stall(d)) => tokio::time::sleep(d).await,
        _ => {}
    }
    let mut resp = service.call(req.map(s3s::Body::from)).await?;
    if let Some(f @ (Fault::Reset | Fault::ShortBody | Fault::LongLength)) = fault {
        resp = damaged(resp, f).await?;
    }
    if is_get
        && let Some(n) = resp
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    {
        shared.bytes_out.fetch_add(n, Ordering::Relaxed);
    }
    Ok(resp)
}
