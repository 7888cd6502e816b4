//! A PostgreSQL socket read and written by the thread that calls, with no reactor between.
//!
//! A connection that does not listen is used by one thread at a time, and only while that
//! thread waits for its answer. So that thread sends the request, then blocks in `poll(2)` on
//! the socket itself, and the kernel wakes it when the server answers ([`Driven::run`]). Driven
//! through tokio's reactor instead, each round trip also woke the reactor's thread, which then
//! woke the caller: one more thread hand-off per statement. For the row `serve_pg/poll_id` of
//! `benches/serve.rs`.
//!
//! The socket is a plain non-blocking std socket ([`Direct`]) that reports "would block" as
//! `Pending` and remembers which way it blocked, so the driver knows what to wait for; no waker
//! is ever registered, because the only thread that could be woken is the one that polls.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::Host;
use tokio_postgres::Config;

const READ: u8 = 1;
const WRITE: u8 = 2;

/// The connected socket, TCP or a Unix socket in the server's socket directory.
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Tcp(s) => s.as_fd(),
            Stream::Unix(s) => s.as_fd(),
        }
    }
}

/// What the socket is shared as: the connection reads and writes it, the driver waits on it.
struct Shared {
    stream: Stream,
    /// Which ways ([`READ`], [`WRITE`]) the last poll found it would block.
    blocked: AtomicU8,
}

/// The socket half handed to tokio-postgres (`Config::connect_raw`).
pub struct Direct(Arc<Shared>);

/// The driver's handle on the same socket: waits until it is ready the way it blocked.
pub struct Waiter {
    shared: Arc<Shared>,
    woken: Arc<Woken>,
}

impl Direct {
    fn io<T>(&self, way: u8, mut op: impl FnMut(&Stream) -> io::Result<T>) -> Poll<io::Result<T>> {
        loop {
            match op(&self.0.stream) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.0.blocked.fetch_or(way, Ordering::Relaxed);
                    return Poll::Pending;
                }
                other => return Poll::Ready(other),
            }
        }
    }
}

impl AsyncRead for Direct {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let unfilled = buf.initialize_unfilled();
        let n = match self.io(READ, |s| match s {
            Stream::Tcp(s) => (&*s).read(unfilled),
            Stream::Unix(s) => (&*s).read(unfilled),
        }) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Direct {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        self.io(WRITE, |s| match s {
            Stream::Tcp(s) => (&*s).write(b),
            Stream::Unix(s) => (&*s).write(b),
        })
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let how = std::net::Shutdown::Write;
        Poll::Ready(match &self.0.stream {
            Stream::Tcp(s) => s.shutdown(how),
            Stream::Unix(s) => s.shutdown(how),
        })
    }
}

