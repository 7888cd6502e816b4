//! Contract A's `list` answer. Each listed thread is its summary snapshot (JSON) and its line
//! of the content text; a closed thread's are copied from the snapshot cache (engine/cache.rs),
//! the others rendered from the thread's output and events.
//!
//! One pass over the list query, in one read transaction: a list of at most [`IN_MEMORY`]
//! threads is answered from memory (the rows carry their kept answers; the others' output and
//! events are two more queries). Past that, the pass goes on in `block_in_place` and writes
//! the content text and the snapshots, a [`BATCH`] at a time, into two spill files (`memfd`,
//! else temporary files beside the database); the answer is the result's template around those
//! files ([`Reply::Parts`]), and serve's writer moves them into the line with `sendfile`, the
//! list twice (`details.threads` and its alias `details.snapshots`). The content text shows at
//! most [`format::MAX_LIST_LINES`] threads. Nothing reaches the line before every row was read,
//! so a failure on the way is an ordinary error, and memory stays a batch whatever the list's
//! length.
//!
//! With `--wire compact` (see [`crate::contract::wire`]) the list crosses the pipe once, in
//! part lines of at most about [`PART_BYTES`] before the response line, whose `threads` and
//! `snapshots` are the placeholder `0`. Serve writes a compact list as it reads it ([`piped`],
//! [`Reply::Piped`]): each part line goes out as soon as it is cut, so the client parses while
//! the rest is read, and memory stays one part line and a batch of rows whatever the length.
//! The other paths below still make the same part lines (the tests compare all four), but
//! serve no longer takes them for the compact wire.
//!
//! Without room for spill files, the rows are read again in four passes (counts, text, the list
//! twice; with the compact wire the part lines, counts and text) and written straight into the
//! line from a blocking thread ([`Reply::Stream`]).

use crate::domain::ManagerId;
use std::cell::RefCell;
use std::fmt;
use std::io::{Seek, Write};
use std::sync::Arc;

use crate::store::Conn;
use serde::ser::Serializer;
use serde::Serialize;
use serde_json::Value;

use super::cache::{render, Key, Rendered, MAX_PENDING};
use super::{thread_facts, Engine};
use crate::contract::format;
use crate::contract::projection::Detail;
use crate::contract::thread::{self, Listed};
use crate::contract::{ToolResult, Wire};
use crate::error::{Error, Result};
use crate::serve::output::{Part, Reply};
use crate::store::list::{self, ListQuery};
use crate::store::snapshots::View;
use crate::store::Store;

/// Lists up to this long are answered from memory.
pub const IN_MEMORY: usize = 256;
/// Threads a streamed list holds at a time.
pub const BATCH: usize = 256;
/// Bytes of content text handed to the escaping writer at a time.
const PIECE_BYTES: usize = 64 * 1024;
/// A compact list's part line holds snapshots up to this many bytes before the ASCII escapes
/// (at least one), so the line stays under 128 KiB: an escape at most triples a character's
/// bytes (`é`, 2 bytes, is `\u00e9`). For the rows `extension/list_ancestor_110` and
/// `extension/list_all` of `benches/serve.rs`: Node makes a string of 128 KiB or more in its
/// large-object space (fresh pages for every line) and concatenates a line's chunks into a
/// fresh buffer; as one line, a list of 110 threads (212 kB) cost the extension 14–16% more in
/// its line reader and `JSON.parse` (the recorded lines fed in 64 KiB chunks, one line against
/// six, interleaved in one process, medians of 2500: 1350 against 1166 µs, 1496 against 1268,
/// 1586 against 1348, 1501 against 1265), while serve's work stays the same (callgrind, 200
/// lists: 329.6M instructions against 328.5M). It also keeps every line far below
/// V8's largest string (about 512 MB, a list of some 250k threads).
pub const PART_BYTES: usize = 40 * 1024;

/// The answer to a `list` of `q` in `e`'s manager.
pub(super) fn reply(e: &Engine, q: ListQuery) -> Result<Reply> {
    let wire = e.cfg.wire;
    if wire == Wire::Compact {
        // Written as it is read ([`piped`]), from the request's thread (see `serve::server`).
        let store = e.store.clone();
        let cache = e.cache.clone();
        let manager_id = e.manager_id;
        return Ok(Reply::Piped(Box::new(move |id, w| {
            let mut missed = Vec::new();
            let out = piped(&store, manager_id, &q, id, w, &mut missed);
            cache.missed(missed);
            out
        })));
    }
    let conn = e.store.read()?;
    // One read transaction: the rows and their kept answers agree.
    let tx = crate::store::ReadTx::begin(&conn)?;
    let mut missed = Vec::new();
    let spill_dir = e.store.path().parent();
    let answer = answer(
        &tx,
        e.manager_id,
        &q,
        wire,
        IN_MEMORY,
        || Spill::new(spill_dir, wire),
        &mut missed,
    );
    drop(tx);
    drop(conn);
    e.cache.missed(std::mem::take(&mut missed));
    match answer? {
        Answer::Memory { lines, json } if lines.is_empty() => Ok(Reply::Json(json)),
        Answer::Memory { lines, json } => Ok(Reply::Parts {
            lines,
            result: vec![Part::Bytes(json)],
        }),
        Answer::Spilled { lines, result } => Ok(Reply::Parts { lines, result }),
        Answer::NoRoom => {
            // No spill file could be made: the rows are read again, in passes, straight into
            // the line (from a blocking thread).
            let store = e.store.clone();
            let cache = e.cache.clone();
            let manager_id = e.manager_id;
            Ok(Reply::Stream(Box::new(move |id, w| {
                let mut missed = Vec::new();
                let out = stream(&store, manager_id, &q, wire, id, w, &mut missed);
                cache.missed(missed);
                out
            })))
        }
    }
}

/// A list's answer, as [`answer`] made it.
enum Answer {
    /// The result JSON, and a compact list's part lines.
    Memory { lines: Vec<Part>, json: Vec<u8> },
    /// The result JSON in pieces, the text and the snapshots in spill files, and a compact
    /// list's part lines (in the snapshots' spill file).
    Spilled { lines: Vec<Part>, result: Vec<Part> },
    /// Longer than fits in memory, and the spill files could not be made or written.
    NoRoom,
}

