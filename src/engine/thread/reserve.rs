//! Reserving a new thread (start and fork): the depth and live-count limits, a unique task
//! name and path chosen inside the reserving transaction, the child's cwd, argv and session
//! file, and closing a reservation whose launch failed.

use crate::domain::{ExitKind, ManagerId, SessionId, ThreadId};
use crate::store::{Conn, Tx};
use std::path::{Path, PathBuf};

use serde_json::json;

use super::Engine;
use crate::contract::{args as argpolicy, naming};
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::{LaunchSpec, StartKind};
use crate::store::events::{self, NewEvent};
use crate::store::{launches, threads};
use crate::time::now_iso;

pub(super) fn check_depth(e: &Engine) -> Result<()> {
    check_depth_at(e, e.cfg.depth)
}

/// A child of a thread at `depth` may be launched (the caller's depth for its own children).
pub(super) fn check_depth_at(e: &Engine, depth: i64) -> Result<()> {
    let l = e.cfg.settings.limits;
    if depth >= l.max_depth {
        return Err(Error::new(
            ErrorCode::Limit,
            format!(
                "pi-threads recursion depth {depth} has reached PI_THREADS_MAX_DEPTH={}. Repair: do the work in this thread, or raise PI_THREADS_MAX_DEPTH for the parent.",
                l.max_depth
            ),
        ));
    }
    Ok(())
}

pub(super) fn check_live_count(e: &Engine, conn: &Conn) -> Result<()> {
    check_live_count_of(e, conn, e.manager_id)
}

/// PI_THREADS_MAX_THREADS holds per manager: `manager_id`'s live threads.
pub(super) fn check_live_count_of(e: &Engine, conn: &Conn, manager_id: ManagerId) -> Result<()> {
    let live = threads::count_live(conn, manager_id)?;
    let max = e.cfg.settings.limits.max_threads;
    if live >= max {
        let idle = threads::live_idle(conn, manager_id, SHOWN_IDLE + 1)?;
        return Err(Error::new(
            ErrorCode::Limit,
            limit_message(
                live,
                max,
                &idle,
                e.cfg.settings.timers.idle_cleanup.is_some(),
            ),
        ));
    }
    Ok(())
}

/// Idle threads named in the live-limit refusal.
const SHOWN_IDLE: usize = 5;

/// The live-limit refusal: the original's first sentence, then the idle threads that hold
/// slots (a live thread stays live, idle, until stopped, unless idle cleanup is on), and what
/// frees a slot.
fn limit_message(live: i64, max: i64, idle: &[threads::IdleThread], cleanup_on: bool) -> String {
    let mut m = format!("pi-threads live thread limit reached: {live}/{max}.");
    if !idle.is_empty() {
        let shown: Vec<String> = idle
            .iter()
            .take(SHOWN_IDLE)
            .map(|t| format!("{} ({}, idle since {})", t.path, t.id, t.since))
            .collect();
        let more = if idle.len() > SHOWN_IDLE { ", …" } else { "" };
        m.push_str(&format!(
            " Idle threads hold slots until they are stopped (each is a Pi process): {}{more}.",
            shown.join(", ")
        ));
        m.push_str(
            " Repair: stop the idle threads you no longer need (action \"stop\" with their id), or wait for a busy one to close, or raise PI_THREADS_MAX_THREADS",
        );
        if !cleanup_on {
            m.push_str("; PI_THREADS_IDLE_CLEANUP_MS (off by default) stops idle threads after that many milliseconds");
        }
        m.push('.');
    } else {
        m.push_str(" Repair: wait for a live thread to close (wait on it), stop one you no longer need, or raise PI_THREADS_MAX_THREADS.");
    }
    m
}

/// The caller's own thread id, when the caller is a managed thread recorded in this database.
pub(super) fn parent_thread_id(e: &Engine, conn: &Conn) -> Result<Option<ThreadId>> {
    let Some(id) = &e.cfg.self_id else {
        return Ok(None);
    };
    Ok(threads::thread_exists(conn, id)?.then(|| id.clone()))
}

