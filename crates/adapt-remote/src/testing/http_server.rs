//! A real HTTP file server for tests and benchmarks: tower-http's
//! `ServeDir` (GET with `Range`, HEAD, 404s, as nginx or a CDN answers)
//! over a folder on 127.0.0.1, with the same [`Fault`]s as the S3 server
//! injected into GET answers. Not a mock of this crate's client: requests
//! go over HTTP to a server that reads the files.

use super::{Fault, Shared, damage};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tower_http::services::ServeDir;

type Body = UnsyncBoxBody<Bytes, s3s::StdError>;

/// The `Content-Length` an endless body announces: 1 TiB, a lie no client
/// may size a buffer by.
const ENDLESS_LENGTH: u64 = 1 << 40;

/// A running HTTP server over a folder; stopped when dropped.
pub struct HttpServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    http: Arc<HttpState>,
    rt: tokio::runtime::Runtime,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl HttpServer {
    /// Serves the files under `root` on a free port of 127.0.0.1
    /// (`root/a/b` is `http://127.0.0.1:PORT/a/b`).
    pub fn start(root: &Path) -> std::io::Result<Self> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("http-test-server")
            .enable_all()
            .build()?;
        let listener = rt.block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let http = Arc::new(HttpState::default());
        let files = ServeDir::new(root);
        let state = (Arc::clone(&shared), Arc::clone(&http));
        let task = rt.spawn(serve(listener, files, state));
        Ok(Self {
            addr,
            shared,
            http,
            rt,
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
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

    /// Bytes of GET response bodies (as their `Content-Length` said).
    pub fn bytes_out(&self) -> u64 {
        self.shared.bytes_out.load(Ordering::Relaxed)
    }

    /// From now on every request (GET and HEAD) is answered `302 Found`
    /// with `Location: {target}{path}` (a host that moved its files to a
    /// CDN); `None` serves the files again.
    pub fn redirect_to(&self, target: Option<String>) {
        *self
            .http
            .redirect
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = target;
    }

    /// Requests so far that carried an `Authorization` header.
    pub fn authorized_requests(&self) -> usize {
        self.http.authorized.load(Ordering::Relaxed)
    }
}

/// What only the HTTP server has: its redirect and what it saw of
/// credentials.
#[derive(Default)]
struct HttpState {
    redirect: Mutex<Option<String>>,
    authorized: AtomicUsize,
}

impl HttpState {
    /// Counts a request's credentials; its redirect answer, if one is set.
    fn redirect(&self, req: &Request<Incoming>) -> Option<Result<Response<Body>, std::io::Error>> {
        if req.headers().contains_key(http::header::AUTHORIZATION) {
            self.authorized.fetch_add(1, Ordering::Relaxed);
        }
        let target = self
            .redirect
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()?;
        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
        Some(
            Response::builder()
                .status(StatusCode::FOUND)
                .header(http::header::LOCATION, format!("{target}{path}"))
                .body(empty_body())
                .map_err(std::io::Error::other),
        )
    }
}

/// An empty answer body.
fn empty_body() -> Body {
    http_body_util::Empty::new()
        .map_err(|e: std::convert::Infallible| -> s3s::StdError { match e {} })
        .boxed_unsync()
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = self.rt.block_on(t);
        }
    }
}

/// Accepts connections until aborted (which drops, so aborts, them all).
async fn serve(
    listener: tokio::net::TcpListener,
    files: ServeDir,
    (shared, http): (Arc<Shared>, Arc<HttpState>),
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        let Ok((socket, _)) = listener.accept().await else {
            continue;
        };
        let files = files.clone();
        let shared = Arc::clone(&shared);
        let http = Arc::clone(&http);
        conns.spawn(async move {
            let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                let files = files.clone();
                let shared = Arc::clone(&shared);
                let http = Arc::clone(&http);
                async move {
                    match http.redirect(&req) {
                        Some(answer) => answer,
                        None => handle(files, &shared, req).await,
                    }
                }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(socket), svc)
                .await;
        });
    }
}

async fn handle(
    mut files: ServeDir,
    shared: &Shared,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, std::io::Error> {
    let is_get = req.method() == http::Method::GET;
    let fault = if is_get {
        shared.gets.fetch_add(1, Ordering::Relaxed);
        shared.next_fault()
    } else {
        shared.other.fetch_add(1, Ordering::Relaxed);
        None
    };
    match fault {
        Some(Fault::Status(code)) => {
            let empty = empty_body();
            let status = StatusCode::from_u16(code).map_err(std::io::Error::other)?;
            return Response::builder()
                .status(status)
                .body(empty)
                .map_err(std::io::Error::other);
        }
        Some(Fault::Stall(d)) => tokio::time::sleep(d).await,
        Some(Fault::IgnoreRange) => {
            req.headers_mut().remove(http::header::RANGE);
        }
        _ => {}
    }
    let resp = files.try_call(req).await?;
    let (mut parts, body) = resp.into_parts();
    let body: Body = match fault {
        Some(f @ (Fault::Reset | Fault::ShortBody | Fault::LongLength)) => {
            let whole = body.collect().await?.to_bytes();
            let (length, pieces) = damage(whole, f);
            parts.headers.insert(
                http::header::CONTENT_LENGTH,
                http::HeaderValue::from(length),
            );
            let frames = futures::stream::iter(pieces.into_iter().map(|p| p.map(Frame::data)));
            StreamBody::new(frames).boxed_unsync()
        }
        Some(Fault::Endless) => {
            parts.headers.insert(
                http::header::CONTENT_LENGTH,
                http::HeaderValue::from(ENDLESS_LENGTH),
            );
            let zeros = Bytes::from(vec![0u8; 1 << 16]);
            let frames = futures::stream::repeat_with(move || Ok(Frame::data(zeros.clone())));
            StreamBody::new(frames).boxed_unsync()
        }
        _ => body
            .map_err(|e| -> s3s::StdError { Box::new(e) })
            .boxed_unsync(),
    };
    if is_get
        && let Some(n) = parts
            .headers
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    {
        shared.bytes_out.fetch_add(n, Ordering::Relaxed);
    }
    Ok(Response::from_parts(parts, body))
}