/// One pass over `q`'s rows: up to `in_memory` threads are answered from memory; past that the
/// rows so far and every later one go, a batch at a time, into two spill files (the content
/// text, escaped, and the snapshots as a JSON array), and the answer is the template around
/// them (the list file twice: `details.threads` and its alias `details.snapshots`; with
/// [`Wire::Compact`] the list file holds the part lines' bodies instead). Past `in_memory` rows
/// the pass goes on in `block_in_place` (see [`list::each_row_switching`]). `new_spill` makes the spill files ([`Spill::new`]).
fn answer(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    wire: Wire,
    in_memory: usize,
    new_spill: impl FnOnce() -> Option<Spill>,
    missed: &mut Vec<Key>,
) -> Result<Answer> {
    let mut new_spill = Some(new_spill);
    let mut entries: Vec<Entry> = Vec::new();
    let mut spill: Option<Spill> = None;
    let mut no_room = false;
    let (mut count, mut live) = (0usize, 0usize);
    list::each_row_switching(conn, manager_id, q, in_memory, |r| {
        count += 1;
        entries.push(Entry::from_row(r)?);
        let full = match &spill {
            Some(_) => entries.len() >= BATCH,
            None => entries.len() > in_memory,
        };
        if full {
            if spill.is_none() {
                match new_spill.take().and_then(|new| new()) {
                    Some(s) => spill = Some(s),
                    None => {
                        no_room = true;
                        return Ok(false);
                    }
                }
            }
            let s = spill.as_mut().expect("a spill");
            match s.write_batch(conn, std::mem::take(&mut entries), missed)? {
                Some(l) => live += l,
                None => {
                    no_room = true;
                    return Ok(false);
                }
            }
        }
        Ok(true)
    })?;
    if no_room {
        return Ok(Answer::NoRoom);
    }
    let Some(mut spill) = spill else {
        let (listed, live) = rendered(conn, entries, missed)?;
        let (lines, json) = from_memory(&listed, live, wire)?;
        return Ok(Answer::Memory { lines, json });
    };
    if !entries.is_empty() {
        match spill.write_batch(conn, entries, missed)? {
            Some(l) => live += l,
            None => return Ok(Answer::NoRoom),
        }
    }
    let Ok(Spilled {
        text: (text, text_len),
        list: (list, list_len),
        bounds,
    }) = spill.finish(count)
    else {
        return Ok(Answer::NoRoom);
    };
    let t = Template::new(count, live, wire)?;
    let bytes = |pieces: &[&[u8]]| Part::Bytes(pieces.concat());
    let file = |file: &Arc<std::fs::File>, at: u64, len: u64| Part::File {
        file: file.clone(),
        at,
        len,
    };
    let mut result = vec![bytes(&[t.part(0), b"\""]), file(&text, 0, text_len)];
    if t.aliased() {
        result.push(bytes(&[b"\"", t.part(1)]));
        result.push(file(&list, 0, list_len));
        result.push(bytes(&[t.part(2)]));
        result.push(file(&list, 0, list_len));
        result.push(bytes(&[t.last()]));
    } else {
        result.push(bytes(&[b"\"", t.last()]));
    }
    let lines = bounds
        .into_iter()
        .flat_map(|(at, len)| part_line(file(&list, at, len)))
        .collect();
    Ok(Answer::Spilled { lines, result })
}

/// A part line starts with this, then the request's id, then a body from [`PartCutter`].
const PART_HEAD: &[u8] = b"{\"id\":";

/// The pieces of a part line whose body is `body`.
fn part_line(body: Part) -> [Part; 3] {
    [Part::Bytes(PART_HEAD.to_vec()), Part::Id, body]
}

/// Cuts a compact list ([`Wire::Compact`]) into the bodies of its part lines, batch after
/// batch: `,"part":[snapshot,…]}` and a line feed, in ASCII, each holding snapshots up to
/// [`PART_BYTES`] before the ASCII escapes (one at least). Where a body ends depends only on the
/// snapshots, so the three answer paths, whose batches differ, cut the same lines.
#[derive(Default)]
struct PartCutter {
    body: Vec<u8>,
}

impl PartCutter {
    const OPEN: &'static [u8] = b",\"part\":[";
    const CLOSE: &'static [u8] = b"]}\n";

    /// Adds `listed`; the bodies it completed go to `done`.
    fn push(&mut self, listed: &[Rendered], done: &mut Vec<Vec<u8>>) -> Result<()> {
        for r in listed {
            if !self.body.is_empty() && self.body.len() + r.json.len() > PART_BYTES {
                self.close(done);
            }
            if self.body.is_empty() {
                self.body.reserve(PART_BYTES + 4096);
                self.body.extend_from_slice(Self::OPEN);
            } else {
                self.body.push(b',');
            }
            write_snapshot(&r.json, Wire::Compact, &mut self.body)?;
        }
        Ok(())
    }

    /// Ends the body under way, if any, into `done`.
    fn close(&mut self, done: &mut Vec<Vec<u8>>) {
        if !self.body.is_empty() {
            self.body.extend_from_slice(Self::CLOSE);
            done.push(Wire::Compact.result(std::mem::take(&mut self.body)));
        }
    }

    /// Every body of `listed`.
    fn all(listed: &[Rendered]) -> Result<Vec<Vec<u8>>> {
        let mut cutter = PartCutter::default();
        let mut done = Vec::new();
        cutter.push(listed, &mut done)?;
        cutter.close(&mut done);
        Ok(done)
    }
}

/// A compact list ([`Wire::Compact`]) written as its rows are read, for the row
/// `extension/list_ancestor_110` of `benches/serve.rs`: each part line goes out (flushed) as
/// soon as [`PartCutter`] cuts it, so the client parses the first while the rest is read, and
/// then the response line, whose result holds only the counts and the text. One pass of one
/// read transaction; memory holds one part line and at most a [`BATCH`] of rows. The bytes are
/// those of [`from_memory`] and of the spill and pass paths (the same cutter, text and
/// template).
fn piped(
    store: &Store,
    manager_id: ManagerId,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
    missed: &mut Vec<Key>,
) -> Result<()> {
    let conn = store.read()?;
    let tx = crate::store::ReadTx::begin(&conn)?;
    let mut p = Piped {
        conn: &tx,
        w,
        id: serde_json::to_vec(id)?,
        missed,
        cutter: PartCutter::default(),
        done: Vec::new(),
        pending: Vec::new(),
        pending_bytes: 0,
        count: 0,
        live: 0,
        shown: 0,
        text: String::new(),
    };
    // A short list stays on the request's worker and goes out as one write at the end; past
    // PIPE_ON_WORKER rows the rest runs in block_in_place, where a part line may wait for the
    // writer.
    list::each_row_switching(&tx, manager_id, q, PIPE_ON_WORKER, |r| {
        p.push(Entry::from_row(r)?)?;
        Ok(true)
    })?;
    p.finish()
}

/// Rows a piped list reads on the request's worker before it moves on in `block_in_place`:
/// fewer than one part line holds, so no part line is flushed (no wait on the writer) before.
const PIPE_ON_WORKER: usize = 16;

