//! The response side of `serve`: every line written to stdout, one at a time, in the order it
//! was handed over, and never two interleaved.
//!
//! A result is serialized once, here, straight from its typed shape into the response line
//! ([`Reply::Result`], in the pipe's [`Wire`] form), never through a `serde_json::Value`. A result that may be too large to hold (contract A's
//! `list`: about 5 KB per thread, so 500 MB for 100k) is a [`Reply::Stream`]: it is written as
//! it is made into a [`LineSink`], which hands it to the writer in chunks of [`CHUNK_BYTES`]
//! over a bounded channel, so the memory it holds stays a few chunks whatever its size (a
//! reply that never fills a chunk goes as one line, as a [`Reply::Result`] does). While a
//! streamed line is being written, other lines wait their turn. A streamed reply may write
//! whole lines before its response line (a compact list's part lines, see
//! [`crate::contract::wire`]).
//!
//! The writer is a thread of its own with blocking writes (see [`Output::new`]); on a pipe or
//! socket of its own, a small line is written by the task that made it when nothing is queued
//! (see [`Output::stdout`]).

use std::io::{self, Write};

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};

use serde::Serialize;
use serde_json::Value;

use crate::error::Error;

/// Bytes a streamed line hands over at a time.
pub const CHUNK_BYTES: usize = 256 * 1024;
/// Chunks of one streamed line in flight between its producer and the writer.
const CHUNKS_IN_FLIGHT: usize = 2;

use crate::contract::wire::{Ascii, Wire};
pub use crate::engine::reply::{Reply, Response, ResultFn, StreamFn};

/// A line without an id: `{"method", "params"}`.
#[derive(Serialize)]
pub struct Notification<'a, P> {
    pub method: &'a str,
    pub params: P,
}

/// `progress`'s params: the request it is about and its details.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress<'a, D> {
    pub request_id: &'a Value,
    pub details: D,
}

/// `{"id": …, "error": {"code", "message"}}`.
#[derive(Serialize)]
pub struct ErrorResponse<'a> {
    pub id: &'a Value,
    pub error: ErrorBody<'a>,
}

#[derive(Serialize)]
pub struct ErrorBody<'a> {
    pub code: &'a str,
    pub message: &'a str,
}

impl<'a> ErrorResponse<'a> {
    pub fn new(id: &'a Value, e: &'a Error) -> Self {
        ErrorResponse {
            id,
            error: ErrorBody {
                code: e.code.as_str(),
                message: &e.message,
            },
        }
    }
}

/// stdout as a plain file (a second descriptor of it), so long lines are not scanned for line
/// ends by the standard library's line buffering; falls back to `std::io::stdout()`.
pub fn stdout() -> Box<dyn Write + Send> {
    use std::os::fd::AsFd;
    match std::io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(_) => Box::new(std::io::stdout()),
    }
}

/// stdout when it is a pipe or a socket of its own (not stdin's): set non-blocking, so a request's
/// task can write its small response line itself when nothing is queued (no hand-off to the
/// writer thread, whose wake-up was a third of a poll's time on an idle machine); the writer
/// thread waits for room with `poll` instead of blocking. The guard puts the flags back.
struct DirectStdout {
    fd: std::os::fd::OwnedFd,
    flags: rustix::fs::OFlags,
    /// Lines up to this size are written directly: what stdout's buffer holds (see
    /// [`crate::serve::stdio::widen`]), so a direct write rarely finds too little room.
    direct_below: usize,
}

impl DirectStdout {
    fn open() -> Option<DirectStdout> {
        use std::os::fd::AsFd;
        // One file for both (a socket as stdin and stdout): stdin's reads stay blocking, so
        // stdout must too.
        if crate::serve::stdio::shares_stdin_and_stdout() {
            return None;
        }
        let (fd, flags) = crate::serve::stdio::pollable(std::io::stdout().as_fd())?;
        let direct_below =
            crate::serve::stdio::widen(&fd).clamp(MIN_DIRECT_BELOW, MAX_DIRECT_BELOW);
        Some(DirectStdout {
            fd,
            flags,
            direct_below,
        })
    }

