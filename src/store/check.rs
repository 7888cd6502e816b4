//! The queries of `threadbase check` (`sql/check_*.sql`), one each, and their rows: what a
//! problem is, its code, severity, message and repair are the rules' (`src/check/`), which
//! call these functions on a read-only connection.

use crate::domain::Phase;
use crate::error::Result;
use crate::store::db::{params, q, Row};
use crate::store::rows::columns;
use crate::store::Conn;

// The rows of the checks' queries, one declaration each (the problem a row makes is the
// rule's, in `src/check/`), and the owners two of them end with.

columns! {
    /// Threads of one manager that share a path (`{check_duplicate_path_row}` in
    /// `sql/check_duplicate_paths.sql`, which reads `threads`).
    pub mod duplicate_path_col as "{check_duplicate_path_row}" {
        MANAGER_ID = "manager_id",
        PATH = "path",
        THREADS = "count(*)",
        IDS = "string_agg(id, ', ')",
    }
}

columns! {
    /// A missing thread's events (`{check_orphan_events_row}` in
    /// `sql/check_orphan_events.sql`, which reads `thread_events e`).
    pub mod orphan_events_col as "{check_orphan_events_row}" {
        THREAD_ID = "e.thread_id",
        EVENTS = "count(*)",
        LO = "min(e.seq)",
        HI = "max(e.seq)",
    }
}

columns! {
    /// An event whose seq goes back in time (`{check_event_order_row}` in
    /// `sql/check_event_order.sql`, which reads its windowed `thread_events`).
    pub mod event_order_col as "{check_event_order_row}" {
        THREAD_ID = "thread_id",
        PREV_SEQ = "prev_seq",
        PREV_AT = "prev_at",
        SEQ = "seq",
        AT = "at",
    }
}

columns! {
    /// A thread whose last_seq is behind its events (`{check_last_seq_row}` in
    /// `sql/check_last_seq.sql`, which reads `threads t JOIN (…) e`).
    pub mod last_seq_col as "{check_last_seq_row}" {
        ID = "t.id",
        PATH = "t.path",
        LAST_SEQ = "t.last_seq",
        MAX_SEQ = "e.max_seq",
    }
}

columns! {
    /// A thread whose path is not its parent's and its name (`{check_path_shape_row}` in
    /// `sql/check_path_shape.sql`, which reads `threads`).
    pub mod path_shape_col as "{check_path_shape_row}" {
        ID = "id",
        PATH = "path",
        PARENT_PATH = "parent_path",
        TASK_NAME = "task_name",
    }
}

columns! {
    /// A thread whose parent link is wrong, and what it names (`{check_parent_link_row}` in
    /// `sql/check_parent_links.sql`, which reads `threads c JOIN managers m LEFT JOIN threads
    /// p`).
    pub mod parent_link_col as "{check_parent_link_row}" {
        ID = "c.id",
        PATH = "c.path",
        PARENT_ID = "c.parent_id",
        PARENT_PATH = "c.parent_path",
        FOUND = "p.id",
        SAME_MANAGER = "p.manager_id = c.manager_id OR p.id IS NOT DISTINCT FROM m.self_thread_id",
        FOUND_PATH = "p.path",
    }
}

columns! {
    /// A thread without its place or usage row (`{check_usage_rows_row}` in
    /// `sql/check_usage_rows.sql`, which reads `threads t LEFT JOIN thread_places p LEFT JOIN
    /// thread_usage u`).
    pub mod usage_rows_col as "{check_usage_rows_row}" {
        ID = "t.id",
        PATH = "t.path",
        NO_PLACE = "p.thread_id IS NULL",
        NO_USAGE = "u.thread_id IS NULL",
    }
}

columns! {
    /// A tree whose total drifted from its threads' rows (`{check_usage_totals_row}` in
    /// `sql/check_usage_totals.sql`, which reads its `pairs`): the stored total, then the sums.
    pub mod usage_totals_col as "{check_usage_totals_row}" {
        ROOT_SESSION = "root_session",
        T_THREADS = "t_threads",
        T_TOKENS = "t_tokens",
        T_COST = "t_cost",
        S_THREADS = "s_threads",
        S_TOKENS = "s_in + s_out + s_cr + s_cw",
        S_COST = "s_cost",
    }
}