/// A compact list under way ([`piped`]).
struct Piped<'a> {
    conn: &'a Conn,
    w: &'a mut dyn Write,
    /// The request's id, as JSON.
    id: Vec<u8>,
    missed: &'a mut Vec<Key>,
    cutter: PartCutter,
    /// Part bodies cut and not written yet.
    done: Vec<Vec<u8>>,
    /// Rows read and not rendered yet, and the bytes of their kept answers.
    pending: Vec<Entry>,
    pending_bytes: usize,
    count: usize,
    live: usize,
    /// The content text so far, and how many lines it shows.
    shown: usize,
    text: String,
}

impl Piped<'_> {
    /// Takes a row; renders what is pending once it makes a part line (or a [`BATCH`]).
    fn push(&mut self, e: Entry) -> Result<()> {
        self.count += 1;
        if let Entry::Kept { answer, .. } = &e {
            self.pending_bytes += answer.json.len();
        }
        self.pending.push(e);
        if self.pending.len() >= BATCH || self.pending_bytes >= PART_BYTES {
            self.hand_over()?;
        }
        Ok(())
    }

    /// Renders the pending rows, adds them to the text and the cutter, and writes (and
    /// flushes) every part line that is complete.
    fn hand_over(&mut self) -> Result<()> {
        self.pending_bytes = 0;
        if self.pending.is_empty() {
            return Ok(());
        }
        let (listed, live) = rendered(self.conn, std::mem::take(&mut self.pending), self.missed)?;
        self.live += live;
        push_lines(&mut self.text, &listed, &mut self.shown);
        self.cutter.push(&listed, &mut self.done)?;
        self.write_done(true)
    }

    /// Writes the part lines cut so far, each flushed to the client at once while rows remain
    /// (`flush`); the last goes with the response line, so a list of one part line is one write.
    fn write_done(&mut self, flush: bool) -> Result<()> {
        for body in self.done.drain(..) {
            self.w.write_all(PART_HEAD)?;
            self.w.write_all(&self.id)?;
            self.w.write_all(&body)?;
            if flush {
                self.w.flush()?;
            }
        }
        Ok(())
    }

    /// The last part line, then the response line (without its line feed: the sink ends it).
    fn finish(mut self) -> Result<()> {
        self.hand_over()?;
        self.cutter.close(&mut self.done);
        self.write_done(false)?;
        let mut text = std::mem::take(&mut self.text);
        if self.count == 0 {
            text.push_str(format::NO_THREADS);
        }
        push_more(&mut text, self.shown, self.count);
        let t = Template::new(self.count, self.live, Wire::Compact)?;
        let mut json = Vec::with_capacity(2 * text.len() + t.json.len() + 64);
        json.extend_from_slice(t.part(0));
        serde_json::to_writer(&mut json, text.as_str())?;
        json.extend_from_slice(t.last());
        self.w.write_all(b"{\"id\":")?;
        self.w.write_all(&self.id)?;
        self.w.write_all(b",\"result\":")?;
        self.w.write_all(&Wire::Compact.result(json))?;
        self.w.write_all(b"}")?;
        Ok(())
    }
}

/// A finished spill file and its length.
type Filed = (Arc<std::fs::File>, u64);

/// A long list's finished spill files, and where its part lines' bodies are in the list file
/// ([`Wire::Compact`]).
struct Spilled {
    text: Filed,
    list: Filed,
    bounds: Vec<(u64, u64)>,
}

/// The two spill files of a long list: its content text (escaped for a JSON string, without
/// the quotes) and its snapshots (a JSON array).
struct Spill {
    text: SpillFile,
    list: SpillFile,
    first: bool,
    wire: Wire,
    /// Where each part line's body is in `list`, and the body under way ([`Wire::Compact`]).
    bounds: Vec<(u64, u64)>,
    parts: PartCutter,
    /// Lines of the content text written so far (at most [`format::MAX_LIST_LINES`]).
    shown: usize,
    lines: String,
    escaped: Vec<u8>,
}

/// Spilled bytes held in memory (`memfd`) up to this size; past it they move to a temporary
/// file beside the database, so a list of millions of threads does not pin gigabytes of RAM.
const SPILL_IN_MEMORY: u64 = 256 << 20;

/// One spill file: in memory (`memfd`) where the system has it, so nothing reaches a disk,
/// until it grows past [`SPILL_IN_MEMORY`]; a temporary file beside the database otherwise.
struct SpillFile {
    w: std::io::BufWriter<std::fs::File>,
    written: u64,
    in_memory: bool,
    /// [`SPILL_IN_MEMORY`] (smaller in tests).
    limit: u64,
    dir: Option<std::path::PathBuf>,
}

impl SpillFile {
    fn new(dir: Option<&std::path::Path>) -> Option<SpillFile> {
        match rustix::fs::memfd_create("threadbase-list", rustix::fs::MemfdFlags::CLOEXEC) {
            Ok(fd) => Some(SpillFile::over(std::fs::File::from(fd), true, dir)),
            Err(_) => Some(SpillFile::over(
                tempfile::tempfile_in(dir?).ok()?,
                false,
                dir,
            )),
        }
    }

    fn over(file: std::fs::File, in_memory: bool, dir: Option<&std::path::Path>) -> SpillFile {
        SpillFile {
            w: std::io::BufWriter::with_capacity(256 * 1024, file),
            written: 0,
            in_memory,
            limit: SPILL_IN_MEMORY,
            dir: dir.map(std::path::Path::to_path_buf),
        }
    }

    fn write_all(&mut self, data: &[u8]) -> std::io::Result<()> {
        if self.in_memory && self.written + data.len() as u64 > self.limit {
            self.move_to_disk()?;
        }
        self.w.write_all(data)?;
        self.written += data.len() as u64;
        Ok(())
    }

    /// Moves what is in memory into a temporary file beside the database and goes on there
    /// (stays in memory when no such file can be made).
    fn move_to_disk(&mut self) -> std::io::Result<()> {
        self.in_memory = false;
        let Some(mut disk) = self
            .dir
            .as_deref()
            .and_then(|d| tempfile::tempfile_in(d).ok())
        else {
            return Ok(());
        };
        self.w.flush()?;
        let memory = self.w.get_mut();
        memory.seek(std::io::SeekFrom::Start(0))?;
        std::io::copy(memory, &mut disk)?;
        let _ = std::mem::replace(
            &mut self.w,
            std::io::BufWriter::with_capacity(256 * 1024, disk),
        );
        Ok(())
    }

    /// The file and its length.
    fn finish(self) -> std::io::Result<(Arc<std::fs::File>, u64)> {
        let f = self.w.into_inner().map_err(|e| e.into_error())?;
        Ok((Arc::new(f), self.written))
    }
}

