//! Contract C's rows: a managed worker is a top-level `threads` row with contract C's columns
//! (coordinator, spawn key, fingerprint, title, agent, model, grants, outcome, hidden override,
//! message ids), its keyed `mailbox` messages, its `interrupt` commands and its `reports` row.
//! Everything the worker engine reads or writes goes through here, so the engine holds no SQL.

use crate::domain::{ManagerId, SessionId, ThreadId, WorkerId};
use crate::store::db::{params, q, Query, Row};
use crate::store::Conn;

use super::reports::{self, ReportRow};
use crate::error::Result;
use crate::store::rows::columns;
use crate::time::now_iso;

columns! {
    /// Contract C's worker row's columns, in order (`{worker_row}` in `sql/worker_by_id.sql`
    /// and `sql/workers_of_coordinator{,s}.sql`, which read `threads t LEFT JOIN reports r`):
    /// what [`WorkerRow`] holds, read by these positions; its report (`{report_row}`,
    /// `store::reports::col`) follows. The outcome is the stored one, else (a process that
    /// closed before its first run ended, e.g. restored as stale) failed or interrupted.
    pub mod col as "{worker_row}" {
        ID = "t.id",
        COORDINATOR_ID = "t.coordinator_id",
        SPAWN_KEY = "t.spawn_key",
        FINGERPRINT = "t.fingerprint",
        TITLE = "t.title",
        CWD = "t.cwd",
        AGENT = "t.agent",
        MODEL = "t.model",
        ARGS = "t.args",
        OUTCOME = "CASE WHEN t.outcome IS NOT NULL THEN t.outcome WHEN t.status = 'closed' THEN CASE WHEN t.exit_kind = 'failed' THEN 'failed' ELSE 'interrupted' END END AS outcome",
        HIDDEN = "t.hidden",
        STATUS = "t.status",
        PHASE = "t.phase",
        SESSION_FILE = "t.session_file",
        OWNER_PID = "t.owner_pid",
        OWNER_STARTED_AT = "t.owner_started_at",
        OWNER_HOST = "t.host_id",
        OWNER_BOOT = "t.boot_id",
        INITIAL_MESSAGE_ID = "t.initial_message_id",
        REPORT_MESSAGE_ID = "t.report_message_id",
        PARENT_PATH = "t.parent_path",
        GRANTED_PATHS = "t.granted_paths",
    }
}

/// A worker row with its report (`sql/worker_by_id.sql`, `sql/workers_of_coordinator{,s}.sql`).
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerRow {
    pub id: ThreadId,
    pub coordinator_id: Option<SessionId>,
    pub spawn_key: Option<String>,
    pub fingerprint: Option<String>,
    pub title: Option<String>,
    pub cwd: String,
    pub agent: Option<String>,
    /// `{providerID, id, variant?}` as JSON text, when known.
    pub model: Option<String>,
    /// The agent profile's Pi args (the parsed JSON array).
    pub args: Vec<String>,
    /// The stored outcome, else one derived from a closed process (see the SQL).
    pub outcome: Option<Outcome>,
    /// The hidden override.
    pub hidden: Option<bool>,
    pub status: ThreadStatus,
    pub phase: Phase,
    pub session_file: Option<String>,
    pub owner_pid: Option<i64>,
    pub owner_started_at: Option<i64>,
    pub owner_host: Option<String>,
    pub owner_boot: Option<String>,
    pub initial_message_id: Option<String>,
    pub report_message_id: Option<String>,
    pub parent_path: Option<String>,
    /// The granted paths as a JSON array, when the spawn named any.
    pub granted_paths: Option<String>,
    pub report: Option<ReportRow>,
}

