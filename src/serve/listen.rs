//! The accept loop of the HTTP servers (`threadbase http`'s [`super::http`] and `threadbase
//! web`'s [`super::web`]): at most [`Rules::max_connections`] connections at once (further ones
//! wait in the listen backlog), each served by hyper's HTTP/1.1 with the server's handler; on
//! shutdown no new connections, every open one told to finish (kept-alive ones close after their
//! request in flight, event streams end through the stop signal), and a bounded wait for them.
//! What a request gets is the handler's: this module knows no path, token or body.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::error::Result;

/// How a server accepts, serves and closes its connections.
pub struct Rules {
    /// The server as its log lines name it (`threadbase http`).
    pub name: &'static str,
    /// Connections handled at once.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight.
    pub drain: Duration,
    /// After a connection's last response, what is still read from the client before the
    /// socket is closed; `None` closes it at once.
    pub linger: Option<Linger>,
    /// hyper's settings for each connection ([`builder`] and the server's own).
    pub builder: http1::Builder,
}

/// After the last response, how long (and how many bytes) the server reads what the client
/// still sends before it closes, so a close with unread input (an early 401 or 413) does not
/// reset the connection before the client has read the response.
#[derive(Debug, Clone, Copy)]
pub struct Linger {
    pub time: Duration,
    pub bytes: usize,
}

/// hyper's HTTP/1.1 settings both servers start from: its timer, and `head_timeout` for a
/// request's line and headers (and for a kept-alive connection's idle time).
pub fn builder(head_timeout: Duration) -> http1::Builder {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(head_timeout);
    builder
}

type Answer<B> =
    Pin<Box<dyn Future<Output = std::result::Result<hyper::Response<B>, Infallible>> + Send>>;

/// Serves `handler` on `listener` under `rules` until `shutdown` completes, then sends `stop`
/// (every connection shuts down gracefully; whatever else holds a receiver of it, an event
/// stream, ends) and waits at most [`Rules::drain`] for the connections in flight.
pub async fn serve<H, F, B>(
    listener: TcpListener,
    rules: Rules,
    stop: watch::Sender<bool>,
    shutdown: impl Future<Output = ()>,
    handler: H,
) -> Result<()>
where
    H: Fn(hyper::Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = hyper::Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let Rules {
        name,
        max_connections,
        drain,
        linger,
        builder,
    } = rules;
    let handler = Arc::new(handler);
    let slots = Arc::new(Semaphore::new(max_connections));
    let builder = Arc::new(builder);
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => break,
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let accepted = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                let handler = handler.clone();
                let builder = builder.clone();
                let stop = stop.subscribe();
                tokio::spawn(tracing::Instrument::instrument(
                    async move {
                        connection(&builder, stream, handler, stop, linger).await;
                        drop(permit);
                    },
                    tracing::debug_span!("connection", %peer),
                ));
            }
            Err(e) => {
                // Out of descriptors and the like: wait a moment instead of spinning.
                tracing::warn!("{name}: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop(listener);
    stop.send_replace(true);
    let all = u32::try_from(max_connections).unwrap_or(u32::MAX);
    let _ = tokio::time::timeout(drain, slots.acquire_many(all)).await;
    Ok(())
}

/// One connection: its requests through `handler` until it ends (or, once `stop` is sent, after
/// the request in flight); then our side's close, and the linger.
async fn connection<H, F, B>(
    builder: &http1::Builder,
    stream: TcpStream,
    handler: Arc<H>,
    mut stop: watch::Receiver<bool>,
    linger: Option<Linger>,
) where
    H: Fn(hyper::Request<Incoming>) -> F + Send + Sync + 'static,
    F: Future<Output = hyper::Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let _ = stream.set_nodelay(true);
    let service = hyper::service::service_fn(move |req| -> Answer<B> {
        let answer = handler(req);
        Box::pin(async move { Ok(answer.await) })
    });
    let mut conn = builder.serve_connection(TokioIo::new(stream), service);
    let mut stopping = *stop.borrow();
    if stopping {
        Pin::new(&mut conn).graceful_shutdown();
    }
    let result = loop {
        tokio::select! {
            r = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => break r,
            changed = stop.changed(), if !stopping => {
                stopping = true;
                if changed.is_err() || *stop.borrow() {
                    Pin::new(&mut conn).graceful_shutdown();
                }
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!("connection ended: {e}");
    }
    // Close ourselves: end our side, then read (bounded) what the client still sends.
    let mut stream = conn.into_parts().io.into_inner();
    let _ = stream.shutdown().await;
    let Some(Linger { time, bytes }) = linger else {
        return;
    };
    let mut sink = [0u8; 16 * 1024];
    let mut left = bytes;
    let read = async {
        while left > 0 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(time, read).await;
}
