//! `list` filters as SQL: state, visibility, and `parent` (direct children) or `ancestor`
//! (every descendant, one index range scan), sorted by canonical path. `threadbase top` applies
//! the same state and visibility filters to the rows it read (`keeps`).

use crate::domain::{ManagerId, ThreadId};
use crate::store::db::{named, q, Cell, Params, Query, Row, ToParam, Value};
use crate::store::Conn;
use fallible_streaming_iterator::FallibleStreamingIterator as _;
use serde::Serialize;

use crate::error::{Error, Result};
use crate::paths::descendant_range;
use crate::store::rows::columns;
use crate::store::threads::{query_threads, threads_by_ids, ThreadRow};

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
    /// The filter's word, as requests spell it and the list statements compare it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Live => "live",
            Self::Closed => "closed",
        }
    }

    /// Whether a thread that is (or is not) live passes, for rows already read (the list
    /// statements compare `status` the same way).
    pub fn keeps(self, live: bool) -> bool {
        match self {
            Self::All => true,
            Self::Live => live,
            Self::Closed => !live,
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
    /// The filter's word, as requests spell it and the list statements compare it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Archived => "archived",
            Self::All => "all",
        }
    }

    /// Whether a thread that is (or is not) archived passes, for rows already read (the list
    /// statements compare `archived` the same way).
    pub fn keeps(self, archived: bool) -> bool {
        match self {
            Self::Active => !archived,
            Self::Archived => archived,
            Self::All => true,
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
/// reads only those rows, through a partial index (migrations/V3). `tests/it/query_plans.rs`
/// checks the plan of every variant.
pub fn statement(q: &ListQuery) -> &'static Query {
    let narrow = match (q.state, q.visibility) {
        (StateFilter::Live, _) => Narrow::Live,
        (_, VisibilityFilter::Archived) => Narrow::Archived,
        _ => Narrow::No,
    };
    match (&q.subtree, narrow) {
        (Subtree::Everything, Narrow::No) => q!("list_all", listed_col),
        (Subtree::Everything, Narrow::Live) => q!("list_all_live", listed_col),
        (Subtree::Everything, Narrow::Archived) => q!("list_all_archived", listed_col),
        (Subtree::ChildrenOf(_), Narrow::No) => q!("list_children", listed_col),
        (Subtree::ChildrenOf(_), Narrow::Live) => q!("list_children_live", listed_col),
        (Subtree::ChildrenOf(_), Narrow::Archived) => {
            q!("list_children_archived", listed_col)
        }
        (Subtree::DescendantsOf(_), Narrow::No) => q!("list_descendants", listed_col),
        (Subtree::DescendantsOf(_), Narrow::Live) => {
            q!("list_descendants_live", listed_col)
        }
        (Subtree::DescendantsOf(_), Narrow::Archived) => {
            q!("list_descendants_archived", listed_col)
        }
    }
}

#[derive(Clone, Copy)]
enum Narrow {
    No,
    Live,
    Archived,
}

/// The second statement of a `parent` / `ancestor` list: the threads below the manager's own,
/// held by the contract A managers of its children's own serves (and theirs). `list` with no
/// filter is the manager's own threads only, as the contract says.
pub fn reach_statement(q: &ListQuery) -> Option<&'static Query> {
    match q.subtree {
        Subtree::Everything => None,
        Subtree::ChildrenOf(_) => Some(q!("list_children_reach", listed_col)),
        Subtree::DescendantsOf(_) => Some(q!("list_descendants_reach", listed_col)),
    }
}

columns! {
    /// A list row's columns, in order (`{listed_row}` in `sql/list_*.sql` but
    /// `list_every_manager`, which read `threads t`): the thread's id, path (the merge's key)
    /// and status. [`Listed`] reads them by these positions; the whole row of a thread whose
    /// answer the serve does not keep is read by [`rows_by_ids`].
    pub mod listed_col as "{listed_row}" {
        ID = "t.id",
        PATH = "t.path",
        STATUS = "t.status",
    }
}

/// One row of a list as [`each_row`] hands it over: each field is read from the row only when
/// asked for (a count reads the status alone), so a list pass pays for what it uses.
pub struct Listed<'a>(&'a Row<'a>);

