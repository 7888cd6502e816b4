//! Contract A's `list` answer. A list of at most [`IN_MEMORY`] threads is read in three queries
//! (the rows, then the retained output and the retained events of those ids) and serialized
//! from memory. A longer one is streamed ([`Reply::Stream`]): one read transaction on a blocking
//! thread, so every pass sees the same rows, and passes over the list query that never hold
//! more than [`BATCH`] threads:
//!
//! 1. the counts (the content text starts with them);
//! 2. the content text, one line per thread;
//! 3. `details.threads`: the rows in batches of [`BATCH`], each batch's output and events in
//!    two queries, each snapshot serialized once into the line and into a spill file beside
//!    the database;
//! 4. `details.snapshots` (its alias, the same list again): the spill file copied (or, when
//!    it could not be written, pass 3 again without it).
//!
//! A failure after the first byte cannot be taken back: the line is left unfinished (never a
//! valid but shortened answer) and the error response for the same id follows it.

use std::cell::RefCell;
use std::fmt;
use std::io::{Seek, Write};

use rusqlite::Connection;
use serde::ser::Serializer;
use serde::Serialize;
use serde_json::Value;

use super::{thread_facts, Engine};
use crate::contract::projection::{Detail, Projection, Snapshot, ThreadFacts};
use crate::contract::thread::Listed;
use crate::contract::ToolResult;
use crate::error::{Error, Result};
use crate::list::{self, ListQuery};
use crate::output::Reply;
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
    let Some(rows) = list::list_at_most(&conn, e.manager_id, &q, IN_MEMORY)? else {
        drop(conn);
        let store = e.store.clone();
        let manager_id = e.manager_id;
        return Ok(Reply::Stream(Box::new(move |id, w| {
            stream(&store, manager_id, &q, id, w)
        })));
    };
    let facts = thread_facts(&conn, rows, Detail::Summary)?;
    drop(conn);
    Ok(Reply::Json(from_memory(&facts)?))
}

/// The result JSON of a list whose facts are all in memory.
fn from_memory(facts: &[ThreadFacts]) -> Result<Vec<u8>> {
    let projections: Vec<Projection<'_>> = facts
        .iter()
        .map(|f| Projection::new(f, Detail::Summary))
        .collect();
    let snapshots: Vec<Snapshot<'_>> = projections.iter().map(Projection::snapshot).collect();
    // Written twice (`threads`, `snapshots`), serialized once.
    let snapshots = serde_json::value::to_raw_value(&snapshots)?;
    let live = facts.iter().filter(|f| f.row.is_live()).count();
    let mut text = String::new();
    let _ = header(&mut text, facts.len(), live);
    for f in facts {
        let r = &f.row;
        let _ = line(&mut text, &r.path, &r.id, &r.status, &r.phase, &r.name);
    }
    let mut json = Vec::with_capacity(2 * snapshots.get().len() + text.len() + 1024);
    serde_json::to_writer(
        &mut json,
        &ToolResult::new(text, Listed::new(&*snapshots, facts.len(), live)),
    )?;
    Ok(json)
}

/// `N thread(s) (L live, C closed)`.
fn header(f: &mut dyn fmt::Write, count: usize, live: usize) -> fmt::Result {
    write!(
        f,
        "{count} thread{} ({live} live, {} closed)",
        if count == 1 { "" } else { "s" },
        count - live
    )
}

/// One thread's line of the content text.
fn line(
    f: &mut dyn fmt::Write,
    path: &str,
    id: &str,
    status: &str,
    phase: &str,
    name: &str,
) -> fmt::Result {
    write!(f, "\n- {path} ({id}) {status}/{phase} \"{name}\"")
}

/// The holes of a streamed list's template: the text, then the list (twice). Serialized, a
/// marker is a JSON string starting with U+0000, which nothing else in the template holds.
const TEXT_HOLE: &str = "\u{0}text";
const LIST_HOLE: &str = "\u{0}list";

/// Writes the whole response line of a long list. Its shape is the in-memory answer's: the
/// same `ToolResult` / `Listed` structs are serialized with markers where the text and the
/// lists go, and the line is that template with the holes filled as the rows are read. The
/// snapshots are written to the line and to a spill file beside the database, which is then
/// copied for `details.snapshots`; without a spill file the rows are read a second time.
fn stream(
    store: &Store,
    manager_id: i64,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
) -> Result<()> {
    stream_spilling(store, manager_id, q, id, w, store.path().parent())
}