impl Spill {
    fn new(dir: Option<&std::path::Path>, wire: Wire) -> Option<Spill> {
        Spill::over(SpillFile::new(dir)?, SpillFile::new(dir)?, wire)
    }

    fn over(text: SpillFile, mut list: SpillFile, wire: Wire) -> Option<Spill> {
        if wire == Wire::Contract {
            list.write_all(b"[").ok()?;
        }
        Some(Spill {
            text,
            list,
            first: true,
            wire,
            bounds: Vec::new(),
            parts: PartCutter::default(),
            shown: 0,
            lines: String::with_capacity(BATCH * 160),
            escaped: Vec::with_capacity(BATCH * 170),
        })
    }

    /// Renders what `entries` lack and appends their lines and snapshots; returns how many
    /// are live, or `None` when a spill file could not take them (a full disk: the caller
    /// answers without spill files).
    fn write_batch(
        &mut self,
        conn: &Conn,
        entries: Vec<Entry>,
        missed: &mut Vec<Key>,
    ) -> Result<Option<usize>> {
        let (listed, live) = rendered(conn, entries, missed)?;
        self.lines.clear();
        push_lines(&mut self.lines, &listed, &mut self.shown);
        if !self.write_text()? {
            return Ok(None);
        }
        if self.wire == Wire::Compact {
            let mut done = Vec::new();
            self.parts.push(&listed, &mut done)?;
            if !self.write_parts(done) {
                return Ok(None);
            }
            return Ok(Some(live));
        }
        self.escaped.clear();
        write_snapshots(&listed, self.first, self.wire, &mut self.escaped)?;
        let written = self.list.write_all(&self.escaped).is_ok();
        if !written {
            return Ok(None);
        }
        self.first = false;
        Ok(Some(live))
    }

    /// Part lines' bodies onto the list file, where `bounds` finds them; `false` when the file
    /// could not take them.
    fn write_parts(&mut self, bodies: Vec<Vec<u8>>) -> bool {
        for body in bodies {
            self.bounds.push((self.list.written, body.len() as u64));
            if self.list.write_all(&body).is_err() {
                return false;
            }
        }
        true
    }

    /// `self.lines` escaped for a JSON string onto the text file; `false` when the file could
    /// not take them.
    fn write_text(&mut self) -> Result<bool> {
        if self.lines.is_empty() {
            return Ok(true);
        }
        self.escaped.clear();
        serde_json::to_writer(&mut self.escaped, self.lines.as_str())?;
        let escaped = self.wire.result(std::mem::take(&mut self.escaped));
        let written = self.text.write_all(&escaped[1..escaped.len() - 1]).is_ok();
        self.escaped = escaped;
        Ok(written)
    }

    /// The files and their lengths, (text, list), and where the part lines' bodies are in the
    /// list file, once the list's `count` threads are in.
    fn finish(mut self, count: usize) -> std::io::Result<Spilled> {
        self.lines.clear();
        push_more(&mut self.lines, self.shown, count);
        if !self.write_text().map_err(std::io::Error::other)? {
            return Err(std::io::Error::other("the text spill file is full"));
        }
        match self.wire {
            Wire::Contract => self.list.write_all(b"]")?,
            Wire::Compact => {
                let mut done = Vec::new();
                self.parts.close(&mut done);
                if !self.write_parts(done) {
                    return Err(std::io::Error::other("the list spill file is full"));
                }
            }
        }
        let (text, text_len) = self.text.finish()?;
        let (list, list_len) = self.list.finish()?;
        Ok(Spilled {
            text: (text, text_len),
            list: (list, list_len),
            bounds: self.bounds,
        })
    }
}

/// A listed thread as its list row found it: its kept answer (no more to read), or its id
/// (its row is read and its answer rendered from its facts, a batch at a time).
enum Entry {
    Kept { live: bool, answer: Rendered },
    Fresh(String),
}

impl Entry {
    /// A list row ([`list::Listed`]).
    fn from_row(r: &list::Listed<'_, '_>) -> Result<Entry> {
        Ok(match r.kept()? {
            Some((json, line)) => Entry::Kept {
                live: r.live()?,
                answer: Rendered { json, line },
            },
            None => Entry::Fresh(r.id()?),
        })
    }
}

/// The entries of `q`'s list, or `None` when there are more than `max` (read no further).
#[cfg(test)]
fn entries_at_most(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    max: usize,
) -> Result<Option<Vec<Entry>>> {
    let mut entries = Vec::new();
    let mut over = false;
    list::each_row(conn, manager_id, q, |r| {
        if entries.len() == max {
            over = true;
            return Ok(false);
        }
        entries.push(Entry::from_row(r)?);
        Ok(true)
    })?;
    Ok((!over).then_some(entries))
}

/// Each entry's summary snapshot and list line, in order, and how many are live: kept ones as
/// the list row carried them, the others rendered from their rows and facts (three queries for
/// all of them) and, when still (closed, or live and idle), noted in `missed` so the cache
/// keeps them.
fn rendered(
    conn: &Conn,
    entries: Vec<Entry>,
    missed: &mut Vec<Key>,
) -> Result<(Vec<Rendered>, usize)> {
    let mut live = 0;
    let mut fresh_at = Vec::new();
    let mut fresh = Vec::new();
    let mut listed: Vec<Rendered> = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        match e {
            Entry::Kept { live: l, answer } => {
                live += usize::from(l);
                listed.push(answer);
            }
            Entry::Fresh(id) => {
                fresh_at.push(i);
                fresh.push(id);
                listed.push(Rendered::default());
            }
        }
    }
    if !fresh.is_empty() {
        let ids: Vec<&str> = fresh.iter().map(String::as_str).collect();
        let fresh = list::rows_by_ids(conn, &ids)?;
        live += fresh.iter().filter(|r| r.is_live()).count();
        for (i, f) in fresh_at
            .into_iter()
            .zip(thread_facts(conn, fresh, Detail::Summary)?)
        {
            listed[i] = render(&f, View::Snapshot, Detail::Summary)?;
            if f.row.is_still() && missed.len() < MAX_PENDING {
                missed.push((f.row.id.to_string(), View::Snapshot, Detail::Summary));
            }
        }
    }
    Ok((listed, live))
}

/// The content text's lines of `listed` (each after a line break unless it is the text's
/// first), while fewer than [`format::MAX_LIST_LINES`] are `shown`.
fn push_lines(text: &mut String, listed: &[Rendered], shown: &mut usize) {
    for r in listed {
        if *shown == format::MAX_LIST_LINES {
            return;
        }
        if *shown > 0 {
            text.push('\n');
        }
        text.push_str(&r.line);
        *shown += 1;
    }
}