impl Listed<'_> {
    /// The thread's id.
    pub fn id(&self) -> Result<ThreadId> {
        self.0.get(listed_col::ID)
    }

    /// Whether the thread is live.
    pub fn live(&self) -> Result<bool> {
        Ok(self
            .0
            .get::<crate::domain::ThreadStatus>(listed_col::STATUS)?
            == crate::domain::ThreadStatus::Live)
    }
}

/// The thread rows of `ids`, in that order (sql/threads_by_ids.sql): the listed threads
/// whose answer the serve does not keep, a batch at a time.
pub fn rows_by_ids(conn: &Conn, ids: &[ThreadId]) -> Result<Vec<ThreadRow>> {
    let rows = threads_by_ids(conn, ids)?;
    if rows.len() != ids.len() {
        return Err(Error::internal(format!(
            "{} of {} listed threads were found again in the same read",
            rows.len(),
            ids.len()
        )));
    }
    Ok(rows)
}

/// A list statement with the parameters of `q` bound (each statement names only the ones it
/// uses).
fn bound<'c>(
    conn: &'c rusqlite::Connection,
    sql: &Query,
    manager_id: ManagerId,
    q: &ListQuery,
) -> Result<rusqlite::CachedStatement<'c>> {
    // Counted as `Conn`'s statements are (this path streams on SQLite's own connection).
    crate::store::counted::add(1, 0);
    let mut stmt = conn.prepare_cached((sql.sqlite)())?;
    if stmt.column_count() != listed_col::COUNT {
        return Err(Error::internal(format!(
            "A list query returns {} columns instead of the {} of a listed thread (id, path, status): {sql:?}",
            stmt.column_count(),
            listed_col::COUNT
        )));
    }
    let (state, visibility) = (q.state.as_str(), q.visibility.as_str());
    let (parent, path) = match &q.subtree {
        Subtree::Everything => (None, None),
        Subtree::ChildrenOf(p) => (Some(p.as_str()), Some(p.as_str())),
        Subtree::DescendantsOf(a) => (None, Some(a.as_str())),
    };
    let range = path.map(descendant_range);
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
    bind(":path", &path)?;
    if let Some((lo, hi)) = &range {
        bind(":lo", lo)?;
        bind(":hi", hi)?;
    }
    Ok(stmt)
}