impl Waiter {
    /// Blocks until the socket is ready the way(s) it last blocked (reading when none was
    /// recorded: the server's answer is what every wait is for), or `until` passes. False when
    /// the time ran out.
    pub fn wait(&self, until: Option<Instant>) -> io::Result<bool> {
        let blocked = self.shared.blocked.swap(0, Ordering::Relaxed);
        let mut flags = PollFlags::IN;
        if blocked & WRITE != 0 {
            flags |= PollFlags::OUT;
        }
        loop {
            let timeout = match until {
                Some(t) => {
                    let left = t.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(false);
                    }
                    Some(rustix::event::Timespec::try_from(left).unwrap_or(
                        rustix::event::Timespec {
                            tv_sec: i64::MAX,
                            tv_nsec: 0,
                        },
                    ))
                }
                None => None,
            };
            let mut fds = [PollFd::new(&self.shared.stream, flags)];
            match rustix::event::poll(&mut fds, timeout.as_ref()) {
                Ok(0) => continue,
                Ok(_) => return Ok(true),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// What the driver's polls were woken by: tokio-postgres's channels between the client and
/// its connection (a response handed over, or room made for the next), never the socket.
#[derive(Default)]
struct Woken(AtomicBool);

impl std::task::Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Runs `f`, which makes progress only when `drive` does (or by itself), to completion on this
/// thread: poll `f`, then `drive` (the connection, which reads and writes the socket), then
/// `f` again. When both wait and neither woke the other (the connection may hold a response
/// until `f` takes the one before: their channel is short), block on the socket. `None` when
/// `until` passed first.
pub fn run<F: Future>(
    waiter: &Waiter,
    until: Option<Instant>,
    f: F,
    mut drive: impl FnMut(&mut Context<'_>) -> Poll<()>,
) -> io::Result<Option<F::Output>> {
    let woken = &waiter.woken;
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        woken.0.store(false, Ordering::Release);
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return Ok(Some(out));
        }
        let ended = drive(&mut cx).is_ready();
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return Ok(Some(out));
        }
        if ended || woken.0.load(Ordering::Acquire) {
            // Something moved (or the socket ended, and with it the client's channel: `f`
            // fails on its next poll): poll again before waiting.
            continue;
        }
        if !waiter.wait(until)? {
            return Ok(None);
        }
    }
}

/// Why a connection could not be made: the socket, or the server's start-up.
pub enum Failed {
    Io(io::Error),
    Server(tokio_postgres::Error),
}

/// Connects to the first of `config`'s hosts that answers, as tokio-postgres would (each host,
/// or its `hostaddr`, in order, at its port; a Unix socket in the directory a host names),
/// with `Nagle` off and keepalives as configured, then starts the session on this thread.
pub fn connect(
    config: &Config,
) -> Result<
    (
        tokio_postgres::Client,
        tokio_postgres::Connection<Direct, tokio_postgres::tls::NoTlsStream>,
        Waiter,
    ),
    Failed,
> {
    let timeout = config.get_connect_timeout().copied();
    let (shared, until) = open(config, timeout).map_err(Failed::Io)?;
    let shared = Arc::new(shared);
    let waiter = Waiter {
        shared: shared.clone(),
        woken: Arc::default(),
    };
    let start = config.connect_raw(Direct(shared), tokio_postgres::NoTls);
    match run(&waiter, until, start, |_| Poll::Pending).map_err(Failed::Io)? {
        Some(Ok((client, connection))) => Ok((client, connection, waiter)),
        Some(Err(e)) => Err(Failed::Server(e)),
        None => Err(Failed::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            "the server did not finish the connection's start-up in time",
        ))),
    }
}

fn open(config: &Config, timeout: Option<Duration>) -> io::Result<(Shared, Option<Instant>)> {
    let hosts = config.get_hosts();
    let addrs = config.get_hostaddrs();
    let count = hosts.len().max(addrs.len());
    if count == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the URL names no host",
        ));
    }
    let ports = config.get_ports();
    let mut last = None;
    for i in 0..count {
        let port = match ports {
            [] => 5432,
            [one] => *one,
            many => many.get(i).copied().unwrap_or(5432),
        };
        let until = timeout.map(|t| Instant::now() + t);
        let stream = match (addrs.get(i), hosts.get(i)) {
            (Some(ip), _) => tcp(&[(*ip, port).into()], timeout, config),
            (None, Some(Host::Tcp(name))) => (name.as_str(), port)
                .to_socket_addrs()
                .and_then(|a| tcp(&a.collect::<Vec<_>>(), timeout, config)),
            (None, Some(Host::Unix(dir))) => {
                UnixStream::connect(dir.join(format!(".s.PGSQL.{port}"))).map(Stream::Unix)
            }
            (None, None) => continue,
        };
        match stream.and_then(|s| {
            match &s {
                Stream::Tcp(t) => t.set_nonblocking(true)?,
                Stream::Unix(u) => u.set_nonblocking(true)?,
            }
            Ok(s)
        }) {
            Ok(stream) => {
                let shared = Shared {
                    stream,
                    blocked: AtomicU8::new(0),
                };
                return Ok((shared, until));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no host could be tried")))
}

fn tcp(
    addrs: &[std::net::SocketAddr],
    timeout: Option<Duration>,
    config: &Config,
) -> io::Result<Stream> {
    let mut last = None;
    for addr in addrs {
        let stream = match timeout {
            Some(t) => TcpStream::connect_timeout(addr, t),
            None => TcpStream::connect(addr),
        };
        match stream {
            Ok(s) => {
                s.set_nodelay(true)?;
                if config.get_keepalives() {
                    rustix::net::sockopt::set_socket_keepalive(&s, true)?;
                    rustix::net::sockopt::set_tcp_keepidle(&s, config.get_keepalives_idle())?;
                }
                return Ok(Stream::Tcp(s));
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("the host name resolved to no address")))
}
