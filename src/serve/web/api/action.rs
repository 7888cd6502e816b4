//! The page's actions: `POST /api/action` (stop, force stop, send and merge become command rows
//! that the holding serve carries out; archive and answer are written here) and
//! `/api/command?id=C`, how such a command row stands.

use super::*;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandDoc {
    pub id: i64,
    pub thread: String,
    pub kind: CommandKind,
    pub state: crate::domain::CommandState,
    pub result: Option<String>,
}

impl CommandDoc {
    pub(super) fn of(c: rows::CommandRow) -> CommandDoc {
        CommandDoc {
            id: c.id,
            thread: c.thread_id,
            kind: c.kind,
            state: c.state,
            result: c.result,
        }
    }
}

/// `POST /api/action`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Action {
    pub thread: ThreadId,
    pub action: ActionKind,
    #[serde(default)]
    pub message: Option<String>,
    /// `auto` (or absent): the owner picks prompt when idle, else follow-up.
    #[serde(default)]
    pub mode: Option<String>,
    /// An answer's value: `true`/`false` for a confirm, one of the options for a select, the
    /// text for input and editor.
    #[serde(default)]
    pub answer: Option<Value>,
}

/// What an action did: the command row written for the owning serve (its state `pending`
/// until that serve carries it out), or `done` for a change made here (archive).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionAnswer {
    pub thread: String,
    pub action: ActionKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<i64>,
    pub state: crate::domain::CommandState,
}

const ACTION_SHAPE: &str = "send {\"thread\": \"<id>\", \"action\": \"stop\"|\"force_stop\"|\"send\"|\"archive\"|\"unarchive\"|\"answer\"|\"merge\"}, with \"message\" and optional \"mode\" (auto, prompt, steer, follow_up) for send, \"answer\" (true/false, an option, or text) for answer";

/// Parses and carries out one action.
pub fn action(store: &Store, body: &[u8]) -> Result<hyper::Response<Body>> {
    let a: Action = serde_json::from_slice(body).map_err(|e| {
        Error::invalid(format!(
            "The action is not valid ({e}). Repair: {ACTION_SHAPE}."
        ))
    })?;
    let (row, contract, reach) = {
        let conn = store.read()?;
        let row = threads::thread_by_id_any(&conn, &a.thread)?.ok_or_else(|| {
            Error::new(
                ErrorCode::UnknownReference,
                format!(
                    "Unknown thread: {}. Repair: pick a thread from the tree.",
                    a.thread
                ),
            )
        })?;
        let contract = threads::manager_of_thread(&conn, &a.thread)?
            .map(|(_, c)| c)
            .unwrap_or_default();
        // Where its serve is: judged by its host's lease when another host holds it.
        let reach = match row.is_live() {
            true => Reach::of(&conn, &a.thread)?,
            false => Reach::Gone,
        };
        (row, contract, reach)
    };
    let send = if a.action == ActionKind::Send {
        let message = a.message.as_deref().unwrap_or("");
        if message.trim().is_empty() || message.len() > MAX_MESSAGE {
            return Err(Error::invalid(format!(
                "A send needs a message of 1 to {MAX_MESSAGE} bytes. Repair: type the message to send."
            )));
        }
        let mode = match a.mode.as_deref() {
            None | Some("auto") => None,
            Some("prompt") => Some(SendMode::Prompt),
            Some("steer") => Some(SendMode::Steer),
            Some("follow_up") => Some(SendMode::FollowUp),
            Some(other) => {
                return Err(Error::invalid(format!(
                    "mode {other:?} is not one of auto, prompt, steer, follow_up. Repair: pick one."
                )))
            }
        };
        Some(crate::engine::send_payload(message, mode, "the web page")?)
    } else {
        if a.message.is_some() || a.mode.is_some() {
            return Err(Error::invalid(format!(
                "Only a send takes message and mode. Repair: {ACTION_SHAPE}."
            )));
        }
        None
    };
    if (a.action == ActionKind::Answer) != a.answer.is_some() {
        return Err(Error::invalid(format!(
            "An answer, and only an answer, takes \"answer\". Repair: {ACTION_SHAPE}."
        )));
    }
    if let Err(why) = allowed(a.action, &row, &contract, &reach) {
        return Err(Error::new(ErrorCode::Conflict, why));
    }
    let (command, state) = match a.action {
        ActionKind::Stop | ActionKind::ForceStop | ActionKind::Send => {
            let kind = match a.action {
                ActionKind::Stop => CommandKind::Stop,
                ActionKind::ForceStop => CommandKind::ForceStop,
                _ => CommandKind::Send,
            };
            let id = store.write(|tx| commands::insert(tx, &row.id, kind, send.as_deref()))?;
            (Some(id), crate::domain::CommandState::Pending)
        }
        // Issue 48: carried out on the worktree's host by the serve that holds the thread (or,
        // once it is closed, the serve of its session), as `threadbase merge` does it.
        ActionKind::Merge => {
            let has_tree = crate::store::worktrees::of_thread_checked(&store.read()?, &row.id)?
                .is_some_and(|w| w.removed_at.is_none());
            if !has_tree {
                return Err(Error::new(
                    ErrorCode::Conflict,
                    format!(
                        "{} has no worktree to merge (it was not isolated, or `threadbase worktree clean` removed it). Repair: nothing to merge.",
                        row.path
                    ),
                ));
            }
            let id = store.write(|tx| {
                commands::insert(tx, &row.id, CommandKind::Merge, Some(r#"{"squash":false}"#))
            })?;
            (Some(id), crate::domain::CommandState::Pending)
        }
        ActionKind::Archive | ActionKind::Unarchive => {
            crate::engine::set_archived(store, &row.id, a.action == ActionKind::Archive)?;
            (None, crate::domain::CommandState::Done)
        }
        // Written once, on the condition that the question is still pending; the serve
        // holding the child reads it and answers the child (as `threadbase answer` does).
        ActionKind::Answer => {
            let given = a.answer.as_ref().unwrap_or(&Value::Null);
            crate::engine::answer::answer_thread(store, &row, given, "web")?;
            (None, crate::domain::CommandState::Done)
        }
    };
    Ok(json(&ActionAnswer {
        thread: row.id.to_string(),
        action: a.action,
        command,
        state,
    }))
}