impl WorkerRow {
    /// Maps a row of a worker query ([`col`], then [`reports::col`]).
    fn from_row(r: &Row<'_>) -> Result<Self> {
        let args: String = r.get(col::ARGS)?;
        Ok(WorkerRow {
            id: r.get(col::ID)?,
            coordinator_id: r.get(col::COORDINATOR_ID)?,
            spawn_key: r.get(col::SPAWN_KEY)?,
            fingerprint: r.get(col::FINGERPRINT)?,
            title: r.get(col::TITLE)?,
            cwd: r.get(col::CWD)?,
            agent: r.get(col::AGENT)?,
            model: r.get(col::MODEL)?,
            args: serde_json::from_str(&args).unwrap_or_default(),
            outcome: r.get(col::OUTCOME)?,
            hidden: r.get(col::HIDDEN)?,
            status: r.get(col::STATUS)?,
            phase: r.get(col::PHASE)?,
            session_file: r.get(col::SESSION_FILE)?,
            owner_pid: r.get(col::OWNER_PID)?,
            owner_started_at: r.get(col::OWNER_STARTED_AT)?,
            owner_host: r.get(col::OWNER_HOST)?,
            owner_boot: r.get(col::OWNER_BOOT)?,
            initial_message_id: r.get(col::INITIAL_MESSAGE_ID)?,
            report_message_id: r.get(col::REPORT_MESSAGE_ID)?,
            parent_path: r.get(col::PARENT_PATH)?,
            granted_paths: r.get(col::GRANTED_PATHS)?,
            report: ReportRow::from_row(r, col::COUNT)?,
        })
    }
}

fn query_workers(conn: &Conn, sql: &Query, param: &str) -> Result<Vec<WorkerRow>> {
    let rows = conn
        .all(sql, params![param], WorkerRow::from_row)?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<Vec<_>>>()
}

/// One worker by id (a row with a coordinator and a spawn key).
pub fn worker_by_id(conn: &Conn, id: &WorkerId) -> Result<Option<WorkerRow>> {
    conn.opt(
        q!("worker_by_id", col, reports::col),
        params![id],
        WorkerRow::from_row,
    )
}

/// Every worker of one coordinator, hidden ones included, oldest first.
pub fn workers_of_coordinator(conn: &Conn, coordinator_id: &SessionId) -> Result<Vec<WorkerRow>> {
    query_workers(
        conn,
        q!("workers_of_coordinator", col, reports::col),
        coordinator_id.as_str(),
    )
}

/// The workers of several coordinators, oldest first, in one query.
pub fn workers_of_coordinators(
    conn: &Conn,
    coordinator_ids: &[SessionId],
) -> Result<Vec<WorkerRow>> {
    query_workers(
        conn,
        q!("workers_of_coordinators", col, reports::col),
        &serde_json::to_string(coordinator_ids)?,
    )
}

/// Gives every hidden worker of the coordinators the hidden override `false`.
pub fn restore_hidden(conn: &Conn, coordinator_ids: &[SessionId]) -> Result<()> {
    conn.execute(
        q!("workers_restore_hidden"),
        params![serde_json::to_string(coordinator_ids)?, now_iso()],
    )?;
    Ok(())
}

/// Whether a session id is itself a managed worker.
pub fn is_worker(conn: &Conn, id: &SessionId) -> Result<bool> {
    conn.one(q!("worker_caller_is_worker"), params![id], |r| r.get(0))
}

columns! {
    /// What an idempotent spawn compares (`{worker_identity_row}` in
    /// `sql/worker_identity.sql`, which reads `threads`): what [`WorkerIdentity`] holds.
    pub mod identity_col as "{worker_identity_row}" {
        COORDINATOR_ID = "coordinator_id",
        FINGERPRINT = "fingerprint",
    }
}

/// What an idempotent spawn compares: the coordinator and request fingerprint of a worker id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerIdentity {
    pub coordinator_id: Option<SessionId>,
    pub fingerprint: Option<String>,
}

/// The identity stored for a thread id, if such a thread exists.
pub fn identity(conn: &Conn, id: &WorkerId) -> Result<Option<WorkerIdentity>> {
    conn.opt(q!("worker_identity", identity_col), params![id], |r| {
        Ok(WorkerIdentity {
            coordinator_id: r.get(identity_col::COORDINATOR_ID)?,
            fingerprint: r.get(identity_col::FINGERPRINT)?,
        })
    })
}

/// The slots a coordinator's workers hold (see `sql/worker_slots_used.sql`).
pub fn slots_used(conn: &Conn, coordinator_id: &SessionId) -> Result<i64> {
    conn.one(q!("worker_slots_used"), params![coordinator_id], |r| {
        r.get(0)
    })
}

