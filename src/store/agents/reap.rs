//! Contract B's `reap` (0.19): forgets completed threads with no descendant that stays. A reaped
//! thread is marked (`agent_reaped_at`), never deleted: its row, events and usage stay for SQL
//! and `threadbase usage`, its session file stays on disk; the contract no longer knows it.

use crate::store::Conn;
use rusqlite::named_params;

use crate::domain::{ManagerId, ThreadId, ThreadStatus};
use crate::error::Result;
use crate::store::rows::{columns, row_sql};

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
    let mut stmt = conn
        .db()
        .prepare_cached(row_sql!("agent_reap_candidates", reaped_col))?;
    let rows = stmt.query_map(named_params! {":registry": registry}, |r| {
        Ok(Reaped {
            id: r.get(reaped_col::ID)?,
            path: r.get(reaped_col::PATH)?,
            live: r.get::<_, ThreadStatus>(reaped_col::STATUS)? == ThreadStatus::Live,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Reaps `registry` (run it in one write transaction): every candidate is marked reaped at
/// `at`; returns them. With `dry_run`, only returns them.
pub fn reap(conn: &Conn, registry: ManagerId, at: &str, dry_run: bool) -> Result<Vec<Reaped>> {
    let found = candidates(conn, registry)?;
    if dry_run {
        return Ok(found);
    }
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../../sql/agent_reap_mark.sql"))?;
    let mut reaped = Vec::with_capacity(found.len());
    for t in found {
        if stmt.execute(named_params! {":at": at, ":id": t.id.as_str()})? > 0 {
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
    let mut stmt = conn
        .db()
        .prepare_cached(row_sql!("agent_registries", registry_col))?;
    let rows = stmt.query_map([], |r| {
        Ok(RegistryRow {
            id: r.get(registry_col::ID)?,
            session_id: r.get(registry_col::SESSION_ID)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
