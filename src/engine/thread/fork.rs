//! `fork`: a branch of a managed child's (or the parent's own) session file, written inside
//! the reservation, launched as a new child.

use std::path::{Path, PathBuf};

use super::reserve::{
    check_new_child, child_argv, child_launch, claim_path, insert_child, launched, Child,
};
use super::{find, reply, Engine};
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::contract::{format, naming};
use crate::domain::SessionId;
use crate::engine::isolation;
use crate::engine::Reply;
use crate::error::{Error, ErrorCode, Result};
use crate::runtime::StartKind;
use crate::time::now_iso;

pub(in crate::engine) async fn fork(
    e: &Engine,
    req: crate::contract::thread::Fork,
) -> Result<Reply> {
    let crate::contract::thread::Fork {
        id: reference,
        entry_id,
        position: pos,
        name,
        task_name,
        args,
    } = req;
    check_new_child(e, &args)?;
    // The source: a managed child's session, or the parent's own.
    let (source_file, source_name, source_id) = match &reference {
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
            (PathBuf::from(file), Some(src.name), Some(src.id))
        }
        None => {
            let file = e.cfg.session_file.clone().filter(|f| f.exists()).ok_or_else(|| {
                Error::new(
                    ErrorCode::NotResumable,
                    "Cannot fork the current parent session because it has no saved Pi session file. Repair: fork a managed thread by id instead, or save the session first.",
                )
            })?;
            (file, None, None)
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
    // Issue 48: an isolated source's fork gets a worktree of its own from the source's
    // current state; with isolation on, any other fork one from its cwd's HEAD.
    let isolation = isolation::prepare_fork(e, source_id.as_ref(), &cwd)?;
    let asked_cwd = cwd;
    let id = crate::ids::new_thread_id();
    let short = &id.as_str()[7..13];
    let base = naming::base_task_name(Some(&display), None, short);
    let depth = e.cfg.depth + 1;
    let session_id = SessionId::new(crate::pi::session::uuid_v7());
    let new_file = e
        .child_session_dir()
        .join(crate::pi::session::session_file_name(
            &now_iso(),
            session_id.as_str(),
        ));
    let (path, plan) = e.store.write(|tx| {
        let (task, path) = claim_path(e, tx, "fork", task_name.as_deref(), &base)?;
        let plan = isolation.plan(&id, &task);
        let cwd = plan.as_ref().map_or(asked_cwd.clone(), |p| p.cwd.clone());
        // The branch file is written inside the reservation, so a rejected fork writes nothing.
        crate::pi::session::write_branch(
            &source,
            entry_id.as_deref(),
            pos,
            &new_file,
            session_id.as_str(),
        )?;
        insert_child(
            e,
            tx,
            &Child {
                id: &id,
                task: &task,
                path: &path,
                name: &display,
                cwd: &cwd,
                args: &args,
                prompt: None,
                session: Some((&new_file, &session_id)),
            },
        )
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&new_file);
        })?;
        if let Some(plan) = &plan {
            isolation::record(tx, &id, plan)?;
        }
        Ok((path, plan))
    })?;
    let cwd = plan.as_ref().map_or(asked_cwd.clone(), |p| p.cwd.clone());
    let source_entry = entry_id
        .clone()
        .or_else(|| source.leaf_id().map(str::to_string));
    let argv = child_argv(e, &args, &cwd, &new_file, &display)?;
    let outcome = launched(e, &id, async {
        if let Some(plan) = &plan {
            isolation::create(e, &id, plan)?;
        }
        e.rt.launch(child_launch(
            e,
            &id,
            &path,
            depth,
            argv,
            &cwd,
            StartKind::Forked {
                source_session_file: source_file.display().to_string(),
                source_entry_id: source_entry.clone(),
            },
        ))
        .await
    })
    .await?;
    let facts = e.facts(&id)?;
    let projection = Projection::new(&facts, Detail::Summary);
    let snap = projection.snapshot();
    let source_session_file = source_file.display().to_string();
    let mut text = format::forked(&snap, &source_session_file, source_entry.as_deref());
    for note in outcome.note.iter().chain(isolation.note().iter()) {
        text.push_str(&format!("\nNote: {note}"));
    }
    if let Some(line) = format::worktree_line(&snap) {
        text.push_str(&format!("\n{line}"));
    }
    reply(
        text,
        Details::Forked {
            thread: Single::of(SnapshotJson::new(&snap)?),
            source_session_file,
            source_entry_id: source_entry,
        },
    )
}
