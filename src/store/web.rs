//! The web view's reads (`threadbase web`, `serve/web/`): a page of one root session's tree
//! in tree order, read as a range of `thread_places_by_key` (sql/web_page.sql: the rows before
//! the page cost one index entry each, the page's rows one primary-key read each), the same
//! under a filter with each tree's count of matches (a filter on live threads reads the index of
//! live rows only), the subtree totals of a page's threads in
//! one statement, and an action's command row. A page costs three statements, whatever its
//! size and the tree's.

use crate::store::db::{params, q, Row};
use crate::store::Conn;
use std::collections::HashMap;

use crate::domain::{
    AgentState, CommandKind, CommandState, Contract, ExitKind, Phase, SessionId, ThreadId,
    ThreadStatus,
};
use crate::error::Result;
use crate::store::rows::columns;

columns! {
    /// A page's thread row's columns, in order (`{web_row}` in `sql/web_page.sql`,
    /// `sql/web_page_filtered.sql` and `sql/web_page_live.sql`, which read `thread_places p`,
    /// `threads t`, `managers m` and `thread_usage u`): what [`WebRow`] holds, read by these
    /// positions.
    pub mod col as "{web_row}" {
        THREAD_ID = "p.thread_id",
        LEVEL = "p.level",
        FOREST_PARENT_ID = "p.forest_parent_id",
        PATH = "t.path",
        MANAGER_SESSION = "m.session_id",
        CONTRACT = "m.contract",
        TASK_NAME = "t.task_name",
        NAME = "t.name",
        STATUS = "t.status",
        PHASE = "t.phase",
        AGENT_STATE = "t.agent_state",
        EXIT_KIND = "t.exit_kind",
        EXIT_CODE = "t.exit_code",
        SIGNALLED = "t.exit_signal IS NOT NULL",
        ARCHIVED = "t.archived",
        HIDDEN = "t.hidden",
        CREATED_AT = "t.created_at",
        LAST_EVENT_AT = "t.last_event_at",
        OWNER_PID = "t.owner_pid",
        OWNER_STARTED_AT = "t.owner_started_at",
        HOST_ID = "CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END",
        TOKENS = "u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens",
        COST_USD = "u.cost_usd",
        PROMPT_HEAD = "substr(t.prompt, 1, 240)",
    }
}

/// One thread of a page, as the web view shows it.
#[derive(Debug, Clone)]
pub struct WebRow {
    pub id: ThreadId,
    /// 1 at the top of the tree.
    pub level: i64,
    pub forest_parent_id: Option<String>,
    pub path: String,
    pub manager_session: String,
    pub contract: Contract,
    pub task_name: String,
    pub name: String,
    pub status: ThreadStatus,
    pub phase: Phase,
    pub agent_state: Option<AgentState>,
    pub exit_kind: Option<ExitKind>,
    pub exit_code: Option<i64>,
    pub signalled: bool,
    pub archived: bool,
    pub hidden: bool,
    pub created_at: String,
    pub last_event_at: String,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    /// The host that holds (or held) it (issue 33; its serve's, else its manager's).
    pub host_id: Option<String>,
    /// Every token the thread's messages used, and their cost.
    pub tokens: i64,
    pub cost_usd: f64,
    /// The first 240 characters of its prompt (the row shows its first line: issue 50).
    pub prompt_head: Option<String>,
}

/// Which threads a filtered page keeps. `state`, `visibility` and `contract` are the words
/// the SQL compares (`all` keeps everything); `glob` and `text` apply to the path.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebFilter {
    pub state: &'static str,
    pub visibility: &'static str,
    pub contract: &'static str,
    pub glob: Option<String>,
    pub text: Option<String>,
    /// Issue 50: the host that holds (or held) the thread, on a team database.
    pub host: Option<String>,
}

impl WebFilter {
    /// Keeps every thread: the page is then an index range (sql/web_page.sql).
    pub fn is_none(&self) -> bool {
        [self.state, self.visibility, self.contract]
            .iter()
            .all(|w| *w == "all")
            && self.glob.is_none()
            && self.text.is_none()
            && self.host.is_none()
    }
}

