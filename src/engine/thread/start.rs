//! `start`: reserve the thread, write its session file, launch its child with the prompt.

use super::reserve::{
    check_depth, check_live_count, child_argv, choose_task_name, close_unlaunched,
    new_session_file, parent_thread_id, resolve_cwd,
};
use super::{reply, Engine};
use crate::contract::projection::{Detail, Projection};
use crate::contract::thread::{Details, Single, SnapshotJson};
use crate::contract::{args as argpolicy, format, naming};
use crate::error::Result;
use crate::output::Reply;
use crate::runtime::{LaunchSpec, StartKind};
use crate::store::threads::{self, insert_thread, NewThread};

pub(super) async fn start(
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
            threads::set_session(tx, &id, &session.display().to_string(), &session_id)
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