/// Picks the task name inside the reserving transaction: an explicit one must be free; a
/// generated one probes `_2`, `_3`, … with one indexed lookup each.
pub(super) fn choose_task_name(
    e: &Engine,
    tx: &Tx<'_>,
    explicit: Option<&str>,
    base: &str,
) -> Result<(String, String)> {
    let parent = &e.cfg.scope_path;
    if let Some(t) = explicit {
        let path = format!("{parent}/{t}");
        if threads::path_taken(tx, e.manager_id, &path)? {
            let id = threads::thread_id_at_path(tx, e.manager_id, &path)?.unwrap_or_default();
            return Err(Error::conflict(format!(
                "Thread path already exists: {path} (id: {id}). Repair: choose a unique start.taskName for this parent, or omit taskName so pi-threads generates a unique lower_snake_case path segment."
            )));
        }
        return Ok((t.to_string(), path));
    }
    let mut failure = None;
    let name = naming::unique_task_name(base, |candidate| {
        match threads::path_taken(tx, e.manager_id, &format!("{parent}/{candidate}")) {
            Ok(taken) => taken,
            Err(err) => {
                failure = Some(err);
                true
            }
        }
    });
    if let Some(err) = failure {
        return Err(err);
    }
    let name = name.ok_or_else(|| naming::unique_name_error(parent))?;
    let path = format!("{parent}/{name}");
    Ok((name, path))
}

pub(super) fn resolve_cwd(e: &Engine, cwd: Option<&str>) -> Result<PathBuf> {
    let Some(given) = cwd else {
        return Ok(e.cfg.cwd.clone());
    };
    let p = Path::new(given);
    let full = if p.is_absolute() {
        p.to_path_buf()
    } else {
        e.cfg.cwd.join(p)
    };
    match std::fs::metadata(&full) {
        Ok(m) if m.is_dir() => Ok(dunce::canonicalize(&full).unwrap_or(full)),
        Ok(_) => Err(Error::invalid(format!(
            "Invalid child cwd: {} is not a directory. Repair: pass an existing directory, relative to the parent cwd {}, or omit cwd.",
            full.display(),
            e.cfg.cwd.display()
        ))),
        Err(err) => Err(Error::invalid(format!(
            "Invalid child cwd: {} does not exist ({err}). Repair: pass an existing directory, relative to the parent cwd {}, or omit cwd.",
            full.display(),
            e.cfg.cwd.display()
        ))),
    }
}

/// The child's argv for its stored args, cwd and session file.
pub(super) fn child_argv(
    e: &Engine,
    args: &[String],
    cwd: &Path,
    session: &Path,
    name: &str,
) -> Result<Vec<String>> {
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    let merged = argpolicy::merge_args(&inherited, args)?;
    let approve = argpolicy::should_approve(e.cfg.trusted, &e.cfg.cwd, cwd);
    Ok(crate::pi::flags::child_argv(
        &e.cfg.pi_command,
        &merged,
        Some(session),
        name,
        approve,
    ))
}

pub(super) fn new_session_file(
    e: &Engine,
    cwd: &Path,
    parent_session: Option<&Path>,
) -> Result<(PathBuf, SessionId)> {
    let session_id = SessionId::new(crate::pi::session::uuid_v7());
    let path = e
        .child_session_dir()
        .join(crate::pi::session::session_file_name(
            &now_iso(),
            session_id.as_str(),
        ));
    crate::pi::session::write_header_only(&path, session_id.as_str(), cwd, parent_session)?;
    Ok((path, session_id))
}

/// A reserved thread whose launch failed before the runtime recorded anything is closed as
/// failed, so no live row claims a process that never existed.
pub(super) fn close_unlaunched(e: &Engine, id: &ThreadId, message: &str) -> Result<()> {
    e.store.write(|tx| {
        if launches::close_unlaunched(tx, id, message)? {
            let data = json!({"exit": {"kind": ExitKind::Failed, "message": message}}).to_string();
            events::append(
                tx,
                id,
                &[NewEvent {
                    at: &now_iso(),
                    kind: "thread_closed",
                    data: &data,
                }],
            )?;
        }
        Ok(())
    })
}