/// Rows `offset..offset+limit` of `root`'s tree, in tree order, kept by `filter`.
pub fn page(
    conn: &Conn,
    root: &SessionId,
    filter: &WebFilter,
    offset: i64,
    limit: i64,
) -> Result<Vec<WebRow>> {
    if filter.is_none() {
        let rows = conn
            .all(q!("web_page", col), params![root, offset, limit], read_row)?
            .into_iter()
            .map(Ok::<_, crate::error::Error>);
        return rows.collect::<Result<_>>();
    }
    // Live threads only: read from the index of live rows (few), not the tree's range.
    let sql = if filter.state == "live" {
        q!("web_page_live", col)
    } else {
        q!("web_page_filtered", col)
    };
    let rows = conn
        .all(
            sql,
            params![
                root,
                offset,
                limit,
                filter.state,
                filter.visibility,
                filter.contract,
                filter.glob,
                filter.text,
                filter.host
            ],
            read_row,
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A tree's count of threads a filter keeps (`{web_count_row}` in
    /// `sql/web_counts_filtered.sql` and `sql/web_counts_live.sql`, which read
    /// `thread_places p`), read by [`filtered_counts`].
    pub mod count_col as "{web_count_row}" {
        ROOT_SESSION = "p.root_session",
        THREADS = "count(*)",
    }
}

/// How many threads of each root session's tree `filter` keeps (one pass over every place).
pub fn filtered_counts(conn: &Conn, filter: &WebFilter) -> Result<HashMap<String, i64>> {
    let sql = if filter.state == "live" {
        q!("web_counts_live", count_col)
    } else {
        q!("web_counts_filtered", count_col)
    };
    let rows = conn
        .all(
            sql,
            params![
                filter.state,
                filter.visibility,
                filter.contract,
                filter.glob,
                filter.text,
                filter.host
            ],
            |r| Ok((r.get(count_col::ROOT_SESSION)?, r.get(count_col::THREADS)?)),
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// A thread's subtree (itself and every descendant, across managers): threads, tokens, cost.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SubtreeTotals {
    pub threads: i64,
    pub tokens: i64,
    pub cost_usd: f64,
}

columns! {
    /// A listed thread's subtree totals (`{web_subtree_totals_row}` in
    /// `sql/web_subtree_totals.sql`, which reads `thread_places a` and `thread_usage u`), read
    /// by [`subtree_totals`].
    pub mod totals_col as "{web_subtree_totals_row}" {
        THREAD_ID = "a.thread_id",
        THREADS = "count(*)",
        TOKENS = "CAST(sum(u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens) AS bigint)",
        COST_USD = "sum(u.cost_usd)",
    }
}

/// The subtree totals of `ids` (one statement), by id; an id without a place is missing.
pub fn subtree_totals(conn: &Conn, ids: &[ThreadId]) -> Result<HashMap<ThreadId, SubtreeTotals>> {
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ids = serde_json::to_string(ids)?;
    let rows = conn
        .all(q!("web_subtree_totals", totals_col), params![ids], |r| {
            Ok((
                r.get::<ThreadId>(totals_col::THREAD_ID)?,
                SubtreeTotals {
                    threads: r.get(totals_col::THREADS)?,
                    tokens: r.get::<Option<i64>>(totals_col::TOKENS)?.unwrap_or(0),
                    cost_usd: r.get::<Option<f64>>(totals_col::COST_USD)?.unwrap_or(0.0),
                },
            ))
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A command row as the web view shows it (`{web_command_row}` in `sql/web_command.sql`,
    /// which reads `commands`): what [`CommandRow`] holds.
    pub mod command_col as "{web_command_row}" {
        ID = "id",
        THREAD_ID = "thread_id",
        KIND = "kind",
        STATE = "state",
        RESULT = "result",
    }
}

/// A command row as the web view shows an action's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRow {
    pub id: i64,
    pub thread_id: String,
    pub kind: CommandKind,
    pub state: CommandState,
    pub result: Option<String>,
}

/// The command `id`, if it exists (sql/web_command.sql).
pub fn command(conn: &Conn, id: i64) -> Result<Option<CommandRow>> {
    conn.opt(q!("web_command", command_col), params![id], |r| {
        Ok(CommandRow {
            id: r.get(command_col::ID)?,
            thread_id: r.get(command_col::THREAD_ID)?,
            kind: r.get(command_col::KIND)?,
            state: r.get(command_col::STATE)?,
            result: r.get(command_col::RESULT)?,
        })
    })
}

/// A row of a page's query ([`col`]).
fn read_row(r: &Row<'_>) -> Result<WebRow> {
    Ok(WebRow {
        id: r.get(col::THREAD_ID)?,
        level: r.get(col::LEVEL)?,
        forest_parent_id: r.get(col::FOREST_PARENT_ID)?,
        path: r.get(col::PATH)?,
        manager_session: r.get(col::MANAGER_SESSION)?,
        contract: r.get(col::CONTRACT)?,
        task_name: r.get(col::TASK_NAME)?,
        name: r.get(col::NAME)?,
        status: r.get(col::STATUS)?,
        phase: r.get(col::PHASE)?,
        agent_state: r.get(col::AGENT_STATE)?,
        exit_kind: r.get(col::EXIT_KIND)?,
        exit_code: r.get(col::EXIT_CODE)?,
        signalled: r.get(col::SIGNALLED)?,
        archived: r.get(col::ARCHIVED)?,
        hidden: r.get::<Option<bool>>(col::HIDDEN)?.unwrap_or(false),
        created_at: r.get(col::CREATED_AT)?,
        last_event_at: r.get(col::LAST_EVENT_AT)?,
        owner_pid: r.get(col::OWNER_PID)?,
        owner_started_at: r.get(col::OWNER_STARTED_AT)?,
        host_id: r.get(col::HOST_ID)?,
        tokens: r.get::<Option<i64>>(col::TOKENS)?.unwrap_or(0),
        cost_usd: r.get::<Option<f64>>(col::COST_USD)?.unwrap_or(0.0),
        prompt_head: r.get(col::PROMPT_HEAD)?,
    })
}

columns! {
    /// A message sent into a thread (`{web_sent_row}` in `sql/web_thread_messages.sql`, which
    /// reads `mailbox mb`): what [`Sent`] holds.
    pub mod sent_col as "{web_sent_row}" {
        KIND = "mb.kind",
        SEND_KEY = "mb.send_key",
        BODY = "mb.body",
        STATE = "mb.state",
        CREATED_AT = "mb.created_at",
        DELIVERED_AT = "mb.delivered_at",
    }
}

/// A message sent into a thread after its prompt (issue 50): a `thread` tool send, a web
/// page's send, contract B's steer, contract C's message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sent {
    pub kind: crate::domain::MailKind,
    /// Who sent it, when the row says (a send recorded by [`super::mailbox::record_sent`]).
    pub by: Option<String>,
    pub body: String,
    pub state: crate::domain::MailState,
    pub at: String,
    pub delivered_at: Option<String>,
}

/// The messages sent into thread `id`, oldest first (at most [`MAX_SENT`]: the newest).
pub fn sent_of(conn: &Conn, id: &ThreadId) -> Result<Vec<Sent>> {
    let mut rows = conn.all(
        q!("web_thread_messages", sent_col),
        params![id, MAX_SENT],
        |r| {
            let key: Option<String> = r.get(sent_col::SEND_KEY)?;
            Ok(Sent {
                kind: r.get(sent_col::KIND)?,
                by: key.as_deref().and_then(super::mailbox::sender_of_key),
                body: r.get(sent_col::BODY)?,
                state: r.get(sent_col::STATE)?,
                at: r.get(sent_col::CREATED_AT)?,
                delivered_at: r.get(sent_col::DELIVERED_AT)?,
            })
        },
    )?;
    rows.reverse();
    Ok(rows)
}

/// The most messages a thread's detail lists (the newest).
pub const MAX_SENT: i64 = 500;

/// The whole prompt thread `id` was started with, if any.
pub fn prompt_of(conn: &Conn, id: &ThreadId) -> Result<Option<String>> {
    Ok(conn
        .opt(q!("web_thread_prompt"), params![id], |r| {
            r.get::<Option<String>>(0)
        })?
        .flatten())
}

/// A row's task as one line (issue 50): its name when it says more than its task name, else
/// the first line of its prompt, else its name.
pub fn task_line(name: &str, task_name: &str, prompt_head: Option<&str>) -> String {
    let first = prompt_head
        .and_then(|p| p.lines().map(str::trim).find(|l| !l.is_empty()))
        .map(str::to_string);
    let named = !name.is_empty() && name != task_name && name.replace(' ', "_") != task_name;
    match first {
        Some(line) if !named => line,
        _ => name.to_string(),
    }
}

columns! {
    /// A thread that needs the user, for the page's band (`{web_need_row}` in
    /// `sql/web_needs.sql`, which reads the view `thread_attention a` and `threads t`).
    pub mod need_col as "{web_need_row}" {
        THREAD_ID = "a.thread_id",
        PATH = "a.path",
        ROOT_SESSION = "a.root_session",
        ATTENTION = "a.attention",
        SINCE = "a.since",
        DETAIL = "a.detail",
        HOST_ID = "t.host_id",
    }
}

/// A thread that needs the user (issue 50's band): the view's row with its tree and host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NeedRow {
    pub id: String,
    pub path: String,
    pub root_session: String,
    pub attention: crate::domain::Attention,
    pub since: Option<String>,
    pub detail: Option<String>,
    pub host: Option<String>,
}

/// The most threads the band lists (the oldest needs first).
pub const MAX_NEEDS: i64 = 200;

/// Every thread that needs the user, oldest first; nothing before the view (V16).
pub fn needs(conn: &Conn) -> Result<Vec<NeedRow>> {
    if !super::attention::has_view(conn)? {
        return Ok(Vec::new());
    }
    conn.all(q!("web_needs", need_col), params![MAX_NEEDS], |r| {
        Ok(NeedRow {
            id: r.get(need_col::THREAD_ID)?,
            path: r.get(need_col::PATH)?,
            root_session: r.get(need_col::ROOT_SESSION)?,
            attention: r.get(need_col::ATTENTION)?,
            since: r.get(need_col::SINCE)?,
            detail: r.get(need_col::DETAIL)?,
            host: r.get(need_col::HOST_ID)?,
        })
    })
}

columns! {
    /// An event of the timeline (`{web_timeline_row}` in `sql/web_timeline_events.sql`, which
    /// reads `thread_events e`).
    pub mod timeline_col as "{web_timeline_row}" {
        THREAD_ID = "e.thread_id",
        AT = "e.at",
        TYPE = "e.type",
        DATA = "e.data",
    }
}

/// One event of a thread on the timeline.
#[derive(Debug, Clone)]
pub struct TimelineEvent {
    pub thread_id: ThreadId,
    pub at: String,
    pub kind: String,
    pub data: String,
}

/// The timeline's events of the first `limit` threads of `root`'s tree, in tree order, each
/// thread's in order.
pub fn timeline_events(conn: &Conn, root: &SessionId, limit: i64) -> Result<Vec<TimelineEvent>> {
    conn.all(
        q!("web_timeline_events", timeline_col),
        params![root, limit],
        |r| {
            Ok(TimelineEvent {
                thread_id: r.get(timeline_col::THREAD_ID)?,
                at: r.get(timeline_col::AT)?,
                kind: r.get(timeline_col::TYPE)?,
                data: r.get(timeline_col::DATA)?,
            })
        },
    )
}
