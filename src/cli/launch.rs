//! What the listening commands (`threadbase http`, `threadbase web`) share: a runtime of two
//! worker threads, the bind of their address, the lines they print once bound (stdout flushed,
//! so a caller that asked for port 0 can read the port), their server until ctrl-c or SIGTERM,
//! and the WAL settled after. Each command keeps its flags, its token, its lines and its server.

use std::future::Future;
use std::io::Write;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::error::{Error, Result};
use crate::Store;

/// Where a listening command listens, and what it says when it cannot.
pub struct Endpoint<'a> {
    /// The command, as its log lines name it (`threadbase http`).
    pub name: &'a str,
    pub addr: SocketAddr,
    /// What the bind failure's `Repair:` says to do.
    pub repair: &'a str,
}

/// The future that completes on ctrl-c or SIGTERM, handed to the server as its shutdown.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Runs a listening command on `store`: binds `at.addr`, calls `announce` with the bound address
/// to print its lines (stdout is flushed after), then runs the server `serve` makes from the
/// listener, what `announce` returned and the shutdown; once it stopped, settles the WAL.
pub fn run<A, S, F>(
    at: Endpoint<'_>,
    store: Arc<Store>,
    out: &mut dyn Write,
    announce: impl FnOnce(SocketAddr, &mut dyn Write) -> Result<A>,
    serve: S,
) -> Result<()>
where
    S: FnOnce(TcpListener, Arc<Store>, A, Shutdown) -> F,
    F: Future<Output = Result<()>>,
{
    let settle = store.clone();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let addr = at.addr;
        let listener = TcpListener::bind(addr).await.map_err(|e| {
            Error::io(format!(
                "Cannot listen on {addr} ({e}). Repair: {}",
                at.repair
            ))
        })?;
        let bound = listener.local_addr()?;
        let announced = announce(bound, out)?;
        out.flush()?;
        serve(listener, store, announced, Box::pin(stop_signal())).await?;
        tracing::info!("{} stopped", at.name);
        Ok::<(), Error>(())
    })?;
    settle.settle_wal();
    Ok(())
}

/// Completes on ctrl-c or SIGTERM.
pub async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
