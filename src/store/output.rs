//! Typed access to `thread_output`: what a thread's snapshot shows besides its row and events.

use crate::store::db::{params, q, Row};
use crate::store::Conn;

use crate::domain::ThreadId;
use crate::error::Result;
use crate::store::rows::columns;
use crate::store::{batch_col, ThreadIds};

columns! {
    /// A thread's retained output, in order (`{output_row}` in `sql/output_of_thread.sql` and,
    /// after the batch's `{batch_row}`, `sql/outputs_of_threads.sql`, which read
    /// `thread_output`): what [`OutputFacts`] holds, read by these positions.
    pub mod col as "{output_row}" {
        LAST_ASSISTANT_TEXT = "last_assistant_text",
        LAST_PARTIAL_TEXT = "last_partial_text",
        STDERR_TAIL = "stderr_tail",
        STDERR_DROPPED = "stderr_dropped",
        SESSION_NAME = "session_name",
        PENDING_MESSAGE_COUNT = "pending_message_count",
    }
}

/// A thread's retained output (`thread_output`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputFacts {
    pub last_assistant_text: Option<String>,
    pub last_partial_text: Option<String>,
    /// The last retained stderr bytes (at most 12,000).
    pub stderr_tail: Vec<u8>,
    /// Bytes cut before `stderr_tail`.
    pub stderr_dropped: i64,
    /// The child's session name, from its last `get_state` answer (`sessionName`).
    pub session_name: Option<String>,
    /// The child's pending message count, from its last `get_state` answer.
    pub pending_message_count: Option<i64>,
}

impl OutputFacts {
    /// The [`col`] row that starts at position `first` of `r`.
    pub(in crate::store) fn from_row(r: &Row<'_>, first: usize) -> Result<OutputFacts> {
        Ok(OutputFacts {
            last_assistant_text: r.get(first + col::LAST_ASSISTANT_TEXT)?,
            last_partial_text: r.get(first + col::LAST_PARTIAL_TEXT)?,
            stderr_tail: r.get(first + col::STDERR_TAIL)?,
            stderr_dropped: r.get(first + col::STDERR_DROPPED)?,
            session_name: r.get(first + col::SESSION_NAME)?,
            pending_message_count: r.get(first + col::PENDING_MESSAGE_COUNT)?,
        })
    }
}

/// A thread's retained output; empty when none was recorded yet.
pub fn of_thread(conn: &Conn, id: &ThreadId) -> Result<OutputFacts> {
    Ok(conn
        .opt(q!("output_of_thread", col), params![id], |r| {
            OutputFacts::from_row(r, 0)
        })?
        .unwrap_or_default())
}

/// The retained output of the threads `ids`, in its order
/// (one query whatever their number); empty for a thread with none.
pub fn of_threads(conn: &Conn, ids: &ThreadIds) -> Result<Vec<OutputFacts>> {
    let mut outs = vec![OutputFacts::default(); ids.len()];
    conn.by_position(
        q!("outputs_of_threads", batch_col, col),
        ids,
        &mut outs,
        |r| OutputFacts::from_row(r, batch_col::COUNT),
    )?;
    Ok(outs)
}

// ---- the runtime's writes --------------------------------------------------------------------

/// A launched thread's output row, created empty if it has none.
pub fn ensure(conn: &Conn, id: &ThreadId) -> Result<()> {
    conn.execute(q!("output_ensure"), params![id])?;
    Ok(())
}

/// The last completed assistant message's text (it replaces the partial one).
pub fn set_assistant(conn: &Conn, id: &ThreadId, text: &str) -> Result<()> {
    conn.execute(q!("output_set_assistant"), params![id, text])?;
    Ok(())
}

/// The text of the assistant message still streaming.
pub fn set_partial(conn: &Conn, id: &ThreadId, text: &str) -> Result<()> {
    conn.execute(q!("output_set_partial"), params![id, text])?;
    Ok(())
}

/// The last turn's error (`None`: a new turn began), at `at`.
pub fn set_turn_error(conn: &Conn, id: &ThreadId, error: Option<&str>, at: &str) -> Result<()> {
    conn.execute(
        q!("output_set_turn_error"),
        params![id, error, error.map(|_| at)],
    )?;
    Ok(())
}

/// When the child last said anything.
pub fn set_activity(conn: &Conn, id: &ThreadId, at: &str) -> Result<()> {
    conn.execute(q!("output_set_activity"), params![id, at])?;
    Ok(())
}

/// Whether a turn is under way.
pub fn set_turn_open(conn: &Conn, id: &ThreadId, open: bool) -> Result<()> {
    conn.execute(q!("output_set_turn_open"), params![id, open])?;
    Ok(())
}

/// The child's session name and pending message count, from its last `get_state` answer.
pub fn set_session_state(
    conn: &Conn,
    id: &ThreadId,
    name: Option<&str>,
    pending: Option<i64>,
) -> Result<()> {
    conn.execute(q!("output_set_session_state"), params![id, name, pending])?;
    Ok(())
}

columns! {
    /// A thread's retained stderr (`{output_stderr_row}` in `sql/output_get_stderr.sql`, which
    /// reads `thread_output`), read by [`append_stderr`].
    pub mod stderr_col as "{output_stderr_row}" {
        TAIL = "stderr_tail",
        DROPPED = "stderr_dropped",
    }
}

/// Appends stderr bytes to the retained tail, keeping its last `keep` bytes (and counting the
/// ones cut).
pub fn append_stderr(conn: &Conn, id: &ThreadId, bytes: &[u8], keep: usize) -> Result<()> {
    let (mut tail, mut dropped): (Vec<u8>, i64) = conn
        .opt(q!("output_get_stderr", stderr_col), params![id], |r| {
            Ok((r.get(stderr_col::TAIL)?, r.get(stderr_col::DROPPED)?))
        })?
        .unwrap_or((Vec::new(), 0));
    tail.extend_from_slice(bytes);
    if tail.len() > keep {
        let cut = tail.len() - keep;
        dropped += cut as i64;
        tail.drain(..cut);
    }
    conn.execute(q!("output_set_stderr"), params![id, tail, dropped])?;
    Ok(())
}