/// A worker to reserve: a top-level row at `/<id>` under its coordinator's manager.
#[derive(Debug, Clone, Copy)]
pub struct NewWorker<'a> {
    pub id: &'a WorkerId,
    pub manager_id: ManagerId,
    pub title: &'a str,
    pub cwd: &'a str,
    pub args: &'a [String],
    pub coordinator_id: &'a SessionId,
    pub spawn_key: &'a str,
    pub fingerprint: &'a str,
    pub agent: Option<&'a str>,
    pub granted_paths: Option<&'a [String]>,
    /// The model JSON text, when the args name one.
    pub model: Option<&'a str>,
    pub initial_message_id: &'a str,
    pub report_message_id: &'a str,
    pub now: &'a str,
}

/// Reserves a worker row (live, `starting`): a top-level row at `/<workerID>` under its
/// coordinator's worker manager, its own session id.
pub fn insert_worker(conn: &Conn, w: &NewWorker<'_>) -> Result<()> {
    let text = |s: &str| Some(s.to_string());
    let row = super::threads::NewThread {
        id: w.id.thread_id(),
        manager_id: w.manager_id,
        path: format!("/{}", w.id),
        task_name: w.id.to_string(),
        name: w.title.to_string(),
        cwd: w.cwd.to_string(),
        args: w.args.to_vec(),
        session_id: text(w.id.as_str()),
        coordinator_id: text(w.coordinator_id.as_str()),
        spawn_key: text(w.spawn_key),
        fingerprint: text(w.fingerprint),
        title: text(w.title),
        agent: w.agent.map(str::to_string),
        model: w.model.map(str::to_string),
        granted_paths: w.granted_paths.map(serde_json::to_string).transpose()?,
        initial_message_id: text(w.initial_message_id),
        report_message_id: text(w.report_message_id),
        ..Default::default()
    };
    super::threads::insert_thread_at(conn, &row, w.now)
}

/// Sets a worker's hidden override.
pub fn set_hidden(conn: &Conn, id: &ThreadId, hidden: bool) -> Result<()> {
    conn.execute(q!("worker_set_hidden"), params![id, hidden, now_iso()])?;
    Ok(())
}

/// After an admitted send: a reported worker is shown (override 0), else the override goes.
pub fn unhide_after_send(conn: &Conn, id: &ThreadId) -> Result<()> {
    conn.execute(q!("worker_unhide_after_send"), params![id, now_iso()])?;
    Ok(())
}

pub use crate::domain::Outcome;
use crate::domain::{ExitKind, Phase, ThreadStatus};

/// Records how a worker's last run ended.
pub fn set_outcome(conn: &Conn, id: &ThreadId, outcome: Outcome) -> Result<()> {
    conn.execute(q!("worker_set_outcome"), params![id, outcome, now_iso()])?;
    Ok(())
}

/// Before a relaunch: a closed worker keeps the outcome that was only derived so far.
pub fn keep_outcome(conn: &Conn, id: &ThreadId) -> Result<()> {
    conn.execute(q!("worker_keep_outcome"), params![id])?;
    Ok(())
}

columns! {
    /// Where a worker's model comes from (`{worker_model_source_row}` in
    /// `sql/worker_model_source.sql`, which reads `threads`): what [`ModelSource`] holds.
    pub mod model_source_col as "{worker_model_source_row}" {
        KNOWN = "model IS NOT NULL",
        SESSION_FILE = "session_file",
    }
}

/// Where a worker's model comes from: whether it is known yet, and its session file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSource {
    pub known: bool,
    pub session_file: Option<String>,
}

/// The model source of a thread, if it exists.
pub fn model_source(conn: &Conn, id: &ThreadId) -> Result<Option<ModelSource>> {
    conn.opt(
        q!("worker_model_source", model_source_col),
        params![id],
        |r| {
            Ok(ModelSource {
                known: r.get(model_source_col::KNOWN)?,
                session_file: r.get(model_source_col::SESSION_FILE)?,
            })
        },
    )
}

/// Records the model (JSON text) the worker's session reported, unless one is known.
pub fn set_model(conn: &Conn, id: &ThreadId, model: &str) -> Result<()> {
    conn.execute(q!("worker_set_model"), params![id, model])?;
    Ok(())
}

