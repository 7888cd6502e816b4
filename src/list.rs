//! `list` filters as SQL: state, visibility, and `parent` (direct children) or `ancestor`
//! (every descendant, one index range scan), sorted by canonical path.

use rusqlite::{named_params, Connection};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::paths::descendant_range;
use crate::store::threads::{query_threads, ThreadRow};

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

/// Runs a list query against one manager's threads.
pub fn list(conn: &Connection, manager_id: i64, q: &ListQuery) -> Result<Listing> {
    let (state, visibility) = (q.state.sql(), q.visibility.sql());
    let threads = match &q.subtree {
        Subtree::Everything => query_threads(
            conn,
            include_str!("../sql/list_all.sql"),
            named_params! {":manager": manager_id, ":state": state, ":visibility": visibility},
        )?,
        Subtree::ChildrenOf(parent) => query_threads(
            conn,
            include_str!("../sql/list_children.sql"),
            named_params! {":manager": manager_id, ":parent": parent, ":state": state, ":visibility": visibility},
        )?,
        Subtree::DescendantsOf(ancestor) => {
            let (lo, hi) = descendant_range(ancestor);
            query_threads(
                conn,
                include_str!("../sql/list_descendants.sql"),
                named_params! {":manager": manager_id, ":lo": lo, ":hi": hi, ":state": state, ":visibility": visibility},
            )?
        }
    };
    Ok(Listing::from(threads))
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
