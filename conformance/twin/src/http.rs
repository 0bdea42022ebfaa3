//! The twin's HTTP/1.1 server: an accept loop over a listener bound like vLLM's (`SO_REUSEADDR` and
//! `SO_REUSEPORT`, afd-spec §6.4), serving an axum router connection by connection through hyper.
//!
//! It serves connections itself, rather than through `axum::serve`, so two faults can act below HTTP: a
//! handler may ask for its connection to be closed with no response ([`DropConnection`]), and with
//! duplication on every marked response is written twice ([`DuplicateResponse`]).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::watch;
use tower::ServiceExt as _;

/// Response extension: close the connection instead of answering (`drop-response`).
#[derive(Clone, Copy, Debug)]
pub struct DropConnection;

/// Response extension: write this response twice (`duplicate-response`).
#[derive(Clone, Copy, Debug)]
pub struct DuplicateResponse;

/// Binds `addr` with `SO_REUSEADDR` and `SO_REUSEPORT` as vLLM's API server does, without listening.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<TcpSocket> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    Ok(socket)
}

/// Resolves `host:port` to the first address it names.
pub async fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    tokio::net::lookup_host((host, port))
        .await?
        .next()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::AddrNotAvailable,
                format!("{host} resolves to no address"),
            )
        })
}

/// Serves `router` on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    duplicate: bool,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = shutdown.changed() => return,
        };
        let Ok((stream, _)) = accepted else {
            // Out of file descriptors or a connection reset before accept: keep serving the others.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        tokio::spawn(async move {
            if duplicate {
                serve_duplicating(stream, router).await;
            } else {
                serve_plain(stream, router).await;
            }
        });
    }
}

/// Calls the router; a [`DropConnection`] response becomes a service error, which makes hyper close
/// the connection without writing anything.
async fn call(
    router: Router,
    request: hyper::Request<Incoming>,
    duplicate_flag: Option<Arc<AtomicBool>>,
) -> Result<Response, io::Error> {
    let mut response = match router.oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    // Starlette's 405 names the route's methods without HEAD (axum adds it to every GET route).
    if let Some(allow) = response.headers().get(axum::http::header::ALLOW)
        && allow.as_bytes() == b"GET,HEAD"
    {
        response.headers_mut().insert(
            axum::http::header::ALLOW,
            axum::http::HeaderValue::from_static("GET"),
        );
    }
    if response.extensions().get::<DropConnection>().is_some() {
        return Err(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "response dropped by fault",
        ));
    }
    if let Some(flag) = duplicate_flag
        && response.extensions().get::<DuplicateResponse>().is_some()
    {
        flag.store(true, Ordering::Relaxed);
    }
    Ok(response)
}

async fn serve_plain(stream: TcpStream, router: Router) {
    let service = hyper::service::service_fn(move |request| call(router.clone(), request, None));
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// One request per connection (keep-alive off); a marked response's bytes are written again after it.
async fn serve_duplicating(stream: TcpStream, router: Router) {
    let flag = Arc::new(AtomicBool::new(false));
    let service_flag = flag.clone();
    let service = hyper::service::service_fn(move |request| {
        call(router.clone(), request, Some(service_flag.clone()))
    });
    let connection = hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .serve_connection(TokioIo::new(CaptureIo::new(stream)), service)
        .without_shutdown();
    let Ok(parts) = connection.await else {
        return;
    };
    let mut capture = parts.io.into_inner();
    if flag.load(Ordering::Relaxed) {
        let copy = std::mem::take(&mut capture.written);
        let _ = capture.inner.write_all(&copy).await;
    }
    let _ = capture.inner.shutdown().await;
}

/// A stream that remembers everything written to it.
struct CaptureIo {
    inner: TcpStream,
    written: Vec<u8>,
}

impl CaptureIo {
    fn new(inner: TcpStream) -> CaptureIo {
        CaptureIo {
            inner,
            written: Vec::new(),
        }
    }
}

impl AsyncRead for CaptureIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CaptureIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = poll {
            this.written.extend_from_slice(&buf[..n]);
        }
        poll
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