columns! {
    /// A thread's run bookkeeping (`{worker_run_marks_row}` in `sql/worker_run_marks.sql`,
    /// which reads `threads t`): what [`RunMarks`] holds.
    pub mod run_marks_col as "{worker_run_marks_row}" {
        LAST_SEQ = "t.last_seq",
        INTERRUPT_COMMAND = "coalesce((SELECT max(c.id) FROM commands c WHERE c.thread_id = t.id AND c.kind = 'interrupt'), 0)",
        STATUS = "t.status",
        EXIT_KIND = "t.exit_kind",
    }
}

/// A thread's run bookkeeping (`sql/worker_run_marks.sql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunMarks {
    pub last_seq: i64,
    /// The newest `interrupt` command's id (0 when none).
    pub interrupt_command: i64,
    pub status: ThreadStatus,
    pub exit_kind: Option<ExitKind>,
}

/// A thread's run bookkeeping now.
pub fn run_marks(conn: &Conn, id: &ThreadId) -> Result<RunMarks> {
    conn.one(q!("worker_run_marks", run_marks_col), params![id], |r| {
        Ok(RunMarks {
            last_seq: r.get(run_marks_col::LAST_SEQ)?,
            interrupt_command: r.get(run_marks_col::INTERRUPT_COMMAND)?,
            status: r.get(run_marks_col::STATUS)?,
            exit_kind: r.get(run_marks_col::EXIT_KIND)?,
        })
    })
}

columns! {
    /// What a thread's events after a seq show (`{worker_activity_row}` in
    /// `sql/worker_activity_since.sql`, which reads `thread_events`): what [`Activity`] holds.
    pub mod activity_col as "{worker_activity_row}" {
        SEQ = "coalesce(max(seq), ?2)",
        ACTIVE = "coalesce(max(CASE WHEN type IN ('turn_started', 'turn_completed', 'assistant_message', 'tool_started', 'tool_completed', 'thread_error') THEN 1 ELSE 0 END), 0)",
        ERRORED = "coalesce(max(CASE WHEN type = 'thread_error' THEN 1 ELSE 0 END), 0)",
    }
}

/// A thread's events after a seq (`sql/worker_activity_since.sql`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Activity {
    /// The newest seq (the given one when nothing came since).
    pub seq: i64,
    /// Whether an event shows model activity: a run happened.
    pub active: bool,
    /// Whether one is a `thread_error`.
    pub errored: bool,
}

/// What a thread's events after `seq` show.
pub fn activity_since(conn: &Conn, id: &ThreadId, seq: i64) -> Result<Activity> {
    conn.one(
        q!("worker_activity_since", activity_col),
        params![id, seq],
        |r| {
            Ok(Activity {
                seq: r.get(activity_col::SEQ)?,
                active: r.get(activity_col::ACTIVE)?,
                errored: r.get(activity_col::ERRORED)?,
            })
        },
    )
}

// ---- mailbox (written through store::mailbox::insert) --------------------------------------

columns! {
    /// A stored keyed message (`{worker_keyed_message_row}` in
    /// `sql/worker_mailbox_by_key.sql`, which reads `mailbox`): what [`KeyedMessage`] holds.
    pub mod keyed_col as "{worker_keyed_message_row}" {
        MESSAGE_ID = "message_id",
        BODY = "body",
    }
}

/// A stored keyed message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedMessage {
    pub message_id: Option<String>,
    pub body: String,
}

/// The message a thread holds under `send_key` (an error when there is none).
pub fn message_by_key(conn: &Conn, thread_id: &ThreadId, send_key: &str) -> Result<KeyedMessage> {
    conn.one(
        q!("worker_mailbox_by_key", keyed_col),
        params![thread_id, send_key],
        |r| {
            Ok(KeyedMessage {
                message_id: r.get(keyed_col::MESSAGE_ID)?,
                body: r.get(keyed_col::BODY)?,
            })
        },
    )
}

columns! {
    /// A worker's pending message (`{worker_pending_message_row}` in
    /// `sql/worker_pending_messages.sql`, which reads `mailbox`): what [`PendingMessage`] holds.
    pub mod pending_col as "{worker_pending_message_row}" {
        ID = "id",
        BODY = "body",
    }
}

