//! `serve`'s own stdin as an async stream driven by the runtime's reactor.
//!
//! tokio's `stdin()` does every read on a blocking-pool thread: each request line cost a
//! hand-off to that thread and a wake-up back. When stdin is a pipe or a socket (what a Pi
//! extension's `child_process.spawn` gives: libuv uses socket pairs), it is instead set
//! non-blocking and registered with the reactor, so the worker that is woken by the line reads
//! it itself. A terminal or a regular file cannot be polled that way (and a terminal's
//! non-blocking flag would leak into the shell that shares it), so those keep tokio's blocking
//! stream. The original file status flags are put back when the [`RestoreFlags`] guard is
//! dropped (a serve killed with SIGKILL cannot; the pipes a Pi extension creates belong to that
//! serve alone).
//!
//! stdout is not made non-blocking: `output` writes it from a thread of its own with blocking
//! writes, which would fail with `WouldBlock` whenever a non-blocking pipe is full.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, OFlags};
use tokio::io::AsyncRead;

/// stdin as a stream.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;

/// A pollable copy (close-on-exec, so children never inherit it) of `fd`, set non-blocking,
/// and `fd`'s flags before; `None` when `fd` is not a pipe or socket.
fn pollable(fd: BorrowedFd<'_>) -> Option<(OwnedFd, OFlags)> {
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

/// stdin; call inside the runtime (the reactor registers it). Keep the guard until the stream
/// is done with.
pub fn stdin() -> (Input, RestoreFlags) {
    let fd = std::io::stdin();
    if let Some((copy, flags)) = pollable(fd.as_fd()) {
        match tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(copy) {
            Ok(rx) => return (Box::new(rx), RestoreFlags::new(Stream::Stdin, flags)),
            Err(_) => drop(RestoreFlags::new(Stream::Stdin, flags)),
        }
    }
    (Box::new(tokio::io::stdin()), RestoreFlags::none())
}

#[derive(Clone, Copy)]
enum Stream {
    Stdin,
}

/// Puts a stream's original file status flags back when dropped.
pub struct RestoreFlags(Option<(Stream, OFlags)>);

impl RestoreFlags {
    fn new(stream: Stream, flags: OFlags) -> RestoreFlags {
        RestoreFlags(Some((stream, flags)))
    }

    fn none() -> RestoreFlags {
        RestoreFlags(None)
    }
}

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        match self.0 {
            Some((Stream::Stdin, flags)) => {
                let _ = rustix::fs::fcntl_setfl(std::io::stdin().as_fd(), flags);
            }
            None => {}
        }
    }
}