/// [`stream`], spilling into `spill_dir` (none: the rows are read twice).
fn stream_spilling(
    store: &Store,
    manager_id: i64,
    q: &ListQuery,
    id: &Value,
    w: &mut dyn Write,
    spill_dir: Option<&std::path::Path>,
) -> Result<()> {
    let conn = store.read()?;
    // One read transaction: the passes below see the same rows.
    let tx = conn.unchecked_transaction()?;
    let (mut count, mut live) = (0, 0);
    list::each_row(&tx, manager_id, q, |r| {
        count += 1;
        if text_at(r, col::STATUS)? == "live" {
            live += 1;
        }
        Ok(true)
    })?;
    let template = serde_json::to_string(&ToolResult::new(
        TEXT_HOLE,
        Listed::new(LIST_HOLE, count, live),
    ))?;
    let text_hole = serde_json::to_string(TEXT_HOLE)?;
    let list_hole = serde_json::to_string(LIST_HOLE)?;
    let (before_text, rest) = template
        .split_once(&text_hole)
        .ok_or_else(|| Error::internal("the list template has no text hole"))?;
    let parts: Vec<&str> = rest.split(&list_hole).collect();
    let [before_threads, before_snapshots, after] = parts[..] else {
        return Err(Error::internal("the list template has not two list holes"));
    };
    let s = Streamed {
        conn: &tx,
        manager_id,
        q,
        count,
        live,
        failure: RefCell::new(None),
    };
    let mut spill = spill_dir
        .and_then(|dir| tempfile::tempfile_in(dir).ok())
        .map(|f| std::io::BufWriter::with_capacity(256 * 1024, f));
    w.write_all(b"{\"id\":")?;
    serde_json::to_writer(&mut *w, id)?;
    w.write_all(b",\"result\":")?;
    w.write_all(before_text.as_bytes())?;
    let text = serde_json::to_writer(&mut *w, &Text(&s));
    if let Some(e) = s.failure.borrow_mut().take() {
        return Err(e);
    }
    text?;
    w.write_all(before_threads.as_bytes())?;
    let spilled = snapshots(&s, w, spill.as_mut())?;
    w.write_all(before_snapshots.as_bytes())?;
    let copied = match spill.map(std::io::BufWriter::into_inner) {
        Some(Ok(mut file)) if spilled => {
            file.seek(std::io::SeekFrom::Start(0))?;
            std::io::copy(&mut file, w)?;
            true
        }
        _ => false,
    };
    if !copied {
        snapshots(&s, w, None)?;
    }
    w.write_all(after.as_bytes())?;
    w.write_all(b"}")?;
    tx.finish()?;
    Ok(())
}

/// `[snapshot, …]`: the rows in batches, each batch's output and events in two queries, each
/// snapshot serialized once and written to `w`, and to `spill` while that works. Returns
/// whether the whole list is in `spill`.
fn snapshots(
    s: &Streamed<'_>,
    w: &mut dyn Write,
    spill: Option<&mut std::io::BufWriter<std::fs::File>>,
) -> Result<bool> {
    let mut spill = spill;
    let mut put = |bytes: &[u8]| -> Result<()> {
        if let Some(f) = spill.as_deref_mut() {
            if f.write_all(bytes).is_err() {
                spill = None;
            }
        }
        Ok(w.write_all(bytes)?)
    };
    put(b"[")?;
    let mut element = Vec::with_capacity(8 * 1024);
    let mut first = true;
    let mut batch: Vec<ThreadRow> = Vec::with_capacity(BATCH);
    let mut write_batch = |batch: &mut Vec<ThreadRow>| -> Result<()> {
        for f in thread_facts(s.conn, std::mem::take(batch), Detail::Summary)? {
            element.clear();
            if !first {
                element.push(b',');
            }
            first = false;
            serde_json::to_writer(
                &mut element,
                &Projection::new(&f, Detail::Summary).snapshot(),
            )?;
            put(&element)?;
        }
        Ok(())
    };
    list::each_row(s.conn, s.manager_id, s.q, |r| {
        batch.push(ThreadRow::from_row(r)?);
        if batch.len() == BATCH {
            write_batch(&mut batch)?;
        }
        Ok(true)
    })?;
    write_batch(&mut batch)?;
    put(b"]")?;
    Ok(match spill {
        Some(f) => f.flush().is_ok(),
        None => false,
    })
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
    live: usize,
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
        header(&mut piece, s.count, s.live)?;
        let mut written: fmt::Result = Ok(());
        let pass = list::each_row(s.conn, s.manager_id, s.q, |r| {
            let text = |i| text_at(r, i);
            let _ = line(
                &mut piece,
                text(col::PATH)?,
                text(col::ID)?,
                text(col::STATUS)?,
                text(col::PHASE)?,
                text(col::NAME)?,
            );
            if piece.len() >= PIECE_BYTES {
                written = f.write_str(&piece);
                piece.clear();
            }
            Ok(written.is_ok())
        });
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
            let conn = store.read().unwrap();
            let rows = list::list_at_most(&conn, m, &q, usize::MAX)
                .unwrap()
                .unwrap();
            let want = from_memory(&thread_facts(&conn, rows, Detail::Summary).unwrap()).unwrap();
            drop(conn);
            let mut line = Vec::new();
            stream(&store, m, &q, &Value::from(7), &mut line).unwrap();
            let mut expected = b"{\"id\":7,\"result\":".to_vec();
            expected.extend_from_slice(&want);
            expected.push(b'}');
            assert!(line == expected, "{q:?}: the streamed line differs");
            // Without a spill file the rows are read twice, with the same answer.
            let mut unspilled = Vec::new();
            stream_spilling(&store, m, &q, &Value::from(7), &mut unspilled, None).unwrap();
            assert!(unspilled == expected, "{q:?}: the unspilled line differs");
            let v: Value = serde_json::from_slice(&line).unwrap();
            assert_eq!(
                v["result"]["details"]["threads"], v["result"]["details"]["snapshots"],
                "{q:?}"
            );
        }
    }
}