/// The content text's last line when it shows `shown` of `count` threads.
fn push_more(text: &mut String, shown: usize, count: usize) {
    if shown < count {
        format::list_more(text, shown, count).expect("a String takes every write");
    }
}

/// The result JSON of a list whose answers (`live` of them live) are all in memory, written
/// into the [`Template`] as a streamed list is, so the two are the same bytes; and with
/// [`Wire::Compact`] the part lines that carry the list.
fn from_memory(listed: &[Rendered], live: usize, wire: Wire) -> Result<(Vec<Part>, Vec<u8>)> {
    let mut text = String::new();
    if listed.is_empty() {
        text.push_str(format::NO_THREADS);
    }
    let mut shown = 0;
    push_lines(&mut text, listed, &mut shown);
    push_more(&mut text, shown, listed.len());
    let list_len = listed.iter().map(|r| r.json.len() + 1).sum::<usize>() + 2;
    let t = Template::new(listed.len(), live, wire)?;
    let mut json = Vec::with_capacity(2 * list_len + 2 * text.len() + t.json.len() + 64);
    json.extend_from_slice(t.part(0));
    serde_json::to_writer(&mut json, text.as_str())?;
    if !t.aliased() {
        json.extend_from_slice(t.last());
        let lines = PartCutter::all(listed)?
            .into_iter()
            .flat_map(|body| part_line(Part::Bytes(body)))
            .collect();
        return Ok((lines, wire.result(json)));
    }
    json.extend_from_slice(t.part(1));
    // The list once, then copied from the line itself into its second hole.
    let start = json.len();
    json.push(b'[');
    for (i, r) in listed.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        write_snapshot(&r.json, wire, &mut json)?;
    }
    json.push(b']');
    let end = json.len();
    json.extend_from_slice(t.part(2));
    json.extend_from_within(start..end);
    json.extend_from_slice(t.last());
    Ok((Vec::new(), wire.result(json)))
}

/// The holes of a streamed list's template: the text, then the list (twice). Serialized, a
/// marker is a JSON string starting with U+0000, which nothing else in the template holds.
const TEXT_HOLE: &str = "\u{0}text";
const LIST_HOLE: &str = "\u{0}list";

/// A streamed list's template: the in-memory answer's `ToolResult` / `Listed` structs
/// serialized with markers where the text and the lists go, cut at the markers.
struct Template {
    json: String,
    /// Where the text hole and the list holes (two, or none with [`Wire::Compact`]) start and
    /// end.
    holes: Vec<(usize, usize)>,
}

impl Template {
    fn new(count: usize, live: usize, wire: Wire) -> Result<Template> {
        let json = serde_json::to_string(&ToolResult::new(
            TEXT_HOLE,
            Listed::new(LIST_HOLE, count, live, wire),
        ))?;
        let find = |marker: &str, from: usize| -> Result<(usize, usize)> {
            let m = serde_json::to_string(marker)?;
            let at = json[from..]
                .find(&m)
                .map(|i| from + i)
                .ok_or_else(|| Error::internal("the list template lost a hole"))?;
            Ok((at, at + m.len()))
        };
        let text = find(TEXT_HOLE, 0)?;
        let mut holes = vec![text];
        if wire == Wire::Contract {
            let threads = find(LIST_HOLE, text.1)?;
            holes.push(threads);
            holes.push(find(LIST_HOLE, threads.1)?);
        }
        Ok(Template { holes, json })
    }

    /// Whether the list goes in (twice: `details.threads` and `details.snapshots`); with
    /// [`Wire::Compact`] it goes in the part lines instead.
    fn aliased(&self) -> bool {
        self.holes.len() == 3
    }

    /// The template's text before hole `i` (after hole `i - 1`).
    fn part(&self, i: usize) -> &[u8] {
        let from = if i == 0 { 0 } else { self.holes[i - 1].1 };
        let to = self.holes.get(i).map_or(self.json.len(), |h| h.0);
        &self.json.as_bytes()[from..to]
    }

    /// The template's text after its last hole.
    fn last(&self) -> &[u8] {
        self.part(self.holes.len())
    }
}

/// Writes the whole response line of a long list, its shape the [`Template`]'s, when no spill
/// file could be made: the rows are read in four passes of one read transaction (counts, text,
/// and the list twice; with [`Wire::Compact`] the part lines first, then counts and text) and
/// written straight into the line. A failure after the first byte leaves the line unfinished (see [`crate::serve::output::Output::stream`]).
fn stream(
    store: &Store,
    manager_id: ManagerId,
    q: &ListQuery,
    wire: Wire,
    id: &Value,
    w: &mut dyn Write,
    missed: &mut Vec<Key>,
) -> Result<()> {
    let conn = store.read()?;
    // One read transaction: every pass sees the same rows.
    let tx = crate::store::ReadTx::begin(&conn)?;
    let mut ascii;
    let w: &mut dyn Write = match wire {
        Wire::Contract => w,
        Wire::Compact => {
            ascii = crate::contract::wire::Ascii::new(w);
            &mut ascii
        }
    };
    if wire == Wire::Compact {
        // The list in part lines, before the response line.
        part_lines(&tx, manager_id, q, id, w)?;
    }
    w.write_all(b"{\"id\":")?;
    serde_json::to_writer(&mut *w, id)?;
    w.write_all(b",\"result\":")?;
    let (mut count, mut live) = (0, 0);
    list::each_row(&tx, manager_id, q, |r| {
        count += 1;
        if r.live()? {
            live += 1;
        }
        Ok(true)
    })?;
    let t = Template::new(count, live, wire)?;
    let s = Streamed {
        conn: &tx,
        manager_id,
        q,
        count,
        missed: RefCell::new(missed),
        failure: RefCell::new(None),
    };
    w.write_all(t.part(0))?;
    let text = serde_json::to_writer(&mut *w, &Text(&s));
    if let Some(e) = s.failure.borrow_mut().take() {
        return Err(e);
    }
    text?;
    if t.aliased() {
        w.write_all(t.part(1))?;
        // The text's pass noted what was not cached: the later passes find the same.
        snapshots(&tx, manager_id, q, wire, w)?;
        w.write_all(t.part(2))?;
        snapshots(&tx, manager_id, q, wire, w)?;
    }
    w.write_all(t.last())?;
    w.write_all(b"}")?;
    drop(tx);
    Ok(())
}

/// The snapshots of `listed`, comma-separated (a leading comma unless this is the list's first
/// batch).
fn write_snapshots(listed: &[Rendered], first: bool, wire: Wire, w: &mut dyn Write) -> Result<()> {
    for (i, r) in listed.iter().enumerate() {
        if i > 0 || !first {
            w.write_all(b",")?;
        }
        write_snapshot(&r.json, wire, w)?;
    }
    Ok(())
}