/// Runs the list query of `q` for one manager and hands each row, in list order, to `f`
/// until it returns `false`. A `parent` / `ancestor` list is two statements (the manager's
/// own threads, already in order, and the threads below them in its children's managers,
/// sorted) merged by sort key, so it stays a fixed number of queries however many managers
/// the subtree spans.
pub fn each_row(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    mut f: impl FnMut(&Listed<'_>) -> Result<bool>,
) -> Result<()> {
    each_row_switching(conn, manager_id, q, usize::MAX, |r| match r {
        Some(r) => f(r),
        None => Ok(false),
    })
}

/// [`each_row`], then `f(None)` once the rows are done (not when `f` stopped the pass); once
/// `after` rows were handed over and more remain, the rest of the pass, that last call
/// included, runs in `tokio::task::block_in_place` when called on a worker of a multi-thread
/// runtime: a short list stays on the request's worker with no hand-off, a long one goes on
/// in the same statements (one read, no row stepped twice) while the worker's other tasks
/// move on.
pub fn each_row_switching(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    after: usize,
    mut f: impl FnMut(Option<&Listed<'_>>) -> Result<bool>,
) -> Result<()> {
    fn rest(
        merge: &mut Merge<'_>,
        f: &mut impl FnMut(Option<&Listed<'_>>) -> Result<bool>,
    ) -> Result<()> {
        while merge.has_more() {
            if !merge.step(f)? {
                return Ok(());
            }
        }
        f(None)?;
        Ok(())
    }
    let Some(db) = conn.sqlite() else {
        return each_row_read_whole(conn, manager_id, q, f);
    };
    let mut own = bound(db, statement(q), manager_id, q)?;
    let mut below = match reach_statement(q) {
        Some(sql) if reaches_below(conn, manager_id)? => Some(bound(db, sql, manager_id, q)?),
        _ => None,
    };
    let mut merge = Merge::new(own.raw_query(), below.as_mut().map(|b| b.raw_query()))?;
    for _ in 0..after {
        if !merge.has_more() {
            return rest(&mut merge, &mut f);
        }
        if !merge.step(&mut f)? {
            return Ok(());
        }
    }
    match tokio::runtime::Handle::try_current() {
        Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| rest(&mut merge, &mut f))
        }
        _ => rest(&mut merge, &mut f),
    }
}

/// [`each_row_switching`] on a backend without SQLite's cursors: each of the two statements is
/// read whole, then merged the same way. (A list of every thread of a big manager holds its
/// list columns in memory meanwhile: id, path and status.)
fn each_row_read_whole(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    mut f: impl FnMut(Option<&Listed<'_>>) -> Result<bool>,
) -> Result<()> {
    let (state, visibility) = (q.state.as_str(), q.visibility.as_str());
    let (parent, path) = match &q.subtree {
        Subtree::Everything => (None, None),
        Subtree::ChildrenOf(p) => (Some(p.as_str()), Some(p.as_str())),
        Subtree::DescendantsOf(a) => (None, Some(a.as_str())),
    };
    let range = path.map(descendant_range);
    let (lo, hi) = match &range {
        Some((lo, hi)) => (Some(lo.as_str()), Some(hi.as_str())),
        None => (None, None),
    };
    let values = [
        (":manager", &manager_id as &dyn ToParam),
        (":state", &state),
        (":visibility", &visibility),
        (":parent", &parent),
        (":path", &path),
        (":lo", &lo),
        (":hi", &hi),
    ];
    let owned = |r: &Row<'_>| -> Result<Vec<Value<'static>>> {
        (0..listed_col::COUNT).map(|i| r.get(i)).collect()
    };
    let own = conn.all(statement(q), Params::IfUsed(&values), owned)?;
    let below = match reach_statement(q) {
        Some(sql) if reaches_below(conn, manager_id)? => {
            conn.all(sql, Params::IfUsed(&values), owned)?
        }
        _ => Vec::new(),
    };
    let path_of = |row: &[Value<'static>]| match &row[listed_col::PATH] {
        Value::Text(t) => t.to_string(),
        _ => String::new(),
    };
    let (mut own, mut below) = (own.into_iter().peekable(), below.into_iter().peekable());
    loop {
        let take_own = match (own.peek(), below.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(x), Some(y)) => sort_order(&path_of(x), &path_of(y)).is_le(),
        };
        let next = if take_own { own.next() } else { below.next() };
        let values = next.expect("peeked");
        let cells: Vec<Cell<'_>> = values.iter().map(Value::cell).collect();
        let read = &cells[..];
        let row = Row::new(&read, "list");
        if !f(Some(&Listed(&row)))? {
            return Ok(());
        }
    }
    f(None)?;
    Ok(())
}

/// Whether a contract A manager sits right below `manager_id`, so a `parent` / `ancestor` list
/// has rows to reach there (sql/list_reach_any.sql).
fn reaches_below(conn: &Conn, manager_id: ManagerId) -> Result<bool> {
    conn.one(q!("list_reach_any"), named! {":manager": manager_id}, |r| {
        r.get(0)
    })
}

/// The manager's own rows (in list order) merged with the rows below it (sorted) by sort key;
/// each side's current row is the one `next` last moved to.
struct Merge<'s> {
    own: rusqlite::Rows<'s>,
    below: Option<rusqlite::Rows<'s>>,
    own_at_row: bool,
    below_at_row: bool,
}

impl<'s> Merge<'s> {
    fn new(mut own: rusqlite::Rows<'s>, mut below: Option<rusqlite::Rows<'s>>) -> Result<Self> {
        let own_at_row = own.next()?.is_some();
        let below_at_row = match below.as_mut() {
            Some(rows) => rows.next()?.is_some(),
            None => false,
        };
        Ok(Merge {
            own,
            below,
            own_at_row,
            below_at_row,
        })
    }

    fn has_more(&self) -> bool {
        self.own_at_row || self.below_at_row
    }

