//! Contract A's nine actions, one function per verb, on top of the store and the runtime.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{named_params, Connection, Transaction};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::remote::{self, CommandKind, Holder, Outcome};
use super::Engine;
use crate::contract::projection::{Detail, Projection, ThreadFacts};
use crate::contract::thread::{Details, ListTarget, Single, SnapshotJson, ThreadRequest};
use crate::contract::{args as argpolicy, format, naming, ToolResult};
use crate::error::{Error, ErrorCode, Result};
use crate::list::{ListQuery, Subtree};
use crate::output::Reply;
use crate::refs::{resolve, resolve_list_filter, RefScope};
use crate::runtime::{LaunchSpec, SendMode, StartKind};
use crate::store::events::{self, NewEvent};
use crate::store::snapshots::{self, View};
use crate::store::threads::{insert_thread, query_threads, thread_by_id_any, NewThread, ThreadRow};
use crate::time::now_iso;

/// Timeout of the `get_state` refresh a poll or send makes.
const REFRESH_TIMEOUT: Duration = Duration::from_millis(1_500);
/// Pause between refreshes while waiting.
const WAIT_STEP: Duration = Duration::from_millis(250);

pub(super) async fn run(
    e: &Engine,
    req: ThreadRequest,
    progress: &(dyn Fn(&Details<'_>) + Send + Sync),
) -> Result<Reply> {
    match req {
        ThreadRequest::Start {
            prompt,
            name,
            task_name,
            args,
            cwd,
        } => start(e, prompt, name, task_name, args, cwd).await,
        ThreadRequest::List {
            state,
            visibility,
            target,
        } => list_threads(e, state, visibility, target),
        ThreadRequest::Poll { id, detail } => poll(e, &id, detail).await,
        ThreadRequest::Send { id, message, mode } => send(e, &id, &message, mode).await,
        ThreadRequest::Stop { id, force } => stop(e, &id, force).await,
        ThreadRequest::Wait {
            id,
            detail,
            timeout_ms,
        } => wait(e, &id, detail, timeout_ms, progress).await,
        ThreadRequest::Resume { id } => resume(e, &id).await,
        ThreadRequest::Fork {
            id,
            entry_id,
            position,
            name,
            task_name,
            args,
        } => fork(e, id, entry_id, position, name, task_name, args).await,
        ThreadRequest::Archive { id, archived } => archive(e, &id, archived),
    }
}

fn scope(e: &Engine) -> RefScope<'_> {
    RefScope {
        manager_id: e.manager_id,
        current_path: &e.cfg.scope_path,
        self_id: e.cfg.self_id.as_deref(),
    }
}

fn find(e: &Engine, reference: &str) -> Result<ThreadRow> {
    let conn = e.store.read()?;
    resolve(&conn, scope(e), reference)
}

/// `{content: [{type: text, text}], details}`, serialized.
fn reply(text: &str, details: Details<'_>) -> Result<Reply> {
    Reply::json(&ToolResult::new(text, details))
}

// ---- limits and names ---------------------------------------------------------------------

fn check_depth(e: &Engine) -> Result<()> {
    check_depth_at(e, e.cfg.depth)
}

/// A child of a thread at `depth` may be launched (the caller's depth for its own children).
fn check_depth_at(e: &Engine, depth: i64) -> Result<()> {
    let l = e.cfg.limits;
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

fn check_live_count(e: &Engine, conn: &Connection) -> Result<()> {
    check_live_count_of(e, conn, e.manager_id)
}

/// PI_THREADS_MAX_THREADS holds per manager: `manager_id`'s live threads.
fn check_live_count_of(e: &Engine, conn: &Connection, manager_id: i64) -> Result<()> {
    let live: i64 = conn
        .prepare_cached(include_str!("../../sql/count_live.sql"))?
        .query_row([manager_id], |r| r.get(0))?;
    let max = e.cfg.limits.max_threads;
    if live >= max {
        return Err(Error::new(
            ErrorCode::Limit,
            format!(
                "pi-threads live thread limit reached: {live}/{max}. Repair: stop or wait for a live thread to close, or raise PI_THREADS_MAX_THREADS."
            ),
        ));
    }
    Ok(())
}

/// The caller's own thread id, when the caller is a managed thread recorded in this database.
fn parent_thread_id(e: &Engine, conn: &Connection) -> Result<Option<String>> {
    let Some(id) = &e.cfg.self_id else {
        return Ok(None);
    };
    let known: bool = conn
        .prepare_cached(include_str!("../../sql/thread_exists.sql"))?
        .query_row([id], |r| r.get(0))?;
    Ok(known.then(|| id.clone()))
}

fn path_taken(conn: &Connection, manager_id: i64, path: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(include_str!("../../sql/path_taken.sql"))?
        .query_row((manager_id, path), |r| r.get(0))?)
}

/// Picks the task name inside the reserving transaction: an explicit one must be free; a
/// generated one probes `_2`, `_3`, … with one indexed lookup each.
fn choose_task_name(
    e: &Engine,
    tx: &Transaction<'_>,
    explicit: Option<&str>,
    base: &str,
) -> Result<(String, String)> {
    let parent = &e.cfg.scope_path;
    if let Some(t) = explicit {
        let path = format!("{parent}/{t}");
        if path_taken(tx, e.manager_id, &path)? {
            let id: String = tx
                .prepare_cached(include_str!("../../sql/thread_id_at_path.sql"))?
                .query_row((e.manager_id, &path), |r| r.get(0))?;
            return Err(Error::conflict(format!(
                "Thread path already exists: {path} (id: {id}). Repair: choose a unique start.taskName for this parent, or omit taskName so pi-threads generates a unique lower_snake_case path segment."
            )));
        }
        return Ok((t.to_string(), path));
    }
    let mut failure = None;
    let name = naming::unique_task_name(base, |candidate| {
        match path_taken(tx, e.manager_id, &format!("{parent}/{candidate}")) {
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

fn resolve_cwd(e: &Engine, cwd: Option<&str>) -> Result<PathBuf> {
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
fn child_argv(
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

fn new_session_file(
    e: &Engine,
    cwd: &Path,
    parent_session: Option<&Path>,
) -> Result<(PathBuf, String)> {
    let session_id = crate::pi::session::uuid_v7();
    let path = e
        .child_session_dir()
        .join(crate::pi::session::session_file_name(
            &now_iso(),
            &session_id,
        ));
    crate::pi::session::write_header_only(&path, &session_id, cwd, parent_session)?;
    Ok((path, session_id))
}

// ---- start ----------------------------------------------------------------------------------

async fn start(
    e: &Engine,
    prompt: String,
    name: Option<String>,
    task_name: Option<String>,
    args: Vec<String>,
    cwd: Option<String>,
) -> Result<Reply> {
    check_depth(e)?;
    check_live_count(e, &*e.store.read()?)?;
    argpolicy::validate_child_args(&args)?;
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    argpolicy::merge_args(&inherited, &args)?;
    let cwd = resolve_cwd(e, cwd.as_deref())?;
    let id = crate::ids::new_thread_id();
    let short = &id[7..13];
    let base = naming::base_task_name(name.as_deref(), Some(&prompt), short);
    let depth = e.cfg.depth + 1;
    // From the insert on, the thread is starting: a send or wait meanwhile waits for its child.
    let _launching = e.rt.reserve_launch(&id);
    // Reserve the path: limits, uniqueness and the insert in one transaction.
    let (_task, path, display) = e.store.write(|tx| {
        check_live_count(e, tx)?;
        e.check_budget(tx, None, "start")?;
        let (task, path) = choose_task_name(e, tx, task_name.as_deref(), &base)?;
        let display = naming::display_name(name.as_deref(), Some(&prompt), Some(&task), short);
        insert_thread(
            tx,
            &NewThread {
                id: id.clone(),
                manager_id: e.manager_id,
                path: path.clone(),
                parent_path: Some(e.cfg.scope_path.clone()),
                parent_id: parent_thread_id(e, tx)?,
                task_name: task.clone(),
                name: display.clone(),
                depth,
                cwd: cwd.display().to_string(),
                args: args.clone(),
                status: "live",
                phase: "starting",
                prompt: Some(prompt.clone()),
                ..Default::default()
            },
        )?;
        Ok((task, path, display))
    })?;
    let launched = async {
        let (session, session_id) = new_session_file(e, &cwd, e.cfg.session_file.as_deref())?;
        e.store.write(|tx| {
            tx.prepare_cached(include_str!("../../sql/thread_set_session.sql"))?.execute(named_params! {
                ":file": session.display().to_string(), ":session_id": session_id, ":at": now_iso(), ":id": id,
            })?;
            Ok(())
        })?;
        let argv = child_argv(e, &args, &cwd, &session, &display)?;
        e.rt.launch(LaunchSpec {
            thread_id: id.clone(),
            argv,
            cwd: cwd.clone(),
            env: e.child_env(&id, &path, depth),
            clear_env: false,
            start: StartKind::Prompt(prompt.clone()),
        })
        .await
    }
    .await;
    let outcome = match launched {
        Ok(o) => o,
        Err(err) => {
            close_unlaunched(e, &id, &err.message)?;
            return Err(err);
        }
    };
    e.rt.flush().await;
    let facts = e.facts(&id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = format::started(&snap, outcome.prompt_accepted, outcome.note.as_deref());
    reply(
        &text,
        Details::Started {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            prompt_accepted: outcome.prompt_accepted,
            note: outcome.note.as_deref(),
        },
    )
}

/// A reserved thread whose launch failed before the runtime recorded anything is closed as
/// failed, so no live row claims a process that never existed.
fn close_unlaunched(e: &Engine, id: &str, message: &str) -> Result<()> {
    e.store.write(|tx| {
        let n = tx
            .prepare_cached(include_str!("../../sql/thread_close_unlaunched.sql"))?
            .execute((id, message, now_iso()))?;
        if n > 0 {
            let data = json!({"exit": {"kind": "failed", "message": message}}).to_string();
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

// ---- list -----------------------------------------------------------------------------------

fn list_threads(
    e: &Engine,
    state: crate::list::StateFilter,
    visibility: crate::list::VisibilityFilter,
    target: Option<ListTarget>,
) -> Result<Reply> {
    let subtree = {
        let conn = e.store.read()?;
        match target {
            Some(ListTarget::Parent(p)) => {
                Subtree::ChildrenOf(resolve_list_filter(&conn, scope(e), &p)?)
            }
            Some(ListTarget::Ancestor(a)) => {
                Subtree::DescendantsOf(resolve_list_filter(&conn, scope(e), &a)?)
            }
            None => Subtree::Everything,
        }
    };
    super::listing::reply(
        e,
        ListQuery {
            state,
            visibility,
            subtree,
        },
    )
}

// ---- poll -----------------------------------------------------------------------------------

async fn refresh_if_live(e: &Engine, id: &str) -> Option<bool> {
    if !e.rt.is_live(id) {
        return None;
    }
    let idle =
        e.rt.refresh(id, REFRESH_TIMEOUT)
            .await
            .ok()
            .map(|(idle, _)| idle);
    e.rt.flush().await;
    idle
}

/// A thread this serve does not hold is read from its rows; one whose serve is gone is
/// restored (closed as stale) first, so its rows say what is true.
fn settle_if_orphaned(e: &Engine, id: &str) -> Result<()> {
    if remote::holder(e, id)? == Holder::Orphaned {
        remote::restore_orphans(e)?;
    }
    Ok(())
}

async fn poll(e: &Engine, reference: &str, detail: Detail) -> Result<Reply> {
    let row = {
        let conn = e.store.read()?;
        let row = resolve(&conn, scope(e), reference)?;
        // A closed thread's answer changes only with its rows: a cached one is current.
        if !row.is_live() {
            if let Some((json, _)) = snapshots::cached(&conn, &row.id, View::Poll, detail.as_str())?
            {
                return Ok(Reply::Json(json.into_bytes()));
            }
        }
        row
    };
    if row.is_live() && refresh_if_live(e, &row.id).await.is_none() {
        settle_if_orphaned(e, &row.id)?;
    }
    let facts = e.facts(&row.id)?;
    if !facts.row.is_live() {
        e.cache.missed([(facts.row.id.clone(), View::Poll, detail)]);
    }
    Ok(Reply::Json(poll_result(&facts, detail)?))
}

/// A poll's result JSON: the headline and the snapshot at `detail` (also what the snapshot
/// cache keeps for a closed thread, see engine/cache.rs).
pub(super) fn poll_result(facts: &ThreadFacts, detail: Detail) -> Result<Vec<u8>> {
    let projection = Projection::new(facts, detail);
    let snap = projection.snapshot();
    let mut json = Vec::with_capacity(8 * 1024);
    serde_json::to_writer(
        &mut json,
        &ToolResult::new(
            &format::polled(&projection, &snap),
            Details::Polled {
                thread: Single::of(&SnapshotJson::new(&snap)?),
            },
        ),
    )?;
    Ok(json)
}

// ---- send -----------------------------------------------------------------------------------

/// A send's payload in a `commands` row for the serve that holds the thread.
#[derive(Debug, Serialize, Deserialize)]
struct SendPayload {
    message: String,
    /// None: the owner picks `prompt` (idle) or `follow_up`.
    mode: Option<SendMode>,
}

/// What a send did, as the owner records it.
#[derive(Debug, Serialize, Deserialize)]
struct SendDone {
    mode: SendMode,
    accepted: Option<bool>,
    error: Option<String>,
}

fn closed_error(reference: &str, row: &ThreadRow) -> Error {
    Error::new(
        ErrorCode::Closed,
        format!("Thread is closed: {reference}. Repair: resume it first with {{ \"action\": \"resume\", \"id\": \"{}\" }}, or start a new thread.", row.path),
    )
}

async fn send(e: &Engine, reference: &str, message: &str, mode: Option<SendMode>) -> Result<Reply> {
    let row = find(e, reference)?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    let (done, via) = match remote::holder(e, &row.id)? {
        Holder::Here => (send_here(e, &row, message, mode).await?, None),
        Holder::Elsewhere(owner) => {
            let payload = serde_json::to_string(&SendPayload {
                message: message.to_string(),
                mode,
            })?;
            let outcome =
                remote::request(e, &row.id, CommandKind::Send, Some(&payload), owner).await?;
            let done = match outcome {
                Outcome::Done(text) => serde_json::from_str::<SendDone>(&text)?,
                Outcome::Failed(err) => return Err(err),
                Outcome::Withdrawn(why) => {
                    settle_if_orphaned(e, &row.id)?;
                    return Err(remote::not_carried_out(&row.path, "send", why));
                }
                // Contract A's answer to a send whose answer did not come in time.
                Outcome::StillRunning => SendDone {
                    mode: mode.unwrap_or(SendMode::FollowUp),
                    accepted: None,
                    error: Some(format!(
                        "Timed out waiting for the serve that holds {} to finish the send. It was handed over and may still be delivered; poll or wait before retrying.",
                        row.path
                    )),
                },
            };
            (done, Some(owner))
        }
        Holder::Orphaned => {
            remote::restore_orphans(e)?;
            return Err(closed_error(reference, &row));
        }
        Holder::NotLive => return Err(closed_error(reference, &row)),
    };
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let mode = done.mode;
    let mut text = format::sent(&snap, mode, done.accepted, done.error.as_deref());
    if let Some(owner) = via {
        text.push_str(&held_by(owner));
    }
    reply(
        &text,
        Details::Sent {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            mode,
            accepted: done.accepted,
            error: done.error.as_deref(),
        },
    )
}

/// The line a result's text ends with when another serve carried the action out (a
/// threadbase addition: pi-threads has one process per manager).
fn held_by(owner: crate::runtime::process::ProcessIdentity) -> String {
    format!(
        "\nNote: carried out by the serve that holds it (pid {}).",
        owner.pid
    )
}

/// A send to a child this serve holds.
async fn send_here(
    e: &Engine,
    row: &ThreadRow,
    message: &str,
    mode: Option<SendMode>,
) -> Result<SendDone> {
    e.check_budget(&*e.store.read()?, Some(&row.id), "send")?;
    refresh_if_live(e, &row.id).await;
    let phase = e.rt.watch(&row.id).map(|v| v.borrow().phase);
    let mode = match mode {
        Some(mode) => mode,
        None if phase == Some(crate::runtime::mapping::Phase::Idle) => SendMode::Prompt,
        None => SendMode::FollowUp,
    };
    let outcome = e.rt.send(&row.id, mode, message).await?;
    e.rt.flush().await;
    Ok(SendDone {
        mode,
        accepted: outcome.accepted,
        error: outcome.error,
    })
}

// ---- stop -----------------------------------------------------------------------------------

async fn stop(e: &Engine, reference: &str, force: bool) -> Result<Reply> {
    let row = find(e, reference)?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    let (was_live, note) = match remote::holder(e, &row.id)? {
        Holder::Elsewhere(owner) => {
            let kind = if force {
                CommandKind::ForceStop
            } else {
                CommandKind::Stop
            };
            match remote::request(e, &row.id, kind, None, owner).await? {
                Outcome::Done(result) => (result != STOP_ALREADY_CLOSED, held_by(owner)),
                Outcome::Failed(err) => return Err(err),
                Outcome::Withdrawn(remote::Withdrawn::NotPickedUp) => {
                    return Err(remote::not_carried_out(
                        &row.path,
                        "stop",
                        remote::Withdrawn::NotPickedUp,
                    ))
                }
                // Gone or closed meanwhile: there is nothing left to stop.
                Outcome::Withdrawn(_) => {
                    settle_if_orphaned(e, &row.id)?;
                    (false, String::new())
                }
                Outcome::StillRunning => return Err(remote::still_running(&row.path, "stop")),
            }
        }
        Holder::Orphaned => {
            remote::restore_orphans(e)?;
            (false, String::new())
        }
        Holder::Here | Holder::NotLive => (e.rt.stop(&row.id, force).await?, String::new()),
    };
    e.rt.flush().await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = format::stopped(&snap, !was_live) + &note;
    reply(
        &text,
        Details::Stopped {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            already_closed: !was_live,
        },
    )
}

/// A stop command's result when the thread was closed already (`threadbase top` and
/// `threadbase stop` read the same texts).
pub const STOP_ALREADY_CLOSED: &str = "already closed";

// ---- wait -----------------------------------------------------------------------------------

async fn wait(
    e: &Engine,
    reference: &str,
    detail: Detail,
    timeout_ms: u64,
    progress: &(dyn Fn(&Details<'_>) + Send + Sync),
) -> Result<Reply> {
    let row = find(e, reference)?;
    let started = Instant::now();
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    if e.rt.watch(&row.id).is_none() {
        match remote::holder(e, &row.id)? {
            Holder::Elsewhere(_) => {
                return wait_on_rows(e, &row, detail, timeout_ms, started, progress).await
            }
            Holder::Orphaned => remote::restore_orphans(e)?,
            Holder::Here | Holder::NotLive => {}
        }
    }
    let deadline = started + Duration::from_millis(timeout_ms);
    let timed_out = loop {
        let Some(mut view) = e.rt.watch(&row.id) else {
            break false;
        };
        if view.borrow().closed {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        let remaining = deadline - now;
        let idle =
            e.rt.refresh(&row.id, REFRESH_TIMEOUT.min(remaining))
                .await
                .map(|(idle, _)| idle)
                .unwrap_or(false);
        e.rt.flush().await;
        report_waiting(e, &row.id, started, detail, progress)?;
        if idle || view.borrow().closed {
            break false;
        }
        let pause = WAIT_STEP.min(deadline.saturating_duration_since(Instant::now()));
        let _ = tokio::time::timeout(pause, view.wait_for(|v| v.closed)).await;
    };
    e.rt.flush().await;
    waited(e, &row.id, detail, timed_out, started)
}

/// `wait`'s progress notification: the thread's snapshot so far at the wait's detail, with
/// `running`, `detail` and `nextSuggestedActions` as in every single-thread result.
fn report_waiting(
    e: &Engine,
    id: &str,
    started: Instant,
    detail: Detail,
    progress: &(dyn Fn(&Details<'_>) + Send + Sync),
) -> Result<()> {
    let facts = e.facts(id)?;
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    let json = SnapshotJson::new(&snap)?;
    progress(&Details::Waiting {
        thread: Single::of(&json),
        waited_ms: started.elapsed().as_millis() as u64,
    });
    Ok(())
}

/// `wait`'s answer.
fn waited(
    e: &Engine,
    id: &str,
    detail: Detail,
    timed_out: bool,
    started: Instant,
) -> Result<Reply> {
    let facts = e.facts(id)?;
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    let waited = started.elapsed().as_millis() as u64;
    let text = format::waited(&projection, &snap, timed_out, waited);
    reply(
        &text,
        Details::Waited {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            timed_out,
            waited_ms: waited,
        },
    )
}

/// How often a wait on a thread another serve holds reads its rows.
const ROW_WAIT_POLL: Duration = Duration::from_millis(50);

/// `wait` on a thread another serve holds: its rows are read until they say closed, or idle
/// with no send to it still being carried out (the holding serve writes the phase its own
/// refreshes and the child's events give), or until the deadline. Progress goes out every
/// [`WAIT_STEP`], as with a child of this serve.
async fn wait_on_rows(
    e: &Engine,
    row: &ThreadRow,
    detail: Detail,
    timeout_ms: u64,
    started: Instant,
    progress: &(dyn Fn(&Details<'_>) + Send + Sync),
) -> Result<Reply> {
    let deadline = started + Duration::from_millis(timeout_ms);
    let mut next_progress = Instant::now();
    let timed_out = loop {
        if remote::holder(e, &row.id)? == Holder::Orphaned {
            remote::restore_orphans(e)?;
        }
        let now_row =
            thread_by_id_any(&*e.store.read()?, &row.id)?.ok_or_else(|| gone_meanwhile(&row.id))?;
        if !now_row.is_live() {
            break false;
        }
        let now = Instant::now();
        if now >= deadline {
            break true;
        }
        if now_row.phase == crate::runtime::mapping::Phase::Idle.as_str()
            && !send_under_way(e, &row.id)?
        {
            break false;
        }
        if now >= next_progress {
            report_waiting(e, &row.id, started, detail, progress)?;
            next_progress = now + WAIT_STEP;
        }
        tokio::time::sleep(ROW_WAIT_POLL.min(deadline.saturating_duration_since(now))).await;
    };
    waited(e, &row.id, detail, timed_out, started)
}

fn send_under_way(e: &Engine, id: &str) -> Result<bool> {
    Ok(e.store
        .read()?
        .prepare_cached(include_str!("../../sql/command_send_under_way.sql"))?
        .query_row([id], |r| r.get(0))?)
}

fn gone_meanwhile(id: &str) -> Error {
    Error::new(
        ErrorCode::UnknownReference,
        format!("Unknown thread: {id} (it was removed meanwhile). Repair: list the threads and use a current id."),
    )
}

// ---- resume ---------------------------------------------------------------------------------

/// What a resume did, as the serve that carried it out records it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ResumeDone {
    already_live: bool,
    file: Option<String>,
    note: Option<String>,
}

async fn resume(e: &Engine, reference: &str) -> Result<Reply> {
    let row = find(e, reference)?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    let mut via = None;
    let done = match remote::holder(e, &row.id)? {
        Holder::Here => ResumeDone {
            already_live: true,
            file: None,
            note: None,
        },
        Holder::Elsewhere(owner) => {
            via = Some(owner);
            ResumeDone {
                already_live: true,
                file: None,
                note: None,
            }
        }
        holder => {
            if holder == Holder::Orphaned {
                remote::restore_orphans(e)?;
            }
            let row = thread_by_id_any(&*e.store.read()?, &row.id)?
                .ok_or_else(|| gone_meanwhile(&row.id))?;
            if row.manager_id == e.manager_id {
                resume_here(e, &row, Place::Own).await?
            } else if let Some(owner) = remote::manager_owner(e, row.manager_id)? {
                // The serve of the manager it belongs to is alive: that serve resumes it.
                via = Some(owner);
                match remote::request(e, &row.id, CommandKind::Resume, None, owner).await? {
                    Outcome::Done(text) => serde_json::from_str::<ResumeDone>(&text)?,
                    Outcome::Failed(err) => return Err(err),
                    Outcome::Withdrawn(remote::Withdrawn::OwnerGone) => {
                        // Gone meanwhile: this serve takes the thread over, as below.
                        via = None;
                        resume_here(e, &row, Place::Below).await?
                    }
                    Outcome::Withdrawn(why) => {
                        return Err(remote::not_carried_out(&row.path, "resume", why))
                    }
                    Outcome::StillRunning => {
                        return Err(remote::still_running(&row.path, "resume"))
                    }
                }
            } else {
                // Nobody manages it any more: this serve becomes its owner (restore rules).
                resume_here(e, &row, Place::Below).await?
            }
        }
    };
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let mut text = format::resumed(&snap, done.already_live);
    if let Some(note) = &done.note {
        text.push_str(&format!("\nNote: {note}"));
    }
    if let Some(owner) = via {
        text.push_str(&held_by(owner));
    }
    reply(
        &text,
        Details::Resumed {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            already_live: done.already_live,
        },
    )
}

/// Whose place a resumed thread takes in this serve: one of its own manager's threads
/// (launched as a child of this session), or a descendant below it whose manager's serve is
/// gone, which this serve takes over (launched in its own place in the tree, with the flags
/// its ancestors would have passed down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Own,
    Below,
}

/// Launches a closed thread again on its saved session file, in this serve. Resumes run one
/// at a time, so two at once launch one process and the second finds it live (no lock is
/// held while a request waits for another serve).
async fn resume_here(e: &Engine, row: &ThreadRow, place: Place) -> Result<ResumeDone> {
    let _one_at_a_time = e.relaunch.lock().await;
    if e.rt.is_live(&row.id) {
        return Ok(ResumeDone {
            already_live: true,
            file: None,
            note: None,
        });
    }
    let Some(file) = row.session_file.clone() else {
        return Err(Error::new(
            ErrorCode::NotResumable,
            format!(
                "Cannot resume {}: no saved Pi session file is known for this thread. Repair: fork it or start a new thread instead.",
                row.path
            ),
        ));
    };
    if !Path::new(&file).exists() {
        return Err(Error::new(
            ErrorCode::NotResumable,
            format!(
                "Cannot resume managed thread: saved Pi session file does not exist: {file}. Repair: start a new thread; the old session history is gone."
            ),
        ));
    }
    // A file that is there but cannot be a Pi session (a folder, garbage, empty) would start a
    // child that fails or silently starts over: refuse before launching anything.
    if let Err(err) = crate::pi::session::SessionFile::read(&file) {
        return Err(Error::new(
            ErrorCode::NotResumable,
            format!("Cannot resume managed thread {}: {}", row.path, err.message),
        ));
    }
    let cwd = PathBuf::from(&row.cwd);
    let (argv, env) = match place {
        Place::Own => {
            check_depth(e)?;
            check_live_count(e, &*e.store.read()?)?;
            (
                child_argv(e, &row.args, &cwd, Path::new(&file), &row.name)?,
                e.child_env(&row.id, &row.path, row.depth),
            )
        }
        Place::Below => {
            check_depth_at(e, row.depth - 1)?;
            check_live_count_of(e, &*e.store.read()?, row.manager_id)?;
            let conn = e.store.read()?;
            (
                descendant_argv(e, &conn, row, Path::new(&file))?,
                descendant_env(e, row),
            )
        }
    };
    e.check_budget(&*e.store.read()?, Some(&row.id), "resume")?;
    let outcome =
        e.rt.launch(LaunchSpec {
            thread_id: row.id.clone(),
            argv,
            cwd,
            env,
            clear_env: false,
            start: StartKind::Resumed,
        })
        .await?;
    e.rt.flush().await;
    Ok(ResumeDone {
        already_live: false,
        file: Some(file),
        note: outcome.note,
    })
}

/// The argv a descendant taken over by this serve runs with: the flags each ancestor between
/// this session and it passed down (inherited from its parent, merged with its own `args`),
/// then its own `args`, as its own manager's serve would have launched it.
fn descendant_argv(
    e: &Engine,
    conn: &Connection,
    row: &ThreadRow,
    session: &Path,
) -> Result<Vec<String>> {
    let chain = query_threads(
        conn,
        include_str!("../../sql/thread_ancestors.sql"),
        [&row.id],
    )?;
    // From this session's own child down to the thread's parent.
    let from = chain
        .iter()
        .position(|t| t.manager_id == e.manager_id)
        .unwrap_or(0);
    let mut inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    let mut parent_cwd = e.cfg.cwd.clone();
    for a in &chain[from..] {
        let merged = argpolicy::merge_args(&inherited, &a.args)?;
        parent_cwd = PathBuf::from(&a.cwd);
        inherited = argpolicy::inherited_args(&merged, &parent_cwd);
    }
    let merged = argpolicy::merge_args(&inherited, &row.args)?;
    // Children inherit the trust setting (THREADBASE_TRUSTED) with the environment.
    let approve = argpolicy::should_approve(e.cfg.trusted, &parent_cwd, Path::new(&row.cwd));
    Ok(crate::pi::flags::child_argv(
        &e.cfg.pi_command,
        &merged,
        Some(session),
        &row.name,
        approve,
    ))
}

/// The environment of a descendant taken over by this serve: its own place in the tree.
fn descendant_env(e: &Engine, row: &ThreadRow) -> Vec<(String, String)> {
    let mut env = e.child_env(&row.id, &row.path, row.depth);
    let parent_path = row
        .parent_path
        .clone()
        .or_else(|| crate::paths::parent_path(&row.path).map(str::to_string))
        .unwrap_or_else(|| crate::paths::ROOT.to_string());
    env.retain(|(k, _)| {
        !matches!(
            k.as_str(),
            "PI_THREADS_PARENT_PATH" | "PI_THREADS_PARENT_ID" | "PI_THREADS_PARENT_THREAD_ID"
        )
    });
    env.push(("PI_THREADS_PARENT_PATH".to_string(), parent_path));
    if let Some(parent_id) = &row.parent_id {
        env.push(("PI_THREADS_PARENT_ID".to_string(), parent_id.clone()));
        env.push(("PI_THREADS_PARENT_THREAD_ID".to_string(), parent_id.clone()));
    }
    env
}

// ---- carried out for another serve ------------------------------------------------------------

/// A `send` or `resume` another serve wrote for a thread this serve holds (or manages), as
/// the row watcher hands it over: the outcome text for `commands.result`.
pub(crate) async fn carry_out(
    e: &Engine,
    kind: &str,
    thread_id: &str,
    payload: Option<&str>,
) -> Result<String> {
    let row =
        thread_by_id_any(&*e.store.read()?, thread_id)?.ok_or_else(|| gone_meanwhile(thread_id))?;
    match kind {
        "send" => {
            let p: SendPayload = serde_json::from_str(payload.unwrap_or("null")).map_err(|err| {
                Error::invalid(format!(
                    "The send request for {} has no valid payload ({err}). Repair: send again from the thread tool.",
                    row.path
                ))
            })?;
            e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
                .await;
            if !e.rt.is_live(&row.id) {
                return Err(closed_error(&row.path, &row));
            }
            Ok(serde_json::to_string(
                &send_here(e, &row, &p.message, p.mode).await?,
            )?)
        }
        "resume" => {
            e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
                .await;
            let place = if row.manager_id == e.manager_id {
                Place::Own
            } else {
                Place::Below
            };
            Ok(serde_json::to_string(&resume_here(e, &row, place).await?)?)
        }
        other => Err(Error::internal(format!(
            "Unknown command kind {other} for {}. Repair: this serve is older than the one that wrote it; restart it.",
            row.path
        ))),
    }
}

// ---- fork -----------------------------------------------------------------------------------

async fn fork(
    e: &Engine,
    reference: Option<String>,
    entry_id: Option<String>,
    pos: crate::pi::session::ForkPosition,
    name: Option<String>,
    task_name: Option<String>,
    args: Vec<String>,
) -> Result<Reply> {
    check_depth(e)?;
    check_live_count(e, &*e.store.read()?)?;
    argpolicy::validate_child_args(&args)?;
    let inherited = argpolicy::inherited_args(&e.cfg.parent_args, &e.cfg.cwd);
    argpolicy::merge_args(&inherited, &args)?;
    // The source: a managed child's session, or the parent's own.
    let (source_file, source_name) = match &reference {
        Some(r) => {
            let src = find(e, r)?;
            let file = src.session_file.clone().filter(|f| Path::new(f).exists()).ok_or_else(|| {
                Error::new(
                    ErrorCode::NotResumable,
                    format!(
                        "Cannot fork {}: no saved Pi session file is known for this thread. Repair: fork another thread, or omit id to fork the current session.",
                        src.path
                    ),
                )
            })?;
            (PathBuf::from(file), Some(src.name))
        }
        None => {
            let file = e.cfg.session_file.clone().filter(|f| f.exists()).ok_or_else(|| {
                Error::new(
                    ErrorCode::NotResumable,
                    "Cannot fork the current parent session because it has no saved Pi session file. Repair: fork a managed thread by id instead, or save the session first.",
                )
            })?;
            (file, None)
        }
    };
    let display = name
        .clone()
        .unwrap_or_else(|| naming::fork_name(source_name.as_deref()));
    let source = crate::pi::session::SessionFile::read(&source_file)?;
    let cwd = source
        .cwd()
        .map(PathBuf::from)
        .unwrap_or_else(|| e.cfg.cwd.clone());
    let id = crate::ids::new_thread_id();
    let short = &id[7..13];
    let base = naming::base_task_name(Some(&display), None, short);
    let depth = e.cfg.depth + 1;
    let session_id = crate::pi::session::uuid_v7();
    let new_file = e
        .child_session_dir()
        .join(crate::pi::session::session_file_name(
            &now_iso(),
            &session_id,
        ));
    let (_task, path) = e.store.write(|tx| {
        check_live_count(e, tx)?;
        e.check_budget(tx, None, "fork")?;
        let (task, path) = choose_task_name(e, tx, task_name.as_deref(), &base)?;
        // The branch file is written inside the reservation, so a rejected fork writes nothing.
        crate::pi::session::write_branch(
            &source,
            entry_id.as_deref(),
            pos,
            &new_file,
            &session_id,
        )?;
        insert_thread(
            tx,
            &NewThread {
                id: id.clone(),
                manager_id: e.manager_id,
                path: path.clone(),
                parent_path: Some(e.cfg.scope_path.clone()),
                parent_id: parent_thread_id(e, tx)?,
                task_name: task.clone(),
                name: display.clone(),
                depth,
                cwd: cwd.display().to_string(),
                args: args.clone(),
                status: "live",
                phase: "starting",
                session_file: Some(new_file.display().to_string()),
                session_id: Some(session_id.clone()),
                ..Default::default()
            },
        )
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&new_file);
        })?;
        Ok((task, path))
    })?;
    let source_entry = entry_id
        .clone()
        .or_else(|| source.leaf_id().map(str::to_string));
    let argv = child_argv(e, &args, &cwd, &new_file, &display)?;
    let launched =
        e.rt.launch(LaunchSpec {
            thread_id: id.clone(),
            argv,
            cwd: cwd.clone(),
            env: e.child_env(&id, &path, depth),
            clear_env: false,
            start: StartKind::Forked {
                source_session_file: source_file.display().to_string(),
                source_entry_id: source_entry.clone(),
            },
        })
        .await;
    let outcome = match launched {
        Ok(o) => o,
        Err(err) => {
            close_unlaunched(e, &id, &err.message)?;
            return Err(err);
        }
    };
    e.rt.flush().await;
    let facts = e.facts(&id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let source_session_file = source_file.display().to_string();
    let mut text = format::forked(&snap, &source_session_file, source_entry.as_deref());
    if let Some(note) = &outcome.note {
        text.push_str(&format!("\nNote: {note}"));
    }
    reply(
        &text,
        Details::Forked {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            source_session_file: &source_session_file,
            source_entry_id: source_entry.as_deref(),
        },
    )
}

// ---- archive --------------------------------------------------------------------------------

fn archive(e: &Engine, reference: &str, archived: bool) -> Result<Reply> {
    let row = find(e, reference)?;
    if row.is_live() {
        return Err(Error::conflict(format!(
            "Cannot archive live thread {}. Repair: stop or wait for the thread to close before archiving, or omit archive for live work.",
            row.path
        )));
    }
    e.store.write(|tx| {
        let at = now_iso();
        tx.prepare_cached(include_str!("../../sql/thread_set_archived.sql"))?
            .execute(named_params! {":archived": archived, ":at": at, ":id": row.id})?;
        let data = json!({"archived": archived}).to_string();
        events::append(
            tx,
            &row.id,
            &[NewEvent {
                at: &at,
                kind: "thread_archived",
                data: &data,
            }],
        )?;
        Ok(())
    })?;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = format::archived(&snap, archived);
    reply(
        &text,
        Details::Archived {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            archived,
        },
    )
}
