//! `resume`: a closed thread launched again on its saved session, here or by the serve of
//! the manager it belongs to; a descendant whose manager's serve is gone is taken over.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::remote::{self, Outcome};
use super::reserve::{
    check_depth, check_depth_at, check_live_count, check_live_count_of, child_argv,
};
use super::{find, gone_meanwhile, held_by, reply, Engine};
use crate::contract::args as argpolicy;
use crate::contract::format;
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::domain::CommandKind;
use crate::engine::adopt;
use crate::engine::child_env::{ChildEnv, Parent};
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::identity::Holder;
use crate::runtime::{LaunchSpec, StartKind};
use crate::store::threads::{thread_ancestors, thread_by_id_any, ThreadRow};
use crate::store::Conn;

/// What a resume did, as the serve that carried it out records it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ResumeDone {
    already_live: bool,
    file: Option<String>,
    note: Option<String>,
}

pub(in crate::engine) async fn resume(
    e: &Engine,
    req: crate::contract::thread::Resume,
) -> Result<Reply> {
    let reference = req.id.as_str();
    let mut adopted_note = None;
    let row = match find(e, reference) {
        Ok(row) => row,
        // Another session's thread, by its exact id or canonical path: adopted when that
        // session has ended (its serve is gone), then resumed here.
        Err(unknown) if unknown.code == ErrorCode::UnknownReference => {
            let me = e.rt.owner();
            let to = e.manager_id;
            // What would refuse the launch refuses the adoption too, so a resume that
            // cannot run leaves the thread in its session (issue 46).
            let check = |id: &crate::domain::ThreadId| {
                let row =
                    thread_by_id_any(&e.store.read()?, id)?.ok_or_else(|| gone_meanwhile(id))?;
                check_resumable(e, &row)?;
                check_depth(e)?;
                let conn = e.store.read()?;
                check_live_count(e, &conn)?;
                crate::engine::budget::check_budget(e, &conn, Some(id), "resume")
            };
            match adopt::adopt_reference(
                &e.store,
                me,
                reference,
                Some(to),
                |_| Ok(to),
                check,
                "resume",
            )? {
                adopt::Found::Adopted(a) => {
                    adopted_note = Some(format!(
                        "adopted from Pi session {}, which has ended (its path there: {}).",
                        a.from_session, a.old_path
                    ));
                    thread_by_id_any(&e.store.read()?, &a.id)?
                        .ok_or_else(|| gone_meanwhile(&a.id))?
                }
                adopt::Found::Nothing | adopt::Found::OwnerAlive(_) => return Err(unknown),
            }
        }
        Err(e) => return Err(e),
    };
    e.rt.await_launch(&row.id, crate::runtime::LAUNCH_WAIT)
        .await;
    let mut via = None;
    let holder = remote::holder(e, &row.id)?;
    let done = match holder {
        Some(Holder::Here) => ResumeDone {
            already_live: true,
            file: None,
            note: None,
        },
        Some(Holder::Elsewhere(owner)) => {
            via = Some(owner);
            ResumeDone {
                already_live: true,
                file: None,
                note: None,
            }
        }
        _ => {
            if holder == Some(Holder::Gone) {
                remote::restore_orphans(e)?;
            }
            let row = thread_by_id_any(&e.store.read()?, &row.id)?
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
    for note in adopted_note.iter().chain(done.note.iter()) {
        text.push_str(&format!("\nNote: {note}"));
    }
    if let Some(owner) = via {
        text.push_str(&held_by(owner));
    }
    reply(
        text,
        Details::Resumed {
            thread: Single::of(SnapshotJson::new(&snap)?),
            already_live: done.already_live,
        },
    )
}

/// Whose place a resumed thread takes in this serve: one of its own manager's threads
/// (launched as a child of this session), or a descendant below it whose manager's serve is
/// gone, which this serve takes over (launched in its own place in the tree, with the flags
/// its ancestors would have passed down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Place {
    Own,
    Below,
}

/// Launches a closed thread again on its saved session file, in this serve. Resumes run one
/// at a time, so two at once launch one process and the second finds it live (no lock is
/// held while a request waits for another serve).
pub(super) async fn resume_here(e: &Engine, row: &ThreadRow, place: Place) -> Result<ResumeDone> {
    let _one_at_a_time = e.relaunch.lock().await;
    if e.rt.is_live(&row.id) {
        return Ok(ResumeDone {
            already_live: true,
            file: None,
            note: None,
        });
    }
    let file = check_resumable(e, row)?;
    let cwd = PathBuf::from(&row.cwd);
    let (argv, env) = match place {
        Place::Own => {
            check_depth(e)?;
            check_live_count(e, &e.store.read()?)?;
            (
                child_argv(e, &row.args, &cwd, Path::new(&file), &row.name)?,
                e.child_env(&row.id, &row.path, row.depth),
            )
        }
        Place::Below => {
            check_depth_at(e, row.depth - 1)?;
            check_live_count_of(e, &e.store.read()?, row.manager_id)?;
            let conn = e.store.read()?;
            (
                descendant_argv(e, &conn, row, Path::new(&file))?,
                descendant_env(e, row),
            )
        }
    };
    crate::engine::budget::check_budget(e, &e.store.read()?, Some(&row.id), "resume")?;
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

/// What a resume on this host needs of a closed thread, checked before anything is launched
/// or adopted: a saved Pi session file that is here and is a Pi session, and a cwd (its
/// worktree, for an isolated thread) that is a folder here. A thread that last ran on another
/// host is said to be that host's: its session file and folders are there, not gone.
/// Returns the session file.
fn check_resumable(e: &Engine, row: &ThreadRow) -> Result<String> {
    let refuse = |message: String| Err(Error::new(ErrorCode::NotResumable, message));
    let Some(file) = row.session_file.clone() else {
        return refuse(format!(
            "Cannot resume {}: no saved Pi session file is known for this thread. Repair: fork it or start a new thread instead.",
            row.path
        ));
    };
    let here = &crate::host::HostIdentity::here().host_id;
    let elsewhere =
        crate::store::threads::thread_last_host(&e.store.read()?, &row.id)?.filter(|h| h != here);
    if !Path::new(&file).exists() {
        return refuse(match &elsewhere {
            Some(host) => format!(
                "Cannot resume managed thread {}: it last ran on host {host}, and its Pi session file {file} is there, not on this host ({here}). Repair: resume it from a Pi session on host {host}, or start a new thread here.",
                row.path
            ),
            None => format!(
                "Cannot resume managed thread: saved Pi session file does not exist: {file}. Repair: start a new thread; the old session history is gone."
            ),
        });
    }
    // A file that is there but cannot be a Pi session (a folder, garbage, empty) would start a
    // child that fails or silently starts over: refuse before launching anything.
    if let Err(err) = crate::pi::session::SessionFile::read(&file) {
        return refuse(format!(
            "Cannot resume managed thread {}: {}",
            row.path, err.message
        ));
    }
    let cwd = PathBuf::from(&row.cwd);
    // Issue 48: an isolated thread resumes in its worktree, which `worktree clean` may have
    // removed (or someone deleted).
    if let Some(w) = crate::store::worktrees::of_thread(&e.store.read()?, &row.id)? {
        if w.removed_at.is_some() || !cwd.is_dir() {
            return refuse(format!(
                "Cannot resume managed thread {}: its worktree {} is gone{}. Repair: start a new thread for more work (what a merged thread changed is in the main tree's history; `threadbase worktree list` shows what is left).",
                row.path,
                w.path,
                w.removed_at.as_deref().map(|at| format!(" (removed by worktree clean at {at})")).unwrap_or_default()
            ));
        }
    }
    if !cwd.is_dir() {
        return refuse(match &elsewhere {
            Some(host) => format!(
                "Cannot resume managed thread {}: its cwd {} is not a folder on this host ({here}); it last ran on host {host}. Repair: resume it from a Pi session on host {host}, or create {} here, or start a new thread.",
                row.path, row.cwd, row.cwd
            ),
            None => format!(
                "Cannot resume managed thread {}: its cwd {} does not exist. Repair: create {} again (or restore it), or start a new thread.",
                row.path, row.cwd, row.cwd
            ),
        });
    }
    Ok(file)
}

/// The argv a descendant taken over by this serve runs with: the flags each ancestor between
/// this session and it passed down (inherited from its parent, merged with its own `args`),
/// then its own `args`, as its own manager's serve would have launched it.
fn descendant_argv(
    e: &Engine,
    conn: &Conn,
    row: &ThreadRow,
    session: &Path,
) -> Result<Vec<String>> {
    let chain = thread_ancestors(conn, &row.id)?;
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
    let parent_path = row
        .parent_path
        .as_deref()
        .or_else(|| crate::paths::parent_path(&row.path))
        .unwrap_or(crate::paths::ROOT);
    let parent = Parent::Thread {
        path: parent_path,
        id: row.parent_id.as_ref(),
    };
    ChildEnv::new(
        &e.cfg,
        Some(&row.id),
        &row.path,
        row.depth,
        parent,
        &e.cfg.root_session_id,
    )
    .thread_settings(&e.cfg.settings)
    .into_vec()
}