columns! {
    /// A closed thread without an exit kind (`{check_closed_without_exit_row}` in
    /// `sql/check_closed_without_exit.sql`, which reads `threads`).
    pub mod closed_without_exit_col as "{check_closed_without_exit_row}" {
        ID = "id",
        PATH = "path",
    }
}

columns! {
    /// A pending mailbox row of a closed thread (`{check_stale_mailbox_row}`, then
    /// `{check_owners_row}`, in `sql/check_stale_mailbox.sql`, which reads `mailbox mb JOIN
    /// threads t JOIN managers m`).
    pub mod stale_mailbox_col as "{check_stale_mailbox_row}" {
        ID = "mb.id",
        THREAD_ID = "mb.thread_id",
        PATH = "t.path",
        DIRECTION = "mb.direction",
        KIND = "mb.kind",
        SESSION_ID = "m.session_id",
    }
}

columns! {
    /// A command nobody will finish (`{check_stale_command_row}`, then `{check_owners_row}`, in
    /// both parts of `sql/check_stale_commands.sql`, which read `commands c JOIN threads t JOIN
    /// managers m`).
    pub mod stale_command_col as "{check_stale_command_row}" {
        ID = "c.id",
        THREAD_ID = "c.thread_id",
        PATH = "t.path",
        KIND = "c.kind",
        STATE = "c.state",
    }
}

columns! {
    /// The serves that could deliver a stale row: its thread's owner and its manager's
    /// (`{check_owners_row}`, after the row in `sql/check_stale_mailbox.sql` and
    /// `sql/check_stale_commands.sql`, which read `threads t JOIN managers m`), read by
    /// [`owners_alive`].
    pub mod owners_col as "{check_owners_row}" {
        THREAD_OWNER_PID = "t.owner_pid",
        THREAD_OWNER_STARTED_AT = "t.owner_started_at",
        MANAGER_OWNER_PID = "m.owner_pid",
        MANAGER_OWNER_STARTED_AT = "m.owner_started_at",
        THREAD_OWNER_HOST = "t.host_id",
        THREAD_OWNER_BOOT = "t.boot_id",
        MANAGER_OWNER_HOST = "m.host_id",
        MANAGER_OWNER_BOOT = "m.boot_id",
    }
}

columns! {
    /// The rows checked per table (`{check_counts_row}` in `sql/check_counts.sql`).
    pub mod counts_col as "{check_counts_row}" {
        MANAGERS = "(SELECT count(*) FROM managers)",
        THREADS = "(SELECT count(*) FROM threads)",
        LIVE_THREADS = "(SELECT count(*) FROM threads WHERE status = 'live')",
        EVENTS = "(SELECT count(*) FROM thread_events)",
        MAILBOX = "(SELECT count(*) FROM mailbox)",
        COMMANDS = "(SELECT count(*) FROM commands)",
    }
}

columns! {
    /// A live thread, its process and the serve that holds it (`{check_live_thread_row}` in
    /// `sql/check_live_threads.sql`, which reads `threads t JOIN managers m`): what
    /// `Checker::live_threads`'s `Live` holds.
    pub mod live_thread_col as "{check_live_thread_row}" {
        ID = "t.id",
        PATH = "t.path",
        PHASE = "t.phase",
        PID = "t.pid",
        OWNER_PID = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_pid ELSE m.owner_pid END AS owner_pid",
        OWNER_STARTED_AT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.owner_started_at ELSE m.owner_started_at END AS owner_started_at",
        AGE = "(julianday('now') - julianday(t.created_at)) * 86400.0 AS age_s",
        SESSION_ID = "m.session_id",
        PROCESS_STARTED_AT = "t.process_started_at",
        OWNER_HOST = "CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id",
        OWNER_BOOT = "CASE WHEN t.owner_pid IS NOT NULL THEN t.boot_id ELSE m.boot_id END AS boot_id",
    }
}