/// What `start` and `fork` check before reserving a child: the depth limit, the live count
/// (checked again inside the reservation) and the child's own args.
pub(super) fn check_new_child(e: &Engine, args: &[String]) -> Result<()> {
    check_depth(e)?;
    // With the queue on, a start over the limit is queued (the reservation decides).
    if !e.cfg.settings.queue {
        check_live_count(e, &e.store.read()?)?;
    }
    argpolicy::validate_child_args(args)?;
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    argpolicy::merge_args(&inherited, args)?;
    Ok(())
}

/// The first step of a reservation, inside its transaction: the live count and the budget
/// hold for `verb`, and a free task name and path (`(task, path)`).
pub(super) fn claim_path(
    e: &Engine,
    tx: &Tx<'_>,
    verb: &str,
    task_name: Option<&str>,
    base: &str,
) -> Result<(String, String)> {
    check_live_count(e, tx)?;
    crate::engine::budget::check_budget(e, tx, None, verb)?;
    choose_task_name(e, tx, task_name, base)
}

/// [`claim_path`] for a start with `THREADBASE_QUEUE=1`: when every slot is taken, or threads
/// wait in the queue already (none jumps it), the start is queued instead of refused (`true`);
/// the budget and a free task name hold either way.
pub(super) fn claim_path_or_queue(
    e: &Engine,
    tx: &Tx<'_>,
    task_name: Option<&str>,
    base: &str,
) -> Result<(String, String, bool)> {
    let max = e.cfg.settings.limits.max_threads;
    let full = crate::store::queue::Slots::Live.must_wait(tx, e.manager_id, max)?;
    if !full {
        let (task, path) = claim_path(e, tx, "start", task_name, base)?;
        return Ok((task, path, false));
    }
    crate::engine::budget::check_budget(e, tx, None, "start")?;
    let (task, path) = choose_task_name(e, tx, task_name, base)?;
    Ok((task, path, true))
}

/// A child of this session's thread, as a reservation inserts it (live, starting).
pub(super) struct Child<'a> {
    pub id: &'a ThreadId,
    pub task: &'a str,
    pub path: &'a str,
    pub name: &'a str,
    pub cwd: &'a Path,
    pub args: &'a [String],
    pub prompt: Option<&'a str>,
    /// The session file and id it starts on, when known at the reservation (a fork's branch).
    pub session: Option<(&'a Path, &'a SessionId)>,
}

/// Inserts `child`'s row, in the reserving transaction.
pub(super) fn insert_child(e: &Engine, tx: &Tx<'_>, child: &Child<'_>) -> Result<()> {
    threads::insert_thread(
        tx,
        &threads::NewThread {
            id: child.id.clone(),
            manager_id: e.manager_id,
            path: child.path.to_string(),
            parent_path: Some(e.cfg.scope_path.clone()),
            parent_id: parent_thread_id(e, tx)?,
            task_name: child.task.to_string(),
            name: child.name.to_string(),
            depth: e.cfg.depth + 1,
            cwd: child.cwd.display().to_string(),
            args: child.args.to_vec(),
            prompt: child.prompt.map(str::to_string),
            session_file: child.session.map(|(f, _)| f.display().to_string()),
            session_id: child.session.map(|(_, id)| id.to_string()),
            ..Default::default()
        },
    )
}

/// How a reserved child of this manager launches: `argv` in `cwd`, starting with `start`,
/// its place (`path`, `depth`) in its environment.
pub(super) fn child_launch(
    e: &Engine,
    id: &ThreadId,
    path: &str,
    depth: i64,
    argv: Vec<String>,
    cwd: &Path,
    start: StartKind,
) -> LaunchSpec {
    LaunchSpec {
        thread_id: id.clone(),
        argv,
        cwd: cwd.to_path_buf(),
        env: e.child_env(id, path, depth),
        clear_env: false,
        start,
    }
}

/// Awaits a reserved child's launch: on failure its row is closed as failed (no live row then
/// claims a process that never existed); on success the runtime's writes are flushed so the
/// answer reads them.
pub(super) async fn launched<T>(
    e: &Engine,
    id: &ThreadId,
    launch: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match launch.await {
        Ok(outcome) => {
            e.rt.flush().await;
            Ok(outcome)
        }
        Err(err) => {
            close_unlaunched(e, id, &err.message)?;
            Err(err)
        }
    }
}
