//! Contract A's `list` answer. Each listed thread is its summary snapshot (JSON) and its line
//! of the content text; a closed thread's are copied from the snapshot cache (engine/cache.rs),
//! the others rendered from the thread's output and events. A list of at most [`IN_MEMORY`]
//! threads is read in at most four queries (the rows, their cached answers, then the retained
//! output and events of the others) and written from memory. A longer one is streamed ([`Reply::Stream`]): one read transaction on a blocking
//! thread, so every pass sees the same rows, and passes over the list query that never hold
//! more than [`BATCH`] threads:
//!
//! one pass over the rows, in batches of [`BATCH`] (each batch's cached answers in one query, the
//! others' output and events in two), writes the content text and the snapshots (each serialized once) into two spill
//! files beside the database; the line is then written from them: the text, then the list
//! twice (`details.threads` and its alias `details.snapshots`).
//!
//! Without room for spill files, the rows are read four times instead (counts, text, the list
//! twice) and written straight into the line. A failure after the first byte cannot be taken
//! back: the line is left unfinished (never a valid but shortened answer) and the error
//! response for the same id follows it.

use std::cell::RefCell;
use std::fmt;
use std::io::{Seek, Write};

use rusqlite::Connection;
use serde::ser::Serializer;
use serde::Serialize;
use serde_json::Value;

use super::cache::{render, Key, Rendered, MAX_PENDING};
use super::{thread_facts, Engine};
use crate::contract::format;
use crate::contract::projection::Detail;
use crate::contract::thread::Listed;
use crate::contract::ToolResult;
use crate::error::{Error, Result};
use crate::list::{self, ListQuery};
use crate::output::Reply;
use crate::store::snapshots::View;
use crate::store::threads::{col, ThreadRow};
use crate::store::Store;

/// Lists up to this long are answered from memory.
pub const IN_MEMORY: usize = 256;
/// Threads a streamed list holds at a time.
pub const BATCH: usize = 256;
/// Bytes of content text handed to the escaping writer at a time.
const PIECE_BYTES: usize = 64 * 1024;

/// The answer to a `list` of `q` in `e`'s manager.
pub(super) fn reply(e: &Engine, q: ListQuery) -> Result<Reply> {
    let conn = e.store.read()?;
    // One read transaction: the rows and their kept answers agree.
    let tx = crate::store::ReadTx::begin(&conn)?;
    let Some(entries) = entries_at_most(&tx, e.manager_id, &q, IN_MEMORY)? else {
        drop(tx);
        drop(conn);
        let store = e.store.clone();
        let cache = e.cache.clone();
        let manager_id = e.manager_id;
        return Ok(Reply::Stream(Box::new(move |id, w| {
            let mut missed = Vec::new();
            let out = stream(&store, manager_id, &q, id, w, &mut missed);
            cache.missed(missed);
            out
        })));
    };
    let mut missed = Vec::new();
    let (listed, live) = rendered(&tx, entries, &mut missed)?;
    drop(tx);
    drop(conn);
    e.cache.missed(missed);
    Ok(Reply::Json(from_memory(&listed, live)?))
}

/// A listed thread as its list row found it: its kept answer (no more to read), or its row
/// (its answer is rendered from its facts).
enum Entry {
    Kept { live: bool, answer: Rendered },
    Fresh(Box<ThreadRow>),
}

impl Entry {
    /// A list row (`list::KEPT_JSON`/`KEPT_LINE` after the thread row): the whole thread row
    /// is read only when no answer is kept.
    fn from_row(r: &rusqlite::Row<'_>) -> Result<Entry> {
        let json: Option<String> = r.get(list::KEPT_JSON)?;
        let line: Option<String> = r.get(list::KEPT_LINE)?;
        Ok(match (json, line) {
            (Some(json), Some(line)) => Entry::Kept {
                live: text_at(r, col::STATUS)? == "live",
                answer: Rendered { json, line },
            },
            _ => Entry::Fresh(Box::new(ThreadRow::from_row(r)?)),
        })
    }
}

/// The entries of `q`'s list, or `None` when there are more than `max` (read no further).
fn entries_at_most(
    conn: &Connection,
    manager_id: i64,
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
/// the list row carried them, the others rendered from their facts (two queries for all of
/// them) and, when still (closed, or live and idle), noted in `missed` so the cache keeps them.
fn rendered(
    conn: &Connection,
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
            Entry::Fresh(row) => {
                live += usize::from(row.is_live());
                fresh_at.push(i);
                fresh.push(*row);
                listed.push(Rendered::default());
            }
        }
    }
    if !fresh.is_empty() {
        for (i, f) in fresh_at
            .into_iter()
            .zip(thread_facts(conn, fresh, Detail::Summary)?)
        {
            listed[i] = render(&f, View::Snapshot, Detail::Summary)?;
            if f.row.is_still() && missed.len() < MAX_PENDING {
                missed.push((f.row.id.clone(), View::Snapshot, Detail::Summary));
            }
        }
    }
    Ok((listed, live))
}

