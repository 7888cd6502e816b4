//! `list` filters as SQL: state, visibility, and `parent` (direct children) or `ancestor`
//! (every descendant, one index range scan), sorted by canonical path.

use rusqlite::{named_params, Connection};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::paths::descendant_range;
use crate::store::threads::{query_threads, thread_statement, ThreadRow};

/// `state`: all (default), live or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StateFilter {
    #[default]
    All,
    Live,
    Closed,
}

/// `visibility`: active (default, not archived), archived, or all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum VisibilityFilter {
    #[default]
    Active,
    Archived,
    All,
}

impl StateFilter {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "all" => Ok(Self::All),
            "live" => Ok(Self::Live),
            "closed" => Ok(Self::Closed),
            _ => Err(Error::invalid(format!(
                "state must be one of all, live, closed; got {}. Repair: use {{ \"action\": \"list\", \"state\": \"live\" }}.",
                crate::paths::json_quote(s)
            ))),
        }
    }
    fn sql(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Live => "live",
            Self::Closed => "closed",
        }
    }
}

impl VisibilityFilter {
    pub fn parse(s: &str) -> Result<Self> {
        match s {
            "active" => Ok(Self::Active),
            "archived" => Ok(Self::Archived),
            "all" => Ok(Self::All),
            _ => Err(Error::invalid(format!(
                "visibility must be one of active, archived, all; got {}. Repair: use {{ \"action\": \"list\", \"visibility\": \"archived\" }}.",
                crate::paths::json_quote(s)
            ))),
        }
    }
    fn sql(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
            Self::All => "all",
        }
    }
}

/// Which part of the tree to list. Parent and ancestor are exclusive by construction.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Subtree {
    #[default]
    Everything,
    /// Direct children of this path.
    ChildrenOf(String),
    /// Every thread strictly below this path.
    DescendantsOf(String),
}

/// A resolved list request.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    pub state: StateFilter,
    pub visibility: VisibilityFilter,
    pub subtree: Subtree,
}

/// The listed threads, in canonical path order, with their counts.
#[derive(Debug, Clone)]
pub struct Listing {
    pub threads: Vec<ThreadRow>,
    pub count: usize,
    pub live_count: usize,
    pub closed_count: usize,
}

/// The statement of a list variant: the general one for the wide filters, and for the two
/// filters that keep few rows of a big manager (`state: live`, `visibility: archived`) one that
/// reads only those rows, through a partial index (migrations/V3). `tests/query_plans.rs`
/// checks the plan of every variant.
pub fn statement(q: &ListQuery) -> &'static str {
    let narrow = match (q.state, q.visibility) {
        (StateFilter::Live, _) => Narrow::Live,
        (_, VisibilityFilter::Archived) => Narrow::Archived,
        _ => Narrow::No,
    };
    match (&q.subtree, narrow) {
        (Subtree::Everything, Narrow::No) => include_str!("../sql/list_all.sql"),
        (Subtree::Everything, Narrow::Live) => include_str!("../sql/list_all_live.sql"),
        (Subtree::Everything, Narrow::Archived) => include_str!("../sql/list_all_archived.sql"),
        (Subtree::ChildrenOf(_), Narrow::No) => include_str!("../sql/list_children.sql"),
        (Subtree::ChildrenOf(_), Narrow::Live) => include_str!("../sql/list_children_live.sql"),
        (Subtree::ChildrenOf(_), Narrow::Archived) => {
            include_str!("../sql/list_children_archived.sql")
        }
        (Subtree::DescendantsOf(_), Narrow::No) => include_str!("../sql/list_descendants.sql"),
        (Subtree::DescendantsOf(_), Narrow::Live) => {
            include_str!("../sql/list_descendants_live.sql")
        }
        (Subtree::DescendantsOf(_), Narrow::Archived) => {
            include_str!("../sql/list_descendants_archived.sql")
        }
    }
}

#[derive(Clone, Copy)]
enum Narrow {
    No,
    Live,
    Archived,
}

/// Runs the list query of `q` against one manager's threads and hands each row, in list
/// order, to `f` until it returns `false`.
pub fn each_row(
    conn: &Connection,
    manager_id: i64,
    q: &ListQuery,
    mut f: impl FnMut(&rusqlite::Row<'_>) -> Result<bool>,
) -> Result<()> {
    let sql = statement(q);
    let mut stmt = thread_statement(conn, sql)?;
    // Each statement names only the parameters it uses; bind those.
    let (state, visibility) = (q.state.sql(), q.visibility.sql());
    let (parent, range) = match &q.subtree {
        Subtree::Everything => (None, None),
        Subtree::ChildrenOf(p) => (Some(p.as_str()), Some(descendant_range(p))),
        Subtree::DescendantsOf(a) => (None, Some(descendant_range(a))),
    };
    let mut bind = |name: &str, value: &dyn rusqlite::ToSql| -> Result<()> {
        if let Some(i) = stmt.parameter_index(name)? {
            stmt.raw_bind_parameter(i, value)?;
        }
        Ok(())
    };
    bind(":manager", &manager_id)?;
    bind(":state", &state)?;
    bind(":visibility", &visibility)?;
    bind(":parent", &parent)?;
    if let Some((lo, hi)) = &range {
        bind(":lo", lo)?;
        bind(":hi", hi)?;
    }
    let mut rows = stmt.raw_query();
    while let Some(r) = rows.next()? {
        if !f(r)? {
            break;
        }
    }
    Ok(())
}

/// Runs a list query against one manager's threads.
pub fn list(conn: &Connection, manager_id: i64, q: &ListQuery) -> Result<Listing> {
    Ok(Listing::from(
        list_at_most(conn, manager_id, q, usize::MAX)?.unwrap_or_default(),
    ))
}

/// The listed rows, or `None` when there are more than `max` (read no further).
pub fn list_at_most(
    conn: &Connection,
    manager_id: i64,
    q: &ListQuery,
    max: usize,
) -> Result<Option<Vec<ThreadRow>>> {
    let mut rows = Vec::new();
    let mut over = false;
    each_row(conn, manager_id, q, |r| {
        if rows.len() == max {
            over = true;
            return Ok(false);
        }
        rows.push(ThreadRow::from_row(r)?);
        Ok(true)
    })?;
    Ok((!over).then_some(rows))
}

/// Every manager's threads, for the inspection CLI.
pub fn list_every_manager(
    conn: &Connection,
    state: StateFilter,
    visibility: VisibilityFilter,
) -> Result<Listing> {
    let threads = query_threads(
        conn,
        include_str!("../sql/list_every_manager.sql"),
        named_params! {":state": state.sql(), ":visibility": visibility.sql()},
    )?;
    Ok(Listing::from(threads))
}

impl From<Vec<ThreadRow>> for Listing {
    fn from(threads: Vec<ThreadRow>) -> Self {
        let live_count = threads.iter().filter(|t| t.is_live()).count();
        Listing {
            count: threads.len(),
            closed_count: threads.len() - live_count,
            live_count,
            threads,
        }
    }
}

/// Checks that `parent` and `ancestor` are not both given.
pub fn exclusive_filters(parent: Option<&str>, ancestor: Option<&str>) -> Result<()> {
    if parent.is_some() && ancestor.is_some() {
        return Err(Error::invalid(
            "parent and ancestor are mutually exclusive list filters. Choose one filter. Repair: use { \"action\": \"list\", \"parent\": \"/root/task\" } for direct children or { \"action\": \"list\", \"ancestor\": \"/root/task\" } for the whole subtree.",
        ));
    }
    Ok(())
}