/// One listed snapshot in the `wire` form (see [`thread::compact_snapshot`]; the caller makes
/// the compact form ASCII).
fn write_snapshot(json: &str, wire: Wire, w: &mut dyn Write) -> std::io::Result<()> {
    match wire {
        Wire::Contract => w.write_all(json.as_bytes()),
        Wire::Compact => match thread::compact_snapshot(json) {
            None => w.write_all(json.as_bytes()),
            Some((before, after)) => {
                w.write_all(before.as_bytes())?;
                w.write_all(thread::PLACEHOLDER.as_bytes())?;
                w.write_all(after.as_bytes())
            }
        },
    }
}

/// The part lines of a compact list for request `id` straight into the output, the rows read
/// in batches ([`each_batch`]).
fn part_lines(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
) -> Result<()> {
    let id = serde_json::to_vec(id)?;
    let mut cutter = PartCutter::default();
    let mut done = Vec::new();
    let mut write = |done: &mut Vec<Vec<u8>>| -> Result<()> {
        for body in done.drain(..) {
            w.write_all(PART_HEAD)?;
            w.write_all(&id)?;
            w.write_all(&body)?;
        }
        Ok(())
    };
    each_batch(conn, manager_id, q, |listed| {
        cutter.push(listed, &mut done)?;
        write(&mut done)
    })?;
    cutter.close(&mut done);
    write(&mut done)
}

/// `[snapshot, …]` straight into the line: the rows in batches, each batch's cached answers in
/// one query and the others' output and events in two.
fn snapshots(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    wire: Wire,
    w: &mut dyn Write,
) -> Result<()> {
    w.write_all(b"[")?;
    let mut first = true;
    each_batch(conn, manager_id, q, |listed| {
        write_snapshots(listed, first, wire, w)?;
        first = false;
        Ok(())
    })?;
    w.write_all(b"]")?;
    Ok(())
}

/// `q`'s rows read again, a [`BATCH`] at a time, each batch's answers (kept, or rendered without
/// noting them for the cache: the text's pass does) handed to `f` in list order.
fn each_batch(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    mut f: impl FnMut(&[Rendered]) -> Result<()>,
) -> Result<()> {
    let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
    let mut hand_over = |batch: &mut Vec<Entry>| -> Result<()> {
        let (listed, _) = rendered(conn, std::mem::take(batch), &mut Vec::new())?;
        f(&listed)
    };
    list::each_row(conn, manager_id, q, |r| {
        batch.push(Entry::from_row(r)?);
        if batch.len() == BATCH {
            hand_over(&mut batch)?;
        }
        Ok(true)
    })?;
    if !batch.is_empty() {
        hand_over(&mut batch)?;
    }
    Ok(())
}

/// A list being streamed from one read transaction.
struct Streamed<'c> {
    conn: &'c Conn,
    manager_id: ManagerId,
    q: &'c ListQuery,
    count: usize,
    /// Where the text's pass notes the closed threads it rendered.
    missed: RefCell<&'c mut Vec<Key>>,
    /// The first store error met while writing the text (a `Display` cannot return it).
    failure: RefCell<Option<Error>>,
}

/// The content text, a line per thread, written as it is read.
struct Text<'a>(&'a Streamed<'a>);

impl Serialize for Text<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        // serde_json escapes what Display writes straight into the line.
        s.collect_str(self)
    }
}