/// The content text's lines of `listed` (each after a line break unless it is the list's
/// first).
fn push_lines(text: &mut String, listed: &[Rendered], first: bool) {
    for (i, r) in listed.iter().enumerate() {
        if i > 0 || !first {
            text.push('\n');
        }
        text.push_str(&r.line);
    }
}

/// The result JSON of a list whose answers (`live` of them live) are all in memory, written
/// into the [`Template`] as a streamed list is, so the two are the same bytes.
fn from_memory(listed: &[Rendered], live: usize) -> Result<Vec<u8>> {
    let mut text = String::new();
    if listed.is_empty() {
        text.push_str(format::NO_THREADS);
    }
    push_lines(&mut text, listed, true);
    let list_len = listed.iter().map(|r| r.json.len() + 1).sum::<usize>() + 2;
    let t = Template::new(listed.len(), live)?;
    let mut json = Vec::with_capacity(2 * list_len + 2 * text.len() + t.json.len() + 64);
    json.extend_from_slice(t.part(0));
    serde_json::to_writer(&mut json, text.as_str())?;
    json.extend_from_slice(t.part(1));
    // The list once, then copied from the line itself into its second hole.
    let start = json.len();
    json.push(b'[');
    for (i, r) in listed.iter().enumerate() {
        if i > 0 {
            json.push(b',');
        }
        json.extend_from_slice(r.json.as_bytes());
    }
    json.push(b']');
    let end = json.len();
    json.extend_from_slice(t.part(2));
    json.extend_from_within(start..end);
    json.extend_from_slice(t.part(3));
    Ok(json)
}

/// The holes of a streamed list's template: the text, then the list (twice). Serialized, a
/// marker is a JSON string starting with U+0000, which nothing else in the template holds.
const TEXT_HOLE: &str = "\u{0}text";
const LIST_HOLE: &str = "\u{0}list";

/// A streamed list's template: the in-memory answer's `ToolResult` / `Listed` structs
/// serialized with markers where the text and the lists go, cut at the markers.
struct Template {
    json: String,
    /// Where the text hole and the two list holes start and end.
    holes: [(usize, usize); 3],
}