    /// Writes what it can of `parts` (one line's pieces, in order) without waiting, in one
    /// `writev` while there is room: the bytes written.
    fn try_write(&self, parts: &[&[u8]]) -> io::Result<usize> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut done = 0;
        while done < total {
            // The pieces still (partly) unwritten.
            let mut skip = done;
            let mut slices = Vec::with_capacity(parts.len());
            for p in parts {
                if skip >= p.len() {
                    skip -= p.len();
                    continue;
                }
                slices.push(io::IoSlice::new(&p[skip..]));
                skip = 0;
            }
            match rustix::io::writev(&self.fd, &slices) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => break,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }
}

impl Drop for DirectStdout {
    fn drop(&mut self) {
        let _ = rustix::fs::fcntl_setfl(&self.fd, self.flags);
    }
}

/// The writer thread's side of a [`DirectStdout`]: blocking writes, made by waiting for room.
struct PolledWriter(Arc<Direct>);

impl PolledWriter {
    /// Waits until stdout has room.
    fn wait_for_room(&self) -> io::Result<()> {
        let mut fds = [rustix::event::PollFd::new(
            &self.0.stdout.fd,
            rustix::event::PollFlags::OUT,
        )];
        match rustix::event::poll(&mut fds, None) {
            Ok(_) | Err(rustix::io::Errno::INTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Write for PolledWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        loop {
            match rustix::io::write(&self.0.stdout.fd, data) {
                Ok(n) => return Ok(n),
                Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::AGAIN) => self.wait_for_room()?,
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Shared by the handles and the writer thread when stdout can be written directly.
struct Direct {
    stdout: DirectStdout,
    /// Items handed to the writer thread and not yet written. A task writes directly only
    /// while this is 0, holding the lock, so lines keep their order.
    queued: std::sync::Mutex<usize>,
}

/// Lines below this size may be written directly by the task that made them, whatever
/// stdout's buffer (a pipe's default is 64 KiB)…
const MIN_DIRECT_BELOW: usize = 64 * 1024;
/// …and never lines of this size or more (those go to the writer thread, which may wait).
const MAX_DIRECT_BELOW: usize = 1024 * 1024;
/// What the writer thread receives.
enum Out {
    Line(Vec<u8>),
    Stream(std_mpsc::Receiver<Vec<u8>>),
}

impl Out {
    /// The bytes of an item held in memory, in order, as a few slices for one `writev` (a
    /// stream: `None`).
    fn pieces(&self) -> Option<Vec<&[u8]>> {
        match self {
            Out::Line(line) => Some(vec![line]),
            Out::Stream(_) => None,
        }
    }
}

/// The writer is gone (stdout closed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

/// A handle on stdout's writer; cheap to clone.
#[derive(Clone)]
pub struct Output {
    tx: std_mpsc::Sender<Out>,
    gone: Arc<AtomicBool>,
    direct: Option<Arc<Direct>>,
}

impl Output {
    /// A handle and a future that completes once the writer has written everything it was
    /// given and every handle is gone (or `w` failed). The writer is a thread of its own doing
    /// plain blocking writes: a line costs one wake-up and no copy, and a client that reads
    /// slowly holds up only that thread, never the async workers.
    pub fn new<W: Write + Send + 'static>(
        w: W,
    ) -> (Output, impl std::future::Future<Output = ()> + Send) {
        Output::start(w, None)
    }

    /// [`Output::new`] on this process's stdout, written directly by the tasks when it can be
    /// (see [`DirectStdout`]).
    pub fn stdout() -> (Output, impl std::future::Future<Output = ()> + Send) {
        let w: Box<dyn Write + Send>;
        let direct = match DirectStdout::open() {
            Some(stdout) => {
                let direct = Arc::new(Direct {
                    stdout,
                    queued: std::sync::Mutex::new(0),
                });
                w = Box::new(PolledWriter(direct.clone()));
                Some(direct)
            }
            None => {
                w = stdout();
                None
            }
        };
        Output::start(w, direct)
    }

    fn start<W: Write + Send + 'static>(
        w: W,
        direct: Option<Arc<Direct>>,
    ) -> (Output, impl std::future::Future<Output = ()> + Send) {
        let (tx, rx) = std_mpsc::channel();
        let gone = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let flag = gone.clone();
        let written = direct.clone();
        let spawned = std::thread::Builder::new()
            .name("serve-stdout".into())
            .spawn(move || {
                write_lines(rx, w, written.as_deref());
                flag.store(true, Ordering::SeqCst);
                let _ = done_tx.send(());
            });
        if spawned.is_err() {
            gone.store(true, Ordering::SeqCst);
        }
        (Output { tx, gone, direct }, async move {
            let _ = done_rx.await;
        })
    }

    fn put(&self, out: Out) -> std::result::Result<(), Closed> {
        if self.is_closed() {
            return Err(Closed);
        }
        let Some(direct) = &self.direct else {
            return self.tx.send(out).map_err(|_| Closed);
        };
        let mut queued = direct.queued.lock().unwrap_or_else(|p| p.into_inner());
        let out = match out.pieces() {
            Some(pieces) if *queued == 0 => {
                let total: usize = pieces.iter().map(|p| p.len()).sum();
                if total >= direct.stdout.direct_below {
                    out
                } else {
                    match direct.stdout.try_write(&pieces) {
                        Ok(n) if n == total => return Ok(()),
                        // Too little room: the writer thread writes the rest, first.
                        Ok(n) => {
                            let mut rest = pieces.concat();
                            rest.drain(..n);
                            Out::Line(rest)
                        }
                        Err(_) => {
                            self.gone.store(true, Ordering::SeqCst);
                            return Err(Closed);
                        }
                    }
                }
            }
            _ => out,
        };
        *queued += 1;
        self.tx.send(out).map_err(|_| Closed)
    }

    /// Writes `message` as one line.
    /// Writes `line` (one JSON object, made elsewhere) and its LF.
    pub fn send_line(&self, mut line: Vec<u8>) -> std::result::Result<(), Closed> {
        line.push(b'\n');
        self.put(Out::Line(line))
    }

    pub fn send(&self, message: impl Serialize) -> std::result::Result<(), Closed> {
        let mut line = serde_json::to_vec(&message).map_err(|_| Closed)?;
        line.push(b'\n');
        self.put(Out::Line(line))
    }

    /// Writes the response line of request `id` with its result, serialized by `write` in the
    /// `wire` form straight into the line; a failure to serialize is answered as an error.
    pub fn result(&self, id: &Value, write: ResultFn, wire: Wire) {
        // Room for a single thread's result, so the line rarely grows (a poll is about 6 KB).
        let mut line = Vec::with_capacity(8 * 1024);
        line.extend_from_slice(b"{\"id\":");
        let _ = serde_json::to_writer(&mut line, id);
        line.extend_from_slice(b",\"result\":");
        let start = line.len();
        let mut written = write(&mut line);
        if written.is_ok() && wire == Wire::Compact && !line[start..].is_ascii() {
            // The compact form escapes what is not ASCII: the result again, through `Ascii`
            // (most results are ASCII already, and pay only the check).
            let result = line.split_off(start);
            let mut ascii = Ascii::new(&mut line);
            written = ascii
                .write_all(&result)
                .and_then(|()| ascii.finish().map(drop))
                .map_err(Error::from);
        }
        match written {
            Ok(()) => {
                line.extend_from_slice(b"}\n");
                let _ = self.put(Out::Line(line));
            }
            Err(e) => self.respond_error(id, &e),
        }
    }

    /// Writes the error response line of request `id`.
    pub fn respond_error(&self, id: &Value, e: &Error) {
        let mut line = serde_json::to_vec(&ErrorResponse::new(id, e)).unwrap_or_default();
        line.push(b'\n');
        let _ = self.put(Out::Line(line));
    }

    /// Runs a streamed reply for request `id` on this thread (see [`Reply::Stream`]). A failure before the
    /// first byte is answered as an ordinary error; one after it ends the broken line and then
    /// sends the error response for the same id.
    pub fn stream(&self, id: &Value, write: StreamFn) {
        let mut sink = LineSink::new(self.clone());
        let outcome = write(id, &mut sink);
        let started = sink.started();
        if outcome.is_err() && !started {
            // Nothing reached the writer: what was made is dropped, and the error is the answer.
            sink.finished = true;
        }
        let finished = sink.finish();
        drop(sink);
        match outcome.and(finished.map_err(Error::from)) {
            Ok(()) => {}
            Err(e) if !started => self.respond_error(id, &e),
            Err(e) => {
                let e = Error::new(
                    e.code,
                    format!(
                        "{} (the response line above was cut short by this failure). Repair: send the request again.",
                        e.message
                    ),
                );
                self.respond_error(id, &e)
            }
        }
    }

    /// True once the writer is gone.
    pub fn is_closed(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
}

/// A line written in chunks (from a blocking thread: it waits while the writer catches up).
/// The line takes its place in the output at its first chunk and ends, with its LF, at
/// [`LineSink::finish`].
pub struct LineSink {
    out: Output,
    buf: Vec<u8>,
    tx: Option<std_mpsc::SyncSender<Vec<u8>>>,
    failed: bool,
    finished: bool,
}

impl LineSink {
    fn new(out: Output) -> LineSink {
        LineSink {
            out,
            // Most streamed replies are short lists: the buffer grows to a chunk as needed.
            buf: Vec::with_capacity(16 * 1024),
            tx: None,
            failed: false,
            finished: false,
        }
    }

    /// Whether bytes were handed to the writer (a reply still held whole is not started).
    fn started(&self) -> bool {
        self.tx.is_some()
    }

    fn hand_over(&mut self) -> io::Result<()> {
        let closed = || io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed");
        if self.failed {
            return Err(closed());
        }
        if self.tx.is_none() {
            let (tx, rx) = std_mpsc::sync_channel(CHUNKS_IN_FLIGHT);
            if self.out.put(Out::Stream(rx)).is_err() {
                self.failed = true;
                return Err(closed());
            }
            self.tx = Some(tx);
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK_BYTES));
        let sent = self.tx.as_ref().map(|tx| tx.send(chunk));
        if !matches!(sent, Some(Ok(()))) {
            self.failed = true;
            return Err(closed());
        }
        Ok(())
    }

    /// Ends the line (LF) and hands over what is left; a reply that was never handed over
    /// goes as one item, which the task writes itself when nothing is queued (as a small
    /// response line is).
    fn finish(&mut self) -> io::Result<()> {
        if self.finished || (self.tx.is_none() && self.buf.is_empty()) {
            return Ok(());
        }
        self.finished = true;
        self.buf.push(b'\n');
        if self.tx.is_none() {
            let line = std::mem::take(&mut self.buf);
            return self
                .out
                .put(Out::Line(line))
                .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "stdout is closed"));
        }
        self.hand_over()
    }
}

impl Drop for LineSink {
    /// A line given up half way (a panic) still ends, so the next line starts on its own.
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl Write for LineSink {
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.len() < CHUNK_BYTES - self.buf.len() {
            self.buf.extend_from_slice(data);
            return Ok(data.len());
        }
        let room = CHUNK_BYTES - self.buf.len();
        let n = data.len().min(room);
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == CHUNK_BYTES {
            self.hand_over()?;
        }
        Ok(n)
    }

