//! The random tree of threads the property tests build: a list of node specs (a strategy)
//! turned into nodes in creation order. What differs between the tests is a `Shape`: the
//! names, whether independent roots such as `/a` may stand beside `/root`, and how deep the
//! tree may grow.

use proptest::prelude::*;
use proptest::sample::Index;

use proptest::sample::select;
use threadbase::store::list::{StateFilter, VisibilityFilter};
use threadbase::Store;

use super::common::{add, manager, temp_db, thread, tid, TempDb};

/// One node to be: where it hangs, its name, and its flags.
#[derive(Debug, Clone)]
pub struct NodeSpec {
    /// Picks among the parents the shape allows (see `build`).
    pub parent: Index,
    pub name: String,
    pub live: bool,
    pub archived: bool,
}

/// A thread of the tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// `tid(k + 1)` for spec `k`.
    pub id: String,
    pub path: String,
    /// The parent node's index; `None` under `/root` or for an independent root.
    pub parent: Option<usize>,
    /// The parent's path: `/root` or the parent node's; `None` for an independent root.
    pub parent_path: Option<String>,
    /// The last segment of `path` (the task name in contract A).
    pub name: String,
    pub live: bool,
    pub archived: bool,
}

impl Node {
    /// Whether a list with these filters keeps this node (the model of `state` and
    /// `visibility`).
    pub fn kept_by(&self, state: StateFilter, visibility: VisibilityFilter) -> bool {
        let state_ok = match state {
            StateFilter::All => true,
            StateFilter::Live => self.live,
            StateFilter::Closed => !self.live,
        };
        let visibility_ok = match visibility {
            VisibilityFilter::All => true,
            VisibilityFilter::Active => !self.archived,
            VisibilityFilter::Archived => self.archived,
        };
        state_ok && visibility_ok
    }
}

/// What a test's trees may look like.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// A spec may start a new independent root (`/name`).
    pub independent_roots: bool,
    /// Paths have at most this many segments (counting `root`); `None`: no limit.
    pub max_depth: Option<usize>,
}

/// `len` node specs with names from `name`; about 30% archived.
pub fn specs(
    name: impl Strategy<Value = String>,
    len: impl Into<prop::collection::SizeRange>,
) -> impl Strategy<Value = Vec<NodeSpec>> {
    let spec = (
        any::<Index>(),
        name,
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(parent, name, live, archived)| NodeSpec {
            parent,
            name,
            live,
            archived,
        });
    prop::collection::vec(spec, len)
}

/// Any state filter of a list.
pub fn state_filter() -> impl Strategy<Value = StateFilter> {
    select(&[StateFilter::All, StateFilter::Live, StateFilter::Closed][..])
}

/// Any visibility filter of a list.
pub fn visibility_filter() -> impl Strategy<Value = VisibilityFilter> {
    select(
        &[
            VisibilityFilter::Active,
            VisibilityFilter::Archived,
            VisibilityFilter::All,
        ][..],
    )
}

/// Names picked from a fixed list.
pub fn names(list: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::sample::select(list).prop_map(String::from)
}

/// The nodes, in creation order. Spec `k`'s parent is picked among: a new independent root
/// (if the shape allows), `/root`, and the nodes so far that are shallower than the shape's
/// limit. A spec whose path is `/root` or already exists is skipped.
pub fn build(specs: &[NodeSpec], shape: Shape) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::new();
    for (k, s) in specs.iter().enumerate() {
        // `None` for an independent root, `Some(None)` for `/root`, `Some(Some(i))` for node i.
        let mut candidates: Vec<Option<Option<usize>>> = Vec::new();
        if shape.independent_roots {
            candidates.push(None);
        }
        candidates.push(Some(None));
        candidates.extend(
            (0..nodes.len())
                .filter(|&i| shape.max_depth.is_none_or(|d| depth(&nodes[i].path) < d))
                .map(|i| Some(Some(i))),
        );
        let pick = candidates[s.parent.index(candidates.len())];
        let parent_path = pick.map(|p| p.map_or("/root".to_string(), |i| nodes[i].path.clone()));
        let path = format!("{}/{}", parent_path.as_deref().unwrap_or(""), s.name);
        if path == "/root" || nodes.iter().any(|n| n.path == path) {
            continue;
        }
        nodes.push(Node {
            id: tid(k as u64 + 1),
            path,
            parent: pick.flatten(),
            parent_path,
            name: s.name.clone(),
            live: s.live,
            archived: s.archived,
        });
    }
    nodes
}

/// Segments in a path: `/root/a` has 2.
fn depth(path: &str) -> usize {
    path.matches('/').count()
}

/// A database seeded with a tree: `mine` holds the nodes; `theirs` (another root session)
/// holds copies of some of them (the same paths under other ids).
pub struct Seeded {
    pub db: TempDb,
    pub store: Store,
    /// The manager holding the nodes.
    pub mine: threadbase::domain::ManagerId,
    /// The copies' ids, in node order.
    pub copy_ids: Vec<String>,
}

/// How `seed` writes the copies: how many (the first nodes), the first copy's id number (ids
/// count up from `tid(id_base)`), and whether a copy's live flag is the node's or its opposite.
pub struct Copies {
    pub count: usize,
    pub id_base: u64,
    pub flip_live: bool,
}

/// Writes `nodes` for a manager of session `sessions.0` and `copies` for one of `sessions.1`,
/// then archives the nodes marked archived.
pub fn seed(nodes: &[Node], sessions: (&str, &str), copies: Copies) -> Seeded {
    let db = temp_db();
    let store = Store::open(&db.path).expect("open");
    let mine = manager(&store, sessions.0);
    let theirs = manager(&store, sessions.1);
    let rows: Vec<_> = nodes
        .iter()
        .map(|n| thread(&n.id, mine, &n.path, n.live))
        .collect();
    add(&store, &rows);
    let copy_rows: Vec<_> = nodes
        .iter()
        .take(copies.count)
        .enumerate()
        .map(|(i, n)| {
            let id = tid(copies.id_base + i as u64);
            thread(&id, theirs, &n.path, n.live != copies.flip_live)
        })
        .collect();
    add(&store, &copy_rows);
    store
        .write(|tx| {
            for n in nodes.iter().filter(|n| n.archived) {
                tx.execute_script(&format!(
                    "UPDATE threads SET archived = 1 WHERE id = {}",
                    super::sql::lit(&n.id)
                ))?;
            }
            Ok(())
        })
        .expect("archive");
    Seeded {
        db,
        store,
        mine,
        copy_ids: copy_rows.into_iter().map(|t| t.id.into_string()).collect(),
    }
}