    /// Hands the next row in list order to `f`: `Ok(false)` once the rows are done or `f`
    /// asks to stop.
    fn step(&mut self, f: &mut impl FnMut(Option<&Listed<'_>>) -> Result<bool>) -> Result<bool> {
        let take_own = match (self.own_at_row, self.below_at_row) {
            (false, false) => return Ok(false),
            (true, false) => true,
            (false, true) => false,
            (true, true) => {
                let x = self.own.get().expect("own row");
                let y = self
                    .below
                    .as_ref()
                    .and_then(|r| r.get())
                    .expect("row below");
                sort_order(path_of(x)?, path_of(y)?).is_le()
            }
        };
        if take_own {
            let row = Row::new(self.own.get().expect("own row"), "list");
            if !f(Some(&Listed(&row)))? {
                return Ok(false);
            }
            self.own_at_row = self.own.next()?.is_some();
        } else {
            let rows = self.below.as_mut().expect("rows below");
            let row = Row::new(rows.get().expect("row below"), "list");
            if !f(Some(&Listed(&row)))? {
                return Ok(false);
            }
            self.below_at_row = rows.next()?.is_some();
        }
        Ok(true)
    }
}

fn path_of<'r>(r: &'r rusqlite::Row<'_>) -> Result<&'r str> {
    r.get_ref(listed_col::PATH)?.as_str().map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            listed_col::PATH,
            rusqlite::types::Type::Text,
            e.into(),
        )
        .into()
    })
}

/// Paths compared as their `sort_key` (`_` mapped to `!`, below `/`), the list order.
pub fn sort_order(a: &str, b: &str) -> std::cmp::Ordering {
    let key = |c: u8| if c == b'_' { b'!' } else { c };
    a.bytes().map(key).cmp(b.bytes().map(key))
}

/// Runs a list query against one manager's threads.
pub fn list(conn: &Conn, manager_id: ManagerId, q: &ListQuery) -> Result<Listing> {
    Ok(Listing::from(
        list_at_most(conn, manager_id, q, usize::MAX)?.unwrap_or_default(),
    ))
}

/// The listed rows, or `None` when there are more than `max` (read no further).
pub fn list_at_most(
    conn: &Conn,
    manager_id: ManagerId,
    q: &ListQuery,
    max: usize,
) -> Result<Option<Vec<ThreadRow>>> {
    let mut ids: Vec<ThreadId> = Vec::new();
    let mut over = false;
    each_row(conn, manager_id, q, |r| {
        if ids.len() == max {
            over = true;
            return Ok(false);
        }
        ids.push(r.id()?);
        Ok(true)
    })?;
    if over {
        return Ok(None);
    }
    Ok(Some(rows_by_ids(conn, &ids)?))
}

/// Every manager's threads, for the inspection CLI.
pub fn list_every_manager(
    conn: &Conn,
    state: StateFilter,
    visibility: VisibilityFilter,
) -> Result<Listing> {
    let threads = query_threads(
        conn,
        q!("list_every_manager", crate::store::threads::col),
        named! {":state": state.as_str(), ":visibility": visibility.as_str()},
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Phase, ThreadStatus};
    use crate::store::counted;
    use crate::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec, NewThread};

    /// SQLite's streaming list counts its statements as the path that reads them whole (every
    /// other backend's) does, so a request's statement count says the same on both.
    #[tokio::test]
    async fn the_streamed_list_counts_its_statements_as_the_whole_read_does() {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::Store::open(dir.path().join("t.sqlite")).unwrap();
        let m = store
            .write(|tx| {
                let m = upsert_manager(
                    tx,
                    &ManagerSpec::new(&"s".into(), Contract::Thread, "/root"),
                )?;
                for id in ["thread_000000000001", "thread_000000000002"] {
                    let t = NewThread::under_root(id, m, ThreadStatus::Live, Phase::Idle);
                    insert_thread(tx, &t)?;
                }
                Ok(m)
            })
            .unwrap();
        let conn = store.read().unwrap();
        let q = ListQuery::default();
        let (streamed, by_stream) = counted::count(async {
            let mut n = 0;
            each_row_switching(&conn, m, &q, usize::MAX, |r| {
                n += usize::from(r.is_some());
                Ok(true)
            })
            .unwrap();
            n
        })
        .await;
        let (read, by_whole_read) = counted::count(async {
            let mut n = 0;
            each_row_read_whole(&conn, m, &q, |r| {
                n += usize::from(r.is_some());
                Ok(true)
            })
            .unwrap();
            n
        })
        .await;
        assert_eq!((streamed, read), (2, 2));
        assert!(by_whole_read.statements > 0);
        assert_eq!(by_stream, by_whole_read);
    }
}