impl fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        // Lines are gathered into pieces of about 64 KiB, so the escaping writer sees few calls.
        let mut piece = String::with_capacity(PIECE_BYTES + 512);
        if s.count == 0 {
            piece.push_str(format::NO_THREADS);
        }
        let mut written: fmt::Result = Ok(());
        let mut shown = 0;
        let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
        // A line's title may be the child's session name (in thread_output): each batch's
        // lines are read (cached) or rendered in the queries a list batch costs. Every row is
        // rendered, also past the lines the text shows: the closed ones are noted for the
        // cache, which the later passes and lists read.
        let mut write_batch = |batch: &mut Vec<Entry>, piece: &mut String| -> Result<()> {
            let (listed, _) = rendered(s.conn, std::mem::take(batch), &mut s.missed.borrow_mut())?;
            push_lines(piece, &listed, &mut shown);
            Ok(())
        };
        let mut pass = list::each_row(s.conn, s.manager_id, s.q, |r| {
            batch.push(Entry::from_row(r)?);
            if batch.len() == BATCH {
                write_batch(&mut batch, &mut piece)?;
            }
            if piece.len() >= PIECE_BYTES {
                written = f.write_str(&piece);
                piece.clear();
            }
            Ok(written.is_ok())
        });
        if pass.is_ok() && written.is_ok() && !batch.is_empty() {
            pass = write_batch(&mut batch, &mut piece);
        }
        if let Err(e) = pass {
            // Stop here (the caller returns the error; the line stays unfinished).
            self.0.failure.borrow_mut().get_or_insert(e);
            return written;
        }
        written?;
        push_more(&mut piece, shown, s.count);
        f.write_str(&piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Phase, ThreadId, ThreadStatus};
    use crate::store::events::{self, NewEvent};
    use crate::store::list::{StateFilter, Subtree, VisibilityFilter};
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// `n` threads under /root (every 7th live, every 11th archived unless live, every 5th a child), each with events and
    /// an answer; returns the manager.
    fn seeded(store: &Store, n: usize) -> ManagerId {
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec::new("s", Contract::Thread, "/root"),
                )?;
                let mut i = 0;
                while i < n {
                    let id = format!("thread_{i:012x}");
                    let (path, parent) = if i % 5 == 1 {
                        (format!("/root/t_{}/c{i}", i - 1), format!("/root/t_{}", i - 1))
                    } else {
                        (format!("/root/t_{i}"), "/root".to_string())
                    };
                    let live = i % 7 == 3;
                    insert_thread(
                        tx,
                        &NewThread {
                            id: ThreadId::new(id.as_str()),
                            manager_id: m,
                            task_name: path.rsplit('/').next().unwrap().to_string(),
                            name: format!("Thread \"{i}\"\n"),
                            path,
                            parent_path: Some(parent),
                            depth: 1,
                            cwd: "/w".into(),
                            status: ThreadStatus::Live,
                            phase: Phase::Busy,
                            ..Default::default()
                        },
                    )?;
                    if !live {
                        tx.sqlite().execute(
                            "UPDATE threads SET status = 'closed', phase = 'idle', exit_kind = 'exited', exit_code = 0, archived = ?2 WHERE id = ?1",
                            (&id, i % 11 == 0),
                        )?;
                    }
                    let text = format!("{{\"text\":\"answer {i}: {}\"}}", "é ".repeat(i % 300));
                    let evs: Vec<NewEvent<'_>> = (0..(i % 9))
                        .map(|k| NewEvent {
                            at: "2026-01-01T00:00:00.000Z",
                            kind: if k % 2 == 0 { "turn_started" } else { "assistant_message" },
                            data: if k % 2 == 0 { "{}" } else { &text },
                        })
                        .collect();
                    events::append(tx, &id, &evs)?;
                    if i % 3 != 0 {
                        tx.sqlite().execute(
                            "INSERT INTO thread_output (thread_id, last_assistant_text, stderr_tail) VALUES (?1, ?2, ?3)",
                            (&id, format!("Done {i}.\n\n  {}", "word ".repeat(i % 200)), b"err\n".to_vec()),
                        )?;
                    }
                    i += 1;
                }
                Ok(m)
            })
            .unwrap()
    }

    /// A spill file that outgrows memory moves to a file beside the database, bytes intact.
    #[test]
    fn a_spill_file_moves_to_disk_past_its_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = SpillFile::new(Some(dir.path())).unwrap();
        assert!(f.in_memory, "memfd on Linux");
        f.limit = 1000;
        let mut want = Vec::new();
        for i in 0..300u32 {
            let piece = format!("piece {i};");
            f.write_all(piece.as_bytes()).unwrap();
            want.extend_from_slice(piece.as_bytes());
        }
        assert!(!f.in_memory);
        let (file, len) = f.finish().unwrap();
        assert_eq!(len, want.len() as u64);
        let mut got = crate::serve::output::Plain(Vec::new());
        crate::serve::output::LineWriter::write_file(&mut got, &file, 0, len).unwrap();
        assert!(got.0 == want);
    }

    /// A spill file that cannot be written (a full disk) is no answer: the list is answered
    /// without spill files instead ([`Answer::NoRoom`], then [`stream`]).
    #[test]
    fn a_spill_that_cannot_be_written_falls_back_to_passes() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        let m = seeded(&store, 300);
        let q = ListQuery {
            state: crate::store::list::StateFilter::All,
            visibility: crate::store::list::VisibilityFilter::All,
            subtree: crate::store::list::Subtree::Everything,
        };
        let read_only = || {
            let path = dir.path().join("read-only");
            std::fs::write(&path, b"").unwrap();
            SpillFile::over(std::fs::File::open(&path).unwrap(), false, None)
        };
        let conn = store.read().unwrap();
        let tx = crate::store::ReadTx::begin(&conn).unwrap();
        let got = answer(
            &tx,
            m,
            &q,
            Wire::Contract,
            0,
            || Spill::over(read_only(), read_only(), Wire::Contract),
            &mut Vec::new(),
        )
        .unwrap();
        assert!(matches!(got, Answer::NoRoom));
        drop(tx);
        drop(conn);
        assert!(
            spilled(&store, m, &q, Wire::Contract, &mut Vec::new()) == {
                let mut line = Vec::new();
                stream(
                    &store,
                    m,
                    &q,
                    Wire::Contract,
                    &Value::from(7),
                    &mut line,
                    &mut Vec::new(),
                )
                .unwrap();
                line
            },
            "the fallback writes what spilling would"
        );
    }

    /// `q`'s answer made with spill files from its first row, written out as serve writes it
    /// for request id 7 (without the response line's LF).
    fn spilled(
        store: &Store,
        m: ManagerId,
        q: &ListQuery,
        wire: Wire,
        missed: &mut Vec<Key>,
    ) -> Vec<u8> {
        let conn = store.read().unwrap();
        let tx = crate::store::ReadTx::begin(&conn).unwrap();
        let Answer::Spilled { lines, result } =
            answer(&tx, m, q, wire, 0, || Spill::new(None, wire), missed).unwrap()
        else {
            panic!("{q:?}: not spilled");
        };
        written(&lines, &result)
    }

    /// What serve writes for request id 7 of a reply's part lines and result (without the
    /// response line's LF).
    fn written(lines: &[Part], result: &[Part]) -> Vec<u8> {
        let mut out = crate::serve::output::Plain(Vec::new());
        let put = |p: &Part, out: &mut crate::serve::output::Plain<Vec<u8>>| match p {
            Part::Bytes(b) => out.0.extend_from_slice(b),
            Part::File { file, at, len } => {
                crate::serve::output::LineWriter::write_file(out, file, *at, *len).unwrap()
            }
            Part::Id => out.0.extend_from_slice(b"7"),
        };
        for p in lines {
            put(p, &mut out);
        }
        out.0.extend_from_slice(b"{\"id\":7,\"result\":");
        for p in result {
            put(p, &mut out);
        }
        out.0.push(b'}');
        out.0
    }

    /// A reply's lines as serve writes them: the part lines' lists (each checked: request 7,
    /// under 128 KiB unless it holds one snapshot) and the response.
    fn parts_and_response(all: &[u8]) -> (Vec<Vec<Value>>, Value) {
        let mut lines: Vec<&[u8]> = all.split(|b| *b == b'\n').collect();
        let response = serde_json::from_slice(lines.pop().unwrap()).unwrap();
        let parts = lines
            .into_iter()
            .map(|l| {
                let v: Value = serde_json::from_slice(l).unwrap();
                assert_eq!(v["id"], 7);
                let list = v["part"].as_array().unwrap().clone();
                assert!(!list.is_empty());
                assert!(l.len() < 128 * 1024 || list.len() == 1, "{}", l.len());
                list
            })
            .collect();
        (parts, response)
    }

    /// A spilled or streamed list is exactly the list the in-memory path writes, for every
    /// variant and both wire forms; the compact form is the contract's without
    /// `details.snapshots`.
    #[test]
    fn a_streamed_list_equals_the_list_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        let m = seeded(&store, 600);
        let mut contract_lines = Vec::new();
        for (wire, (state, visibility, subtree)) in [Wire::Contract, Wire::Compact]
            .into_iter()
            .flat_map(|w| variants().into_iter().map(move |v| (w, v)))
        {
            let q = ListQuery {
                state,
                visibility,
                subtree,
            };
            // Each variant starts with no cached answers (dropping them is always safe).
            store
                .write(|tx| Ok(tx.sqlite().execute("DELETE FROM thread_snapshots", [])?))
                .unwrap();
            let conn = store.read().unwrap();
            let rows = list::list_at_most(&conn, m, &q, usize::MAX)
                .unwrap()
                .unwrap();
            let entries = entries_at_most(&conn, m, &q, usize::MAX).unwrap().unwrap();
            assert!(
                entries.iter().all(|e| matches!(e, Entry::Fresh(_))),
                "{q:?}"
            );
            let mut missed = Vec::new();
            let (listed, live) = rendered(&conn, entries, &mut missed).unwrap();
            assert_eq!(live, rows.iter().filter(|r| r.is_live()).count(), "{q:?}");
            let (want_lines, want) = from_memory(&listed, live, wire).unwrap();
            drop(conn);
            let line = spilled(&store, m, &q, wire, &mut Vec::new());
            let expected = written(&want_lines, &[Part::Bytes(want.clone())]);
            assert!(line == expected, "{q:?}: the spilled line differs");
            // Without a spill file the rows are read in passes, with the same answer.
            let mut unspilled = Vec::new();
            stream(
                &store,
                m,
                &q,
                wire,
                &Value::from(7),
                &mut unspilled,
                &mut Vec::new(),
            )
            .unwrap();
            assert!(unspilled == expected, "{q:?}: the unspilled line differs");
            if wire == Wire::Compact {
                // Written as read: the same bytes, and the same threads noted for the cache.
                let mut noted = Vec::new();
                let mut piped_line = Vec::new();
                piped(&store, m, &q, &Value::from(7), &mut piped_line, &mut noted).unwrap();
                assert!(piped_line == expected, "{q:?}: the piped line differs");
                assert_eq!(
                    noted.len(),
                    rows.iter().filter(|r| r.is_still()).count(),
                    "{q:?}"
                );
            }
            // Every closed thread rendered was noted for the cache; once kept, the same lists
            // are the same bytes, read from the cache.
            let closed = rows.iter().filter(|r| r.is_still()).count();
            assert_eq!(missed.len(), closed, "{q:?}");
            let kept = store
                .write(|tx| super::super::cache::fill_batch(tx, &missed))
                .unwrap();
            assert_eq!(kept, closed, "{q:?}");
            let conn = store.read().unwrap();
            let mut again = Vec::new();
            let entries = entries_at_most(&conn, m, &q, usize::MAX).unwrap().unwrap();
            let kept_entries = entries
                .iter()
                .filter(|e| matches!(e, Entry::Kept { .. }))
                .count();
            assert_eq!(
                kept_entries, closed,
                "{q:?}: the list rows did not carry the kept answers"
            );
            let (listed, live_again) = rendered(&conn, entries, &mut again).unwrap();
            drop(conn);
            assert_eq!(live_again, live, "{q:?}");
            assert!(again.is_empty(), "{q:?}: cached rows were rendered again");
            let (cached_lines, cached) = from_memory(&listed, live, wire).unwrap();
            assert!(
                written(&cached_lines, &[Part::Bytes(cached)]) == expected,
                "{q:?}: the cached list differs"
            );
            let cached_line = spilled(&store, m, &q, wire, &mut again);
            assert!(again.is_empty(), "{q:?}");
            assert!(
                cached_line == expected,
                "{q:?}: the cached spilled line differs"
            );
            let mut cached_line = Vec::new();
            stream(
                &store,
                m,
                &q,
                wire,
                &Value::from(7),
                &mut cached_line,
                &mut again,
            )
            .unwrap();
            assert!(again.is_empty(), "{q:?}");
            assert!(
                cached_line == expected,
                "{q:?}: the cached streamed line differs"
            );
            if wire == Wire::Compact {
                let mut piped_line = Vec::new();
                piped(&store, m, &q, &Value::from(7), &mut piped_line, &mut again).unwrap();
                assert!(again.is_empty(), "{q:?}");
                assert!(
                    piped_line == expected,
                    "{q:?}: the cached piped line differs"
                );
            }
            let (parts, v) = parts_and_response(&line);
            let details = &v["result"]["details"];
            let count = details["count"].as_u64().unwrap() as usize;
            let text = v["result"]["content"][0]["text"].as_str().unwrap();
            let shown = count.min(format::MAX_LIST_LINES);
            if count > format::MAX_LIST_LINES {
                assert_eq!(text.lines().count(), shown + 1, "{q:?}");
                let more = text.lines().last().unwrap();
                assert!(
                    more.starts_with(&format!("… and {} more not shown: this text lists the first {shown} of {count} threads", count - shown)),
                    "{q:?}: {more}"
                );
            } else {
                assert_eq!(text.lines().count(), shown.max(1), "{q:?}");
            }
            match wire {
                Wire::Contract => {
                    assert!(parts.is_empty(), "{q:?}");
                    assert_eq!(details["threads"], details["snapshots"], "{q:?}");
                    contract_lines.push(v);
                }
                Wire::Compact => {
                    assert!(line.is_ascii(), "{q:?}: the compact line is not ASCII");
                    assert_eq!(parts.is_empty(), count == 0, "{q:?}");
                    // The contract's answer with `details.threads` and `details.snapshots` as
                    // the placeholder 0, the list in the part lines, and each thread's
                    // `resultSummary` (a copy of its `result.text`) as the placeholder 0.
                    let mut want = contract_lines.remove(0);
                    let want_details = want["result"]["details"].as_object_mut().unwrap();
                    want_details["snapshots"] = 0.into();
                    let mut want_list = want_details["threads"].take();
                    want_details["threads"] = 0.into();
                    for t in want_list.as_array_mut().unwrap() {
                        assert_eq!(
                            t.get("resultSummary").is_some(),
                            t["result"]["text"].is_string(),
                            "{q:?}"
                        );
                        if let Some(summary) = t.get_mut("resultSummary") {
                            *summary = 0.into();
                        }
                    }
                    assert_eq!(
                        serde_json::to_string(&v).unwrap(),
                        serde_json::to_string(&want).unwrap(),
                        "{q:?}"
                    );
                    let joined: Vec<Value> = parts.into_iter().flatten().collect();
                    assert_eq!(
                        serde_json::to_string(&joined).unwrap(),
                        serde_json::to_string(&want_list).unwrap(),
                        "{q:?}"
                    );
                }
            }
        }
        assert!(contract_lines.is_empty());
    }

    fn variants() -> Vec<(StateFilter, VisibilityFilter, Subtree)> {
        vec![
            (
                StateFilter::All,
                VisibilityFilter::Active,
                Subtree::Everything,
            ),
            (
                StateFilter::Closed,
                VisibilityFilter::All,
                Subtree::Everything,
            ),
            (
                StateFilter::Live,
                VisibilityFilter::Active,
                Subtree::Everything,
            ),
            (
                StateFilter::All,
                VisibilityFilter::All,
                Subtree::DescendantsOf("/root".into()),
            ),
            (
                StateFilter::All,
                VisibilityFilter::Archived,
                Subtree::Everything,
            ),
        ]
    }
}