    /// Most writes are small pieces from the serializer: one copy into the chunk.
    fn write_all(&mut self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write(data)?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Hands what is buffered to the writer now (a compact list's part line, so the client
    /// can parse it while the rest is made).
    fn flush(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.hand_over()
    }
}

/// The writer: one line after another, each flushed as soon as it is complete.
fn write_lines<W: Write>(rx: std_mpsc::Receiver<Out>, mut w: W, direct: Option<&Direct>) {
    for out in rx {
        let _written = Written(direct);
        let written = match out {
            Out::Line(line) => w.write_all(&line),
            Out::Stream(chunks) => chunks.iter().try_for_each(|chunk| w.write_all(&chunk)),
        };
        if written.and_then(|()| w.flush()).is_err() {
            return;
        }
    }
}

/// Counts an item as written (or failed) when the writer is done with it.
struct Written<'a>(Option<&'a Direct>);

impl Drop for Written<'_> {
    fn drop(&mut self) {
        if let Some(d) = self.0 {
            let mut queued = d.queued.lock().unwrap_or_else(|p| p.into_inner());
            *queued = queued.saturating_sub(1);
        }
    }
}

/// A writer into shared memory, for tests.
#[cfg(test)]
#[derive(Clone, Default)]
struct Shared(Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl Write for Shared {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(data);
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(all: &[u8]) -> Vec<Value> {
        all.split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_never_interleave_with_a_stream() {
        let shared = Shared::default();
        let (out, done) = Output::new(shared.clone());
        let big = "x".repeat(3 * CHUNK_BYTES + 17);
        let streamer = {
            let out = out.clone();
            let big = big.clone();
            tokio::task::spawn_blocking(move || {
                out.stream(
                    &Value::from(1),
                    Box::new(move |id, w| {
                        serde_json::to_writer(w, &Response { id, result: &big })?;
                        Ok(())
                    }),
                )
            })
        };
        for i in 2..50 {
            out.result(
                &Value::from(i),
                Box::new(|w| crate::engine::reply::json(w, &true)),
                Wire::Contract,
            );
        }
        // A result serialized into its line.
        let large = "y".repeat(64 * 1024);
        out.result(
            &Value::from(50),
            Box::new(move |w| crate::engine::reply::json(w, &large)),
            Wire::Contract,
        );
        streamer.await.unwrap();
        drop(out);
        done.await;
        let got = lines(&shared.0.lock().unwrap());
        assert_eq!(got.len(), 50);
        let streamed = got.iter().find(|v| v["id"] == 1).unwrap();
        assert_eq!(streamed["result"].as_str().unwrap().len(), big.len());
        let serialized = got.iter().find(|v| v["id"] == 50).unwrap();
        assert_eq!(serialized["result"].as_str().unwrap().len(), 64 * 1024);
    }

    /// In the compact form a result's non-ASCII characters go as `\\u` escapes (the same
    /// value); in the contract's form as they are.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_compact_result_is_ascii_and_the_same_value() {
        let shared = Shared::default();
        let (out, done) = Output::new(shared.clone());
        let value = serde_json::json!({"text": "é 漢字 😀", "plain": "ascii"});
        for (id, wire) in [(1, Wire::Compact), (2, Wire::Contract)] {
            let v = value.clone();
            out.result(
                &Value::from(id),
                Box::new(move |w| crate::engine::reply::json(w, &v)),
                wire,
            );
        }
        drop(out);
        done.await;
        let all = shared.0.lock().unwrap().clone();
        let text = String::from_utf8(all).unwrap();
        let (compact, contract) = text.split_once('\n').unwrap();
        assert!(compact.is_ascii(), "{compact}");
        assert!(compact.contains("\\ud83d\\ude00"), "{compact}");
        assert!(contract.contains("😀"), "{contract}");
        for (line, id) in [(compact, 1), (contract, 2)] {
            let v: Value = serde_json::from_str(line).unwrap();
            assert_eq!(v, serde_json::json!({"id": id, "result": value}));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_that_fails_early_is_an_ordinary_error() {
        let shared = Shared::default();
        let (out, done) = Output::new(shared.clone());
        let o = out.clone();
        tokio::task::spawn_blocking(move || {
            o.stream(
                &Value::from(5),
                Box::new(|_, _| Err(Error::internal("no rows for you"))),
            )
        })
        .await
        .unwrap();
        drop(out);
        done.await;
        let got = lines(&shared.0.lock().unwrap());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0]["id"], 5);
        assert_eq!(got[0]["error"]["message"], "no rows for you");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_that_fails_late_ends_its_line_and_then_answers() {
        let shared = Shared::default();
        let (out, done) = Output::new(shared.clone());
        let o = out.clone();
        tokio::task::spawn_blocking(move || {
            o.stream(
                &Value::from(6),
                Box::new(|_, w| {
                    w.write_all(&vec![b'['; CHUNK_BYTES + 1])?;
                    Err(Error::internal("disk went away"))
                }),
            )
        })
        .await
        .unwrap();
        out.result(
            &Value::from(7),
            Box::new(|w| crate::engine::reply::json(w, &1)),
            Wire::Contract,
        );
        drop(out);
        done.await;
        let all = shared.0.lock().unwrap().clone();
        let mut parts = all.split(|b| *b == b'\n').filter(|l| !l.is_empty());
        assert_eq!(
            parts.next().unwrap().len(),
            CHUNK_BYTES + 1,
            "the cut line ends"
        );
        let error: Value = serde_json::from_slice(parts.next().unwrap()).unwrap();
        assert_eq!(error["id"], 6);
        assert!(error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cut short"));
        let next: Value = serde_json::from_slice(parts.next().unwrap()).unwrap();
        assert_eq!(next["id"], 7);
    }
}