impl Template {
    fn new(count: usize, live: usize) -> Result<Template> {
        let json = serde_json::to_string(&ToolResult::new(
            TEXT_HOLE,
            Listed::new(LIST_HOLE, count, live),
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
        let threads = find(LIST_HOLE, text.1)?;
        let snapshots = find(LIST_HOLE, threads.1)?;
        Ok(Template {
            holes: [text, threads, snapshots],
            json,
        })
    }

    /// The template's text before hole `i` (after hole `i - 1`); `i == 3`: after the last.
    fn part(&self, i: usize) -> &[u8] {
        let from = if i == 0 { 0 } else { self.holes[i - 1].1 };
        let to = self.holes.get(i).map_or(self.json.len(), |h| h.0);
        &self.json.as_bytes()[from..to]
    }
}

/// Writes the whole response line of a long list, its shape the [`Template`]'s. One pass over
/// the rows writes the content text and the snapshots (each serialized once) into two spill
/// files beside the database while counting; the line is then the template with the text
/// copied into its hole and the snapshots copied into both list holes. Nothing reaches the
/// line before every row was read, so a failure on the way is an ordinary error. Without
/// room for spill files the rows are read in four passes instead (counts, text, and the list
/// twice) and written straight into the line.
fn stream(
    store: &Store,
    manager_id: i64,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
    missed: &mut Vec<Key>,
) -> Result<()> {
    stream_spilling(store, manager_id, q, id, w, store.path().parent(), missed)
}

/// [`stream`], spilling into `spill_dir` (none: the rows are read four times).
fn stream_spilling(
    store: &Store,
    manager_id: i64,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
    spill_dir: Option<&std::path::Path>,
    missed: &mut Vec<Key>,
) -> Result<()> {
    let conn = store.read()?;
    // One read transaction: every pass sees the same rows.
    let tx = conn.unchecked_transaction()?;
    let spills = spill_dir.and_then(|dir| {
        let text = tempfile::tempfile_in(dir).ok()?;
        let list = tempfile::tempfile_in(dir).ok()?;
        Some((text, list))
    });
    let spilled = match spills {
        Some((text, list)) => spill_pass(&tx, manager_id, q, text, list, missed)?,
        None => None,
    };
    w.write_all(b"{\"id\":")?;
    serde_json::to_writer(&mut *w, id)?;
    w.write_all(b",\"result\":")?;
    match spilled {
        Some(Spilled {
            count,
            live,
            mut text,
            mut list,
        }) => {
            let t = Template::new(count, live)?;
            w.write_all(t.part(0))?;
            w.write_all(b"\"")?;
            if count == 0 {
                // Never: a list this long is answered from memory.
                w.write_all(format::NO_THREADS.as_bytes())?;
            }
            copy_from_start(&mut text, w)?;
            w.write_all(b"\"")?;
            w.write_all(t.part(1))?;
            copy_from_start(&mut list, w)?;
            w.write_all(t.part(2))?;
            copy_from_start(&mut list, w)?;
            w.write_all(t.part(3))?;
        }
        None => {
            let (mut count, mut live) = (0, 0);
            list::each_row(&tx, manager_id, q, |r| {
                count += 1;
                if text_at(r, col::STATUS)? == "live" {
                    live += 1;
                }
                Ok(true)
            })?;
            let t = Template::new(count, live)?;
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
            w.write_all(t.part(1))?;
            // The text's pass noted what was not cached: the later passes find the same.
            snapshots(&tx, manager_id, q, w)?;
            w.write_all(t.part(2))?;
            snapshots(&tx, manager_id, q, w)?;
            w.write_all(t.part(3))?;
        }
    }
    w.write_all(b"}")?;
    tx.finish()?;
    Ok(())
}

/// What one pass left in the spill files: the counts, the content text's lines (escaped for a
/// JSON string) and the snapshots as a JSON array.
struct Spilled {
    count: usize,
    live: usize,
    text: std::fs::File,
    list: std::fs::File,
}

fn copy_from_start(file: &mut std::fs::File, w: &mut dyn Write) -> Result<()> {
    file.seek(std::io::SeekFrom::Start(0))?;
    std::io::copy(file, w)?;
    Ok(())
}

/// The one pass over the rows into the spill files; `None` when a spill file could not be
/// written (the caller reads the rows without them).
fn spill_pass(
    conn: &Connection,
    manager_id: i64,
    q: &ListQuery,
    text: std::fs::File,
    list: std::fs::File,
    missed: &mut Vec<Key>,
) -> Result<Option<Spilled>> {
    let mut text = std::io::BufWriter::with_capacity(256 * 1024, text);
    let mut list = std::io::BufWriter::with_capacity(256 * 1024, list);
    let (mut count, mut live) = (0, 0);
    let mut spill_ok = list.write_all(b"[").is_ok();
    let mut lines = String::with_capacity(BATCH * 160);
    let mut escaped = Vec::with_capacity(BATCH * 170);
    let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
    let mut first = true;
    let mut write_batch = |batch: &mut Vec<Entry>, spill_ok: &mut bool| -> Result<usize> {
        let (listed, live) = rendered(conn, std::mem::take(batch), missed)?;
        lines.clear();
        push_lines(&mut lines, &listed, first);
        escaped.clear();
        serde_json::to_writer(&mut escaped, lines.as_str())?;
        let inner = &escaped[1..escaped.len() - 1];
        *spill_ok = *spill_ok && text.write_all(inner).is_ok();
        let written = write_snapshots(&listed, first, &mut list);
        first = false;
        written.or_else(|e| match e.code {
            crate::error::ErrorCode::Io => {
                *spill_ok = false;
                Ok(())
            }
            _ => Err(e),
        })?;
        Ok(live)
    };
    list::each_row(conn, manager_id, q, |r| {
        count += 1;
        batch.push(Entry::from_row(r)?);
        if batch.len() == BATCH {
            live += write_batch(&mut batch, &mut spill_ok)?;
        }
        Ok(spill_ok)
    })?;
    if !batch.is_empty() {
        live += write_batch(&mut batch, &mut spill_ok)?;
    }
    spill_ok = spill_ok && list.write_all(b"]").is_ok();
    let (Ok(text), Ok(list)) = (text.into_inner(), list.into_inner()) else {
        return Ok(None);
    };
    Ok(spill_ok.then_some(Spilled {
        count,
        live,
        text,
        list,
    }))
}

/// The snapshots of `listed`, comma-separated (a leading comma unless this is the list's first
/// batch).
fn write_snapshots(listed: &[Rendered], first: bool, w: &mut dyn Write) -> Result<()> {
    for (i, r) in listed.iter().enumerate() {
        if i > 0 || !first {
            w.write_all(b",")?;
        }
        w.write_all(r.json.as_bytes())?;
    }
    Ok(())
}

/// `[snapshot, …]` straight into the line: the rows in batches, each batch's cached answers in
/// one query and the others' output and events in two.
fn snapshots(conn: &Connection, manager_id: i64, q: &ListQuery, w: &mut dyn Write) -> Result<()> {
    w.write_all(b"[")?;
    let mut first = true;
    let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
    let mut write_batch = |batch: &mut Vec<Entry>| -> Result<()> {
        let (listed, _) = rendered(conn, std::mem::take(batch), &mut Vec::new())?;
        write_snapshots(&listed, first, w)?;
        first = false;
        Ok(())
    };
    list::each_row(conn, manager_id, q, |r| {
        batch.push(Entry::from_row(r)?);
        if batch.len() == BATCH {
            write_batch(&mut batch)?;
        }
        Ok(true)
    })?;
    if !batch.is_empty() {
        write_batch(&mut batch)?;
    }
    w.write_all(b"]")?;
    Ok(())
}

/// A text column of a thread row, borrowed.
fn text_at<'r>(r: &'r rusqlite::Row<'_>, i: usize) -> Result<&'r str> {
    r.get_ref(i)?.as_str().map_err(|e| {
        Error::from(rusqlite::Error::FromSqlConversionFailure(
            i,
            rusqlite::types::Type::Text,
            Box::new(e),
        ))
    })
}

/// A list being streamed from one read transaction.
struct Streamed<'c> {
    conn: &'c Connection,
    manager_id: i64,
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
        let mut first = true;
        let mut batch: Vec<Entry> = Vec::with_capacity(BATCH);
        // A line's title may be the child's session name (in thread_output): each batch's
        // lines are read (cached) or rendered in the queries a list batch costs.
        let mut write_batch = |batch: &mut Vec<Entry>, piece: &mut String| -> Result<()> {
            let (listed, _) = rendered(s.conn, std::mem::take(batch), &mut s.missed.borrow_mut())?;
            push_lines(piece, &listed, first);
            first = false;
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
        f.write_str(&piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::list::{StateFilter, Subtree, VisibilityFilter};
    use crate::store::events::{self, NewEvent};
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// `n` threads under /root (every 7th live, every 11th archived unless live, every 5th a child), each with events and
    /// an answer; returns the manager.
    fn seeded(store: &Store, n: usize) -> i64 {
        store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec {
                        session_id: "s",
                        contract: Contract::Thread,
                        scope_path: "/root",
                        depth: 0,
                        self_thread_id: None,
                        session_file: None,
                        cwd: None,
                        owner_pid: None,
                        owner_started_at: None,
                    },
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
                            id: id.clone(),
                            manager_id: m,
                            task_name: path.rsplit('/').next().unwrap().to_string(),
                            name: format!("Thread \"{i}\"\n"),
                            path,
                            parent_path: Some(parent),
                            depth: 1,
                            cwd: "/w".into(),
                            status: "live",
                            phase: "busy",
                            ..Default::default()
                        },
                    )?;
                    if !live {
                        tx.execute(
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
                        tx.execute(
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

    /// A streamed list is exactly the list the in-memory path writes, for every variant.
    #[test]
    fn a_streamed_list_equals_the_list_from_memory() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        let m = seeded(&store, 600);
        for (state, visibility, subtree) in [
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
        ] {
            let q = ListQuery {
                state,
                visibility,
                subtree,
            };
            // Each variant starts with no cached answers (dropping them is always safe).
            store
                .write(|tx| Ok(tx.execute("DELETE FROM thread_snapshots", [])?))
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
            let want = from_memory(&listed, live).unwrap();
            drop(conn);
            let mut line = Vec::new();
            stream(&store, m, &q, &Value::from(7), &mut line, &mut Vec::new()).unwrap();
            let mut expected = b"{\"id\":7,\"result\":".to_vec();
            expected.extend_from_slice(&want);
            expected.push(b'}');
            assert!(line == expected, "{q:?}: the streamed line differs");
            // Without a spill file the rows are read twice, with the same answer.
            let mut unspilled = Vec::new();
            stream_spilling(
                &store,
                m,
                &q,
                &Value::from(7),
                &mut unspilled,
                None,
                &mut Vec::new(),
            )
            .unwrap();
            assert!(unspilled == expected, "{q:?}: the unspilled line differs");
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
            assert!(
                from_memory(&listed, live).unwrap() == want,
                "{q:?}: the cached list differs"
            );
            for spill in [store.path().parent(), None] {
                let mut cached_line = Vec::new();
                stream_spilling(
                    &store,
                    m,
                    &q,
                    &Value::from(7),
                    &mut cached_line,
                    spill,
                    &mut again,
                )
                .unwrap();
                assert!(again.is_empty(), "{q:?}");
                assert!(
                    cached_line == expected,
                    "{q:?}: the cached streamed line differs"
                );
            }
            let v: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(
                v["result"]["details"]["threads"], v["result"]["details"]["snapshots"],
                "{q:?}"
            );
        }
    }
}
