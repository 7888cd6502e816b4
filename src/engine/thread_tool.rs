//! Contract A's nine actions, one function per verb, on top of the store and the runtime.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{named_params, Connection, Transaction};
use serde_json::json;

use super::Engine;
use crate::contract::projection::{Detail, Projection, Snapshot};
use crate::contract::thread::{Details, ListTarget, Single, SnapshotJson, ThreadRequest};
use crate::contract::{args as argpolicy, naming, ToolResult};
use crate::error::{Error, ErrorCode, Result};
use crate::list::{ListQuery, Subtree};
use crate::output::Reply;
use crate::refs::{resolve, resolve_list_filter, RefScope};
use crate::runtime::{LaunchSpec, SendMode, StartKind};
use crate::store::events::{self, NewEvent};
use crate::store::threads::{insert_thread, NewThread, ThreadRow};
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

/// `path (id) is status / phase`, then the result as the model reads it: on the same line
/// when it is one line, else from the next line on, with its line breaks (and the note on a
/// cut one, see [`Projection::content_result`]).
fn headline(projection: &Projection<'_>, snap: &Snapshot<'_>) -> String {
    let mut s = format!(
        "{} ({}) is {} / {}",
        snap.path, snap.id, snap.status, snap.phase
    );
    if let Some(r) = projection.content_result() {
        s.push_str(if r.contains('\n') {
            ". Result:\n"
        } else {
            ". Result: "
        });
        s.push_str(&r);
    }
    s
}

// ---- limits and names ---------------------------------------------------------------------

fn check_depth(e: &Engine) -> Result<()> {
    let l = e.cfg.limits;
    if e.cfg.depth >= l.max_depth {
        return Err(Error::new(
            ErrorCode::Limit,
            format!(
                "pi-threads recursion depth {} has reached PI_THREADS_MAX_DEPTH={}. Repair: do the work in this thread, or raise PI_THREADS_MAX_DEPTH for the parent.",
                e.cfg.depth, l.max_depth
            ),
        ));
    }
    Ok(())
}

