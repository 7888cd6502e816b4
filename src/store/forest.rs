//! The forest as the inspection commands draw it (`tree`, `list`, `top`): every thread's place
//! in its root session's tree, in tree order, and each manager's session and contract (for a
//! database from before V4, whose threads have no places).

use crate::store::Conn;
use std::collections::HashMap;

use crate::domain::{Contract, ManagerId, ThreadId};
use crate::error::Result;

/// One thread's place: the root session of its tree, its level (1 at the top) and the
/// manager that holds it.
#[derive(Debug, Clone)]
pub struct Place {
    pub root_session: String,
    pub thread_id: ThreadId,
    pub level: i64,
    pub manager_session: String,
    pub contract: Contract,
}

/// Every placed thread in whole-tree order: root session, then a parent before its
/// descendants across every manager of the tree (sql/forest_places.sql).
pub fn places(conn: &Conn) -> Result<Vec<Place>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/forest_places.sql"))?;
    let rows = stmt.query_map([], |r| {
        Ok(Place {
            root_session: r.get("root_session")?,
            thread_id: r.get("thread_id")?,
            level: r.get("level")?,
            manager_session: r.get("session_id")?,
            contract: r.get("contract")?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// Each manager's session id and contract (sql/forest_managers.sql).
pub fn manager_names(conn: &Conn) -> Result<HashMap<ManagerId, (String, Contract)>> {
    let mut stmt = conn
        .db()
        .prepare_cached(include_str!("../../sql/forest_managers.sql"))?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}
