//! Contract B's `reap` (0.19): forgets completed threads with no descendant that stays. A reaped
//! thread is marked (`agent_reaped_at`), never deleted: its row, events and usage stay for SQL
//! and `threadbase usage`, its session file stays on disk; the contract no longer knows it.

use crate::store::db::{named, params, q};
use crate::store::Conn;

use crate::domain::{ManagerId, ThreadId, ThreadStatus};
use crate::error::Result;
use crate::store::rows::columns;

columns! {
    /// A thread reap forgets (`{agent_reaped_row}` in `sql/agent_reap_candidates.sql`, which
    /// reads `threads t`): what [`Reaped`] holds.
    pub mod reaped_col as "{agent_reaped_row}" {
        ID = "t.id",
        PATH = "t.path",
        STATUS = "t.status",
    }
}

/// A thread reap forgets (or, in a dry run, would forget).
#[derive(Debug, Clone)]
pub struct Reaped {
    pub id: ThreadId,
    pub path: String,
    /// Its process was still live (a settled run not yet retired).
    pub live: bool,
}

/// The threads of `registry` reap would forget, oldest first.
pub fn candidates(conn: &Conn, registry: ManagerId) -> Result<Vec<Reaped>> {
    let rows = conn
        .all(
            q!("agent_reap_candidates", reaped_col),
            named! {":registry": registry},
            |r| {
                Ok(Reaped {
                    id: r.get(reaped_col::ID)?,
                    path: r.get(reaped_col::PATH)?,
                    live: r.get::<ThreadStatus>(reaped_col::STATUS)? == ThreadStatus::Live,
                })
            },
        )?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

/// Reaps `registry` (run it in one write transaction): every candidate is marked reaped at
/// `at`; returns them. With `dry_run`, only returns them.
pub fn reap(conn: &Conn, registry: ManagerId, at: &str, dry_run: bool) -> Result<Vec<Reaped>> {
    let found = candidates(conn, registry)?;
    if dry_run {
        return Ok(found);
    }
    let mut reaped = Vec::with_capacity(found.len());
    for t in found {
        if conn.execute(
            q!("agent_reap_mark"),
            named! {":at": at, ":id": t.id.as_str()},
        )? > 0
        {
            reaped.push(t);
        }
    }
    Ok(reaped)
}

columns! {
    /// A contract B registry (`{agent_registry_row}` in `sql/agent_registries.sql`, which
    /// reads `managers`): what [`RegistryRow`] holds.
    pub mod registry_col as "{agent_registry_row}" {
        ID = "id",
        SESSION_ID = "session_id",
    }
}

/// A contract B registry and its main session.
pub struct RegistryRow {
    pub id: ManagerId,
    pub session_id: String,
}

/// Every contract B registry of the database.
pub fn registries(conn: &Conn) -> Result<Vec<RegistryRow>> {
    let rows = conn
        .all(q!("agent_registries", registry_col), params![], |r| {
            Ok(RegistryRow {
                id: r.get(registry_col::ID)?,
                session_id: r.get(registry_col::SESSION_ID)?,
            })
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}