fn check_live_count(e: &Engine, conn: &Connection) -> Result<()> {
    let live: i64 = conn
        .prepare_cached(include_str!("../../sql/count_live.sql"))?
        .query_row([e.manager_id], |r| r.get(0))?;
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
    Ok(argpolicy::child_argv(
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
    let session_id = crate::session::uuid_v7();
    let path = e
        .child_session_dir()
        .join(crate::session::session_file_name(&now_iso(), &session_id));
    crate::session::write_header_only(&path, &session_id, cwd, parent_session)?;
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
    let (task, path, display) = e.store.write(|tx| {
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
    let mut text = format!(
        "Started {path} ({id}) as \"{display}\" [taskName {task}]; phase {}.",
        snap.phase
    );
    if let Some(note) = &outcome.note {
        text.push_str(&format!(" {note}"));
    }
    text.push_str(" Use wait or poll to follow it.");
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

async fn poll(e: &Engine, reference: &str, detail: Detail) -> Result<Reply> {
    let row = find(e, reference)?;
    refresh_if_live(e, &row.id).await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    reply(
        &headline(&projection, &snap),
        Details::Polled {
            thread: Single::of(&SnapshotJson::new(&snap)?),
        },
    )
}

// ---- send -----------------------------------------------------------------------------------

async fn send(e: &Engine, reference: &str, message: &str, mode: Option<SendMode>) -> Result<Reply> {
    let row = find(e, reference)?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    if !row.is_live() || !e.rt.is_live(&row.id) {
        return Err(Error::new(
            ErrorCode::Closed,
            format!("Thread is closed: {reference}. Repair: resume it first with {{ \"action\": \"resume\", \"id\": \"{}\" }}, or start a new thread.", row.path),
        ));
    }
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
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = match outcome.accepted {
        Some(true) => format!(
            "Sent {} to {} ({}); accepted.",
            mode.as_str(),
            row.path,
            row.id
        ),
        Some(false) => format!(
            "Sent {} to {} ({}); rejected: {}",
            mode.as_str(),
            row.path,
            row.id,
            outcome.error.clone().unwrap_or_default()
        ),
        None => outcome.error.clone().unwrap_or_default(),
    };
    reply(
        &text,
        Details::Sent {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            mode,
            accepted: outcome.accepted,
            error: outcome.error.as_deref(),
        },
    )
}

// ---- stop -----------------------------------------------------------------------------------

async fn stop(e: &Engine, reference: &str, force: bool) -> Result<Reply> {
    let row = find(e, reference)?;
    let was_live = e.rt.stop(&row.id, force).await?;
    e.rt.flush().await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let text = if was_live {
        format!(
            "Stopped {} ({}){}. {}",
            row.path,
            row.id,
            if force { " by force" } else { "" },
            headline(&projection, &snap)
        )
    } else {
        format!(
            "{} ({}) was already closed; nothing to stop.",
            row.path, row.id
        )
    };
    reply(
        &text,
        Details::Stopped {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            already_closed: (!was_live).then_some(true),
        },
    )
}

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
        let facts = e.facts(&row.id)?;
        let projection = Projection::new(&facts, Detail::Summary);
        let snap = projection.snapshot();
        let json = serde_json::value::to_raw_value(&snap)?;
        progress(&Details::Waiting {
            snapshot: &json,
            thread: &json,
            waited_ms: started.elapsed().as_millis() as u64,
            timeout_ms,
        });
        if idle || view.borrow().closed {
            break false;
        }
        let pause = WAIT_STEP.min(deadline.saturating_duration_since(Instant::now()));
        let _ = tokio::time::timeout(pause, view.wait_for(|v| v.closed)).await;
    };
    e.rt.flush().await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, detail);
    let snap = projection.snapshot();
    let waited = started.elapsed().as_millis() as u64;
    let text = if timed_out {
        format!(
            "Timed out after {waited} ms; the thread keeps running. {}",
            headline(&projection, &snap)
        )
    } else {
        headline(&projection, &snap)
    };
    reply(
        &text,
        Details::Waited {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            timed_out,
            waited_ms: waited,
        },
    )
}

// ---- resume ---------------------------------------------------------------------------------

async fn resume(e: &Engine, reference: &str) -> Result<Reply> {
    let _one_at_a_time = e.relaunch.lock().await;
    let row = find(e, reference)?;
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    if row.is_live() && e.rt.is_live(&row.id) {
        let facts = e.facts(&row.id)?;
        let projection = Projection::new(&facts, Detail::Summary);
        let snap = projection.snapshot();
        let text = format!("{} ({}) is already live.", row.path, row.id);
        return reply(
            &text,
            Details::Resumed {
                thread: Single::of(&SnapshotJson::new(&snap)?),
                already_live: true,
            },
        );
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
    if let Err(err) = crate::session::SessionFile::read(&file) {
        return Err(Error::new(
            ErrorCode::NotResumable,
            format!("Cannot resume managed thread {}: {}", row.path, err.message),
        ));
    }
    check_depth(e)?;
    check_live_count(e, &*e.store.read()?)?;
    e.check_budget(&*e.store.read()?, Some(&row.id), "resume")?;
    let cwd = PathBuf::from(&row.cwd);
    let argv = child_argv(e, &row.args, &cwd, Path::new(&file), &row.name)?;
    let outcome =
        e.rt.launch(LaunchSpec {
            thread_id: row.id.clone(),
            argv,
            cwd,
            env: e.child_env(&row.id, &row.path, row.depth),
            clear_env: false,
            start: StartKind::Resumed,
        })
        .await?;
    e.rt.flush().await;
    let facts = e.facts(&row.id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let mut text = format!(
        "Resumed {} ({}) from {file}; no prompt was sent. Use send to continue.",
        row.path, row.id
    );
    if let Some(note) = &outcome.note {
        text.push_str(&format!(" {note}"));
    }
    reply(
        &text,
        Details::Resumed {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            already_live: false,
        },
    )
}

// ---- fork -----------------------------------------------------------------------------------

async fn fork(
    e: &Engine,
    reference: Option<String>,
    entry_id: Option<String>,
    pos: crate::session::ForkPosition,
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
    let source = crate::session::SessionFile::read(&source_file)?;
    let cwd = source
        .cwd()
        .map(PathBuf::from)
        .unwrap_or_else(|| e.cfg.cwd.clone());
    let id = crate::ids::new_thread_id();
    let short = &id[7..13];
    let base = naming::base_task_name(Some(&display), None, short);
    let depth = e.cfg.depth + 1;
    let session_id = crate::session::uuid_v7();
    let new_file = e
        .child_session_dir()
        .join(crate::session::session_file_name(&now_iso(), &session_id));
    let (task, path) = e.store.write(|tx| {
        check_live_count(e, tx)?;
        e.check_budget(tx, None, "fork")?;
        let (task, path) = choose_task_name(e, tx, task_name.as_deref(), &base)?;
        // The branch file is written inside the reservation, so a rejected fork writes nothing.
        crate::session::write_branch(&source, entry_id.as_deref(), pos, &new_file, &session_id)?;
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
    let mut text = format!(
        "Forked {} into {path} ({id}) as \"{display}\" [taskName {task}]; no kickoff prompt was sent. Use send to continue.",
        source_file.display()
    );
    if let Some(note) = &outcome.note {
        text.push_str(&format!(" {note}"));
    }
    let source_session_file = source_file.display().to_string();
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
    let text = format!(
        "{} {} ({}); its session file is untouched.",
        if archived { "Archived" } else { "Unarchived" },
        row.path,
        row.id
    );
    reply(
        &text,
        Details::Archived {
            thread: Single::of(&SnapshotJson::new(&snap)?),
            archived,
        },
    )
}
