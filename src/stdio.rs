//! `serve`'s own stdin and stdout as async streams driven by the runtime's reactor.
//!
//! tokio's `stdin()`/`stdout()` do every read and write on a blocking-pool thread: each request
//! line cost a hand-off to that thread and a wake-up back, and so did each response line. When
//! a stream is a pipe or a socket (what a Pi extension's `child_process.spawn` gives: libuv
//! uses socket pairs), it is instead set non-blocking and registered with the reactor, so the
//! worker that is woken by the line reads it itself. A terminal or a regular file cannot be
//! polled that way (and a terminal's non-blocking flag would leak into the shell that shares
//! it), so those keep tokio's blocking streams. The original file status flags are put back
//! when the [`RestoreFlags`] guard is dropped.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{FileType, OFlags};
use tokio::io::{AsyncRead, AsyncWrite};

/// stdin as a stream.
pub type Input = Box<dyn AsyncRead + Send + Unpin>;
/// stdout as a stream.
pub type Output = Box<dyn AsyncWrite + Send + Unpin>;

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

/// Opens stdin and stdout; call inside the runtime (the reactor registers them). Keep the
/// [`RestoreFlags`] until both streams are done with.
pub fn open() -> (Input, Output, RestoreFlags) {
    let mut restore = RestoreFlags {
        input: None,
        output: None,
    };
    let input: Input = match pollable(std::io::stdin().as_fd()) {
        Some((fd, flags)) => match tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd) {
            Ok(rx) => {
                restore.input = Some(flags);
                Box::new(rx)
            }
            Err(_) => {
                let _ = rustix::fs::fcntl_setfl(std::io::stdin().as_fd(), flags);
                Box::new(tokio::io::stdin())
            }
        },
        None => Box::new(tokio::io::stdin()),
    };
    let output: Output = match pollable(std::io::stdout().as_fd()) {
        Some((fd, flags)) => match tokio::net::unix::pipe::Sender::from_owned_fd_unchecked(fd) {
            Ok(tx) => {
                restore.output = Some(flags);
                Box::new(tx)
            }
            Err(_) => {
                let _ = rustix::fs::fcntl_setfl(std::io::stdout().as_fd(), flags);
                Box::new(tokio::io::stdout())
            }
        },
        None => Box::new(tokio::io::stdout()),
    };
    (input, output, restore)
}

/// Puts stdin's and stdout's original file status flags back when dropped.
pub struct RestoreFlags {
    input: Option<OFlags>,
    output: Option<OFlags>,
}

impl Drop for RestoreFlags {
    fn drop(&mut self) {
        if let Some(flags) = self.input {
            let _ = rustix::fs::fcntl_setfl(std::io::stdin().as_fd(), flags);
        }
        if let Some(flags) = self.output {
            let _ = rustix::fs::fcntl_setfl(std::io::stdout().as_fd(), flags);
        }
    }
}