/// A message admitted for a worker and not yet accepted by its process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingMessage {
    /// The mailbox row id.
    pub id: i64,
    pub body: String,
}

/// A worker's pending messages, in order.
pub fn pending_messages(conn: &Conn, thread_id: &ThreadId) -> Result<Vec<PendingMessage>> {
    let rows = conn
        .all(
            q!("worker_pending_messages", pending_col),
            params![thread_id],
            |r| {
                Ok(PendingMessage {
                    id: r.get(pending_col::ID)?,
                    body: r.get(pending_col::BODY)?,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<Vec<_>>>()
}

/// Marks a pending message delivered.
pub fn mark_delivered(conn: &Conn, message: i64) -> Result<()> {
    conn.execute(q!("worker_mailbox_delivered"), params![message, now_iso()])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::mailbox::{self, Direction, MailKind, NewMail};
    use crate::store::reports::{insert_report, NewReport};
    use crate::store::threads::{upsert_manager, Contract, ManagerSpec};
    use crate::store::Store;

    /// What spawn, send and report write reads back through the typed rows, by every query
    /// that returns a worker (they select the same columns, read by their declared positions).
    #[test]
    fn a_worker_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("t.sqlite")).unwrap();
        let now = "2026-01-01T00:00:00.000Z";
        let (worker, coordinator) = (WorkerId::new("ses_w"), SessionId::new("ses_c"));
        let thread = worker.thread_id();
        let prompt = |body| NewMail {
            thread_id: &thread,
            direction: Direction::ToChild,
            kind: MailKind::Prompt,
            send_key: "spawn",
            message_id: Some("m1"),
            body,
            recipient: None,
            at: now,
            delivered: false,
        };
        store
            .write(|tx| {
                let manager_id =
                    upsert_manager(tx, &ManagerSpec::new(&coordinator, Contract::Worker, "/"))?;
                insert_worker(
                    tx,
                    &NewWorker {
                        id: &worker,
                        manager_id,
                        title: "T",
                        cwd: "/w",
                        args: &["--model".to_string(), "p/m".to_string()],
                        coordinator_id: &coordinator,
                        spawn_key: "k",
                        fingerprint: &"f".repeat(64),
                        agent: None,
                        granted_paths: Some(&["/w/a".to_string()]),
                        model: Some(r#"{"providerID":"p","id":"m"}"#),
                        initial_message_id: "m1",
                        report_message_id: "m2",
                        now,
                    },
                )?;
                assert!(mailbox::insert(tx, &prompt("go"))?.is_some());
                assert!(mailbox::insert(tx, &prompt("other"))?.is_none());
                insert_report(
                    tx,
                    &NewReport {
                        worker_id: &worker,
                        verdict: "PASS",
                        summary: "done",
                        evidence: &["a".to_string()],
                        message_id: "m2",
                        now,
                    },
                )
            })
            .unwrap();
        let conn = store.read().unwrap();
        let w = worker_by_id(&conn, &worker).unwrap().unwrap();
        assert_eq!(w.coordinator_id.as_ref(), Some(&coordinator));
        assert_eq!(w.spawn_key.as_deref(), Some("k"));
        assert_eq!(w.args, ["--model", "p/m"]);
        assert_eq!(w.granted_paths.as_deref(), Some(r#"["/w/a"]"#));
        assert_eq!((w.status.as_str(), w.phase.as_str()), ("live", "starting"));
        assert_eq!(
            w.report,
            Some(ReportRow {
                verdict: "PASS".into(),
                summary: "done".into(),
                evidence: vec!["a".into()],
            })
        );
        let all = workers_of_coordinators(&conn, std::slice::from_ref(&coordinator)).unwrap();
        assert_eq!(all, [w]);
        assert_eq!(workers_of_coordinator(&conn, &coordinator).unwrap(), all);
        assert_eq!(message_by_key(&conn, &thread, "spawn").unwrap().body, "go");
        let pending = pending_messages(&conn, &thread).unwrap();
        assert_eq!(pending.len(), 1);
        assert!(is_worker(&conn, &SessionId::new("ses_w")).unwrap());
        assert_eq!(
            slots_used(&conn, &coordinator).unwrap(),
            0,
            "a reported worker frees its slot"
        );
    }
}
