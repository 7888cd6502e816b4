//! The forest as the inspection commands draw it (`tree`, `list`, `top`): every thread's place
//! in its root session's tree, in tree order, and each manager's session and contract (for a
//! database from before V4, whose threads have no places).

use crate::store::db::{params, q};
use crate::store::Conn;
use std::collections::HashMap;

use crate::domain::{Contract, ManagerId, ThreadId};
use crate::error::Result;
use crate::store::rows::columns;

columns! {
    /// A thread's place (`{forest_place_row}` in `sql/forest_places.sql`, which reads
    /// `thread_places p JOIN threads t JOIN managers m`): what [`Place`] holds.
    pub mod place_col as "{forest_place_row}" {
        ROOT_SESSION = "p.root_session",
        THREAD_ID = "p.thread_id",
        LEVEL = "p.level",
        MANAGER_SESSION = "m.session_id",
        CONTRACT = "m.contract",
    }
}

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
    let rows = conn
        .all(q!("forest_places", place_col), params![], |r| {
            Ok(Place {
                root_session: r.get(place_col::ROOT_SESSION)?,
                thread_id: r.get(place_col::THREAD_ID)?,
                level: r.get(place_col::LEVEL)?,
                manager_session: r.get(place_col::MANAGER_SESSION)?,
                contract: r.get(place_col::CONTRACT)?,
            })
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}

columns! {
    /// A manager's session id and contract (`{forest_manager_row}` in
    /// `sql/forest_managers.sql`, which reads `managers`), read by [`manager_names`].
    pub mod manager_col as "{forest_manager_row}" {
        ID = "id",
        SESSION_ID = "session_id",
        CONTRACT = "contract",
    }
}

/// Each manager's session id and contract (sql/forest_managers.sql).
pub fn manager_names(conn: &Conn) -> Result<HashMap<ManagerId, (String, Contract)>> {
    let rows = conn
        .all(q!("forest_managers", manager_col), params![], |r| {
            Ok((
                r.get(manager_col::ID)?,
                (
                    r.get(manager_col::SESSION_ID)?,
                    r.get(manager_col::CONTRACT)?,
                ),
            ))
        })?
        .into_iter()
        .map(Ok::<_, crate::error::Error>);
    rows.collect::<Result<_>>()
}
