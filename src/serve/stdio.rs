//! `serve`'s own stdin as an async stream driven by the runtime's reactor, and the checks
//! `output` uses to write stdout without blocking.
//!
//! tokio's `stdin()`/`stdout()` do every read and write on a blocking-pool thread: each request
//! line cost a hand-off to that thread and a wake-up back, and so did each response line. When
//! a stream is a pipe or a socket (what a Pi extension's `child_process.spawn` gives: libuv
//! uses socket pairs), it is instead set non-blocking and registered with the reactor, so the
//! worker that is woken by the line reads it itself. A terminal or a regular file cannot be
//! polled that way (and a terminal's non-blocking flag would leak into the shell that shares
//! it), so those keep tokio's blocking streams. Each stream's original file status flags are
//! put back when its [`RestoreFlags`] guard is dropped (a serve killed with SIGKILL cannot;
//! the pipes a Pi extension creates belong to that serve alone).
//!
//! When stdin and stdout are one file (one socket for both), the non-blocking flag would be
//! shared by both, so neither is touched: stdin keeps tokio's blocking stream and stdout the
//! writer thread's blocking writes ([`shares_stdin_and_stdout`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, OFlags};
use tokio::io::AsyncRead;

/// stdin as a stream.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;

/// A pollable copy (close-on-exec, so children never inherit it) of `fd`, set non-blocking,
/// and `fd`'s flags before; `None` when `fd` is not a pipe or socket.
pub(crate) fn pollable(fd: BorrowedFd<'_>) -> Option<(OwnedFd, OFlags)> {
    let stat = rustix::fs::fstat(fd).ok()?;
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Fifo | FileType::Socket => {}
        _ => return None,
    }
    let flags = rustix::fs::fcntl_getfl(fd).ok()?;
    let copy = rustix::io::fcntl_dupfd_cloexec(fd, 3).ok()?;
    rustix::fs::fcntl_setfl(fd, flags | OFlags::NONBLOCK).ok()?;
    Some((copy, flags))
}

/// Room for a large response line in stdout's buffer, asked for up to [`WIDE_BUFFER`]: a pipe's
/// capacity raised with `F_SETPIPE_SZ` (up to the system's `pipe-max-size`), a socket's send
/// buffer with `SO_SNDBUF` (up to `wmem_max`). With the default 64 KiB pipe, a list line of a
/// few MB crossed in 64 KiB steps, each costing the writer and the reader a wake-up. Returns
/// the buffer's size as the kernel reports it (0 when it cannot tell); the pages are allocated
/// only while bytes wait in them.
pub(crate) fn widen(fd: &OwnedFd) -> usize {
    let Ok(stat) = rustix::fs::fstat(fd) else {
        return 0;
    };
    match FileType::from_raw_mode(stat.st_mode) {
        FileType::Fifo => {
            let max = std::fs::read_to_string("/proc/sys/fs/pipe-max-size")
                .ok()
                .and_then(|t| t.trim().parse::<usize>().ok())
                .unwrap_or(WIDE_BUFFER);
            let _ = rustix::pipe::fcntl_setpipe_size(fd, WIDE_BUFFER.min(max));
            rustix::pipe::fcntl_getpipe_size(fd).unwrap_or(0)
        }
        FileType::Socket => {
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(fd, WIDE_BUFFER);
            // Linux reports twice what a send can hold (the rest is bookkeeping).
            rustix::net::sockopt::socket_send_buffer_size(fd).map_or(0, |n| n / 2)
        }
        _ => 0,
    }
}

/// What [`widen`] asks for.
pub(crate) const WIDE_BUFFER: usize = 1024 * 1024;

/// True when stdin and stdout are the same file (or either cannot be checked): then neither
/// may be made non-blocking.
pub(crate) fn shares_stdin_and_stdout() -> bool {
    match (
        rustix::fs::fstat(std::io::stdin().as_fd()),
        rustix::fs::fstat(std::io::stdout().as_fd()),
    ) {
        (Ok(a), Ok(b)) => a.st_dev == b.st_dev && a.st_ino == b.st_ino,
        _ => true,
    }
}

/// stdin; call inside the runtime (the reactor registers it). Keep the guard until the stream
/// is done with.
pub fn stdin() -> (Input, RestoreFlags) {
    let fd = std::io::stdin();
    if shares_stdin_and_stdout() {
        return (Box::new(tokio::io::stdin()), RestoreFlags::none());
    }
    if let Some((copy, flags)) = pollable(fd.as_fd()) {
        match tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(copy) {
            Ok(rx) => return (Box::new(rx), RestoreFlags::new(flags)),
            Err(_) => drop(RestoreFlags::new(flags)),
        }
    }
    (Box::new(tokio::io::stdin()), RestoreFlags::none())
}

/// Puts stdin's original file status flags back when dropped.
pub struct RestoreFlags(Option<OFlags>);

impl RestoreFlags {
    fn new(flags: OFlags) -> RestoreFlags {
        RestoreFlags(Some(flags))
    }

    fn none() -> RestoreFlags {
        RestoreFlags(None)
    }
}

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        if let Some(flags) = self.0 {
            let _ = rustix::fs::fcntl_setfl(std::io::stdin().as_fd(), flags);
        }
    }
}
