//! `threadbase adopt REF [--into SESSION]`: moves a closed thread of a Pi session that has
//! ended under another session (by default the session `pi -c` would continue here: the
//! newest session file of Pi's session folder for this directory), so that session's `thread`
//! tool reaches it (`resume`, `poll`, `list`). The thread keeps its id and its own session
//! file; a `thread_adopted` event records where it came from. Never a thread whose session's
//! serve is running.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::domain::SessionId;
use crate::engine::adopt::{adopt_reference, owner_alive, Found};
use crate::error::{Error, ErrorCode, Result};
use crate::pi::session::{session_dir_for, SessionFile};
use crate::runtime::signals::ProcessIdentity;
use crate::store::threads::{manager_id, thread_by_id_any, upsert_manager, Contract, ManagerSpec};
use crate::store::Store;

pub struct AdoptArgs<'a> {
    pub reference: &'a str,
    /// A Pi session file or session id; `None`: the newest session of this directory.
    pub into: Option<&'a str>,
    pub json: bool,
}

/// The session a thread is adopted into.
struct Into {
    session_id: SessionId,
    file: Option<PathBuf>,
    cwd: Option<String>,
}

pub fn run(db: &Path, args: &AdoptArgs<'_>, out: &mut dyn Write) -> Result<()> {
    let store = Store::open_existing(db)?;
    let into = target(&store, args.into)?;
    let known = manager_id(&store.read()?, &into.session_id, Contract::Thread)?;
    let me = ProcessIdentity::current();
    let found = adopt_reference(
        &store,
        me,
        args.reference,
        known,
        |tx| match manager_id(tx, &into.session_id, Contract::Thread)? {
            Some(id) => Ok(id),
            // The session has not used the `thread` tool yet: its manager is made here
            // (no owner: its serve records itself when it starts).
            None => {
                let file = into.file.as_ref().map(|f| f.display().to_string());
                upsert_manager(
                    tx,
                    &ManagerSpec {
                        session_file: file.as_deref(),
                        cwd: into.cwd.as_deref(),
                        ..ManagerSpec::new(&into.session_id, Contract::Thread, crate::paths::ROOT)
                    },
                )
            }
        },
        |_| Ok(()),
        "adopt",
    )?;
    let adopted = match found {
        Found::Adopted(a) => a,
        Found::OwnerAlive(c) => {
            let path = thread_by_id_any(&store.read()?, &c.id)?
                .map(|r| r.path)
                .unwrap_or_default();
            return Err(owner_alive(&c, &path));
        }
        Found::Nothing => {
            return Err(Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "No thread of another Pi session has the id or canonical path {}. Repair: `threadbase list` shows the stored threads; give a thread id (thread_…) or a full path (/root/…).",
                    crate::paths::json_quote(args.reference)
                ),
            ))
        }
    };
    let file = into
        .file
        .as_ref()
        .map(|f| f.display().to_string())
        .unwrap_or_default();
    if args.json {
        let v = json!({"adopted": {
            "id": adopted.id, "path": adopted.path, "oldPath": adopted.old_path,
            "fromSession": adopted.from_session, "intoSession": into.session_id,
            "intoSessionFile": into.file, "below": adopted.below,
        }});
        writeln!(out, "{v}")?;
        return Ok(());
    }
    let below = match adopted.below {
        0 => String::new(),
        1 => ", with the 1 thread below it".to_string(),
        n => format!(", with the {n} threads below it"),
    };
    writeln!(
        out,
        "Adopted {} ({}){below} from Pi session {} into Pi session {}{}.",
        adopted.path,
        adopted.id,
        adopted.from_session,
        into.session_id,
        if file.is_empty() {
            String::new()
        } else {
            format!(" ({file})")
        }
    )?;
    if adopted.old_path != adopted.path {
        writeln!(out, "Its path there was {}.", adopted.old_path)?;
    }
    let continue_with = if file.is_empty() {
        "that Pi session".to_string()
    } else {
        format!("`pi --session {file}`")
    };
    writeln!(
        out,
        "Continue with {continue_with} and resume it: thread {{\"action\": \"resume\", \"id\": \"{}\"}}.",
        adopted.path
    )?;
    Ok(())
}

/// `--into`: a session file (its header names the session), a known session id, or by default
/// the newest session file of Pi's session folder for this directory (what `pi -c` continues).
fn target(store: &Store, into: Option<&str>) -> Result<Into> {
    let file = match into {
        Some(s) if Path::new(s).is_file() => Path::new(s).to_path_buf(),
        Some(s) => {
            let conn = store.read()?;
            let session_id = SessionId::new(s);
            if manager_id(&conn, &session_id, Contract::Thread)?.is_some() {
                return Ok(Into {
                    session_id,
                    file: None,
                    cwd: None,
                });
            }
            return Err(Error::invalid(format!(
                "--into {}: no such session file, and no Pi session with that id has used the thread tool. Repair: pass the session's file (Pi's session folder, ~/.pi/agent/sessions/…), or run adopt from the project folder to adopt into its newest session.",
                crate::paths::json_quote(s)
            )));
        }
        None => newest_session_here()?,
    };
    let session = SessionFile::read(&file).map_err(|e| {
        Error::invalid(format!(
            "{} is not a Pi session file we can read: {}. Repair: pass a session file (.jsonl) with --into.",
            file.display(),
            e.message
        ))
    })?;
    let file = dunce::canonicalize(&file).unwrap_or(file);
    Ok(Into {
        session_id: SessionId::new(session.header_id()),
        cwd: session.cwd().map(str::to_string),
        file: Some(file),
    })
}

/// The newest `.jsonl` of Pi's session folder for the current directory.
fn newest_session_here() -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    let dir = session_dir_for(&super::pi::agent_dir(), &cwd);
    let newest = std::fs::read_dir(&dir)
        .ok()
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .max();
    newest.map(|(_, p)| p).ok_or_else(|| {
        Error::invalid(format!(
            "No Pi session in {} to adopt into. Repair: start `pi` in this folder first (then adopt into its session), or pass --into SESSION_FILE.",
            dir.display()
        ))
    })
}