/// How many of threadbase's tables the database holds (`sql/check_is_threadbase.sql`): the
/// first read, which parses the file's header and schema.
pub fn tables(conn: &Conn) -> Result<i64> {
    conn.one(q!("check_is_threadbase"), params![], |r| r.get(0))
}

/// A check whose rows are each one problem (or none): its query, read with the row declaration
/// [`each`] names.
#[derive(Clone, Copy, Debug)]
pub enum Look {
    DuplicatePaths,
    OrphanEvents,
    EventOrder,
    LastSeq,
    PathShape,
    ParentLinks,
    UsageRows,
    UsageTotals,
    ClosedWithoutExit,
    StaleMailbox,
    StaleCommands,
}

/// Hands each row of `look`'s query to `f`, in order.
pub fn each(conn: &Conn, look: Look, f: impl FnMut(&Row<'_>) -> Result<()>) -> Result<()> {
    let q = match look {
        Look::DuplicatePaths => q!("check_duplicate_paths", duplicate_path_col),
        Look::OrphanEvents => q!("check_orphan_events", orphan_events_col),
        Look::EventOrder => q!("check_event_order", event_order_col),
        Look::LastSeq => q!("check_last_seq", last_seq_col),
        Look::PathShape => q!("check_path_shape", path_shape_col),
        Look::ParentLinks => q!("check_parent_links", parent_link_col),
        Look::UsageRows => q!("check_usage_rows", usage_rows_col),
        Look::UsageTotals => q!("check_usage_totals", usage_totals_col),
        Look::ClosedWithoutExit => q!("check_closed_without_exit", closed_without_exit_col),
        Look::StaleMailbox => q!("check_stale_mailbox", stale_mailbox_col, owners_col),
        Look::StaleCommands => q!("check_stale_commands", stale_command_col, owners_col),
    };
    conn.each(q, params![], f)
}

/// The rows of each counted table (`sql/check_counts.sql`), by the report's names.
pub fn counts(conn: &Conn) -> Result<Vec<(&'static str, i64)>> {
    use counts_col as c;
    let tables = [
        ("managers", c::MANAGERS),
        ("threads", c::THREADS),
        ("live_threads", c::LIVE_THREADS),
        ("events", c::EVENTS),
        ("mailbox", c::MAILBOX),
        ("commands", c::COMMANDS),
    ];
    conn.one(q!("check_counts", counts_col), params![], |r| {
        tables
            .iter()
            .map(|&(table, at)| Ok((table, r.get::<i64>(at)?)))
            .collect()
    })
}

/// A live thread with what judges its owner and its process (`sql/check_live_threads.sql`).
pub struct LiveThread {
    pub id: String,
    pub path: String,
    pub phase: Phase,
    pub pid: Option<i64>,
    pub owner_pid: Option<i64>,
    pub owner_started: Option<i64>,
    /// Seconds since the row was created.
    pub age: Option<f64>,
    pub session: String,
    pub process_started: Option<i64>,
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
}

/// Every live thread ([`LiveThread`]).
pub fn live_threads(conn: &Conn) -> Result<Vec<LiveThread>> {
    conn.all(q!("check_live_threads", live_thread_col), params![], |r| {
        use live_thread_col as c;
        Ok(LiveThread {
            id: r.get(c::ID)?,
            path: r.get(c::PATH)?,
            phase: r.get(c::PHASE)?,
            pid: r.get(c::PID)?,
            owner_pid: r.get(c::OWNER_PID)?,
            owner_started: r.get(c::OWNER_STARTED_AT)?,
            age: r.get(c::AGE)?,
            session: r.get(c::SESSION_ID)?,
            process_started: r.get(c::PROCESS_STARTED_AT)?,
            owner_host: r.get(c::OWNER_HOST)?,
            owner_boot: r.get(c::OWNER_BOOT)?,
        })
    })
}
