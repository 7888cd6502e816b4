//! Property tests for the whole-tree stitching (`thread_forest`) and the usage rollups
//! (`subtree_usage`, `tree_usage`): on random trees spread over the managers the three
//! contracts create (a root's `thread` manager, children's own managers found by
//! `self_thread_id` or by parent path, a contract B registry, contract C workers and the
//! workers' own serves), every thread's root session and parent are the model's, and every
//! rollup equals a naive recursive sum over the model. The migration's backfill of existing
//! rows places every thread exactly as the insert trigger did.

use crate::support::common;
use crate::support::prop::config;
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
use threadbase::domain::{Phase, SessionId, ThreadId, ThreadStatus};

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, NewThread};
use threadbase::store::usage::{self, Usage};
use threadbase::Store;

/// How a new thread comes to be.
#[derive(Debug, Clone)]
enum Kind {
    /// Contract A, started by a root session's own serve: `/root/<seg>`.
    TopA,
    /// Contract A, started by an existing thread's own serve (its manager's self thread);
    /// `parent_id` recorded or not (the manager's self thread links it either way).
    ChildA { with_parent_id: bool },
    /// Contract B in the root's registry, under an existing B thread when the pick is one.
    Agent,
    /// Contract C: a worker of the root's coordinator manager.
    Worker,
    /// Contract A, started by a worker's own serve (a top-level session whose id is the
    /// worker's id, no self thread).
    WorkerChild,
}

#[derive(Debug, Clone)]
struct Op {
    kind: Kind,
    root: usize,
    pick: Index,
    segment: String,
    /// Messages: (input, output, cache read, cache write, cost in 1/256 dollars, tool calls).
    messages: Vec<(i64, i64, i64, i64, u32, i64)>,
}

fn op() -> impl Strategy<Value = Op> {
    let kind = prop_oneof![
        2 => Just(Kind::TopA),
        3 => any::<bool>().prop_map(|with_parent_id| Kind::ChildA { with_parent_id }),
        2 => Just(Kind::Agent),
        1 => Just(Kind::Worker),
        2 => Just(Kind::WorkerChild),
    ];
    let message = (0i64..5000, 0i64..900, 0i64..3, 0i64..2, 0u32..64, 0i64..3)
        .prop_map(|(i, o, cr, cw, c, t)| (i, o, cr * 1000, cw * 64, c, t));
    (
        kind,
        0usize..3,
        any::<Index>(),
        select(&["a", "a_b", "a-b", "a1", "b", "root", "x"][..]),
        prop::collection::vec(message, 0..4),
    )
        .prop_map(|(kind, root, pick, segment, messages)| Op {
            kind,
            root,
            pick,
            segment: segment.to_string(),
            messages,
        })
}

#[derive(Debug, Clone)]
struct Node {
    id: String,
    contract: &'static str,
    path: String,
    root: String,
    parent: Option<usize>,
    usage: Usage,
}

fn manager(
    store: &Store,
    session: &str,
    contract: Contract,
    scope: &str,
    self_id: Option<&str>,
) -> threadbase::domain::ManagerId {
    store
        .write(|tx| {
            let (session, self_id) = (SessionId::new(session), self_id.map(ThreadId::new));
            upsert_manager(
                tx,
                &common::manager_spec(&session, contract, scope, self_id.as_ref()),
            )
        })
        .unwrap()
}

/// Builds the random forest; returns the model (threads the store refused, a path taken in
/// one manager, are not in it).
fn build(store: &Store, ops: &[Op]) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::new();
    for (n, op) in ops.iter().enumerate() {
        let root = format!("ses_root{}", op.root);
        let id = format!("thread_{n:012x}");
        let of_root: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].root == root)
            .collect();
        let pick = |want: &dyn Fn(&Node) -> bool| -> Option<usize> {
            let c: Vec<usize> = of_root
                .iter()
                .copied()
                .filter(|&i| want(&nodes[i]))
                .collect();
            (!c.is_empty()).then(|| c[op.pick.index(c.len())])
        };
        let (manager_id, id, path, parent_path, parent_id, parent) = match op.kind {
            Kind::TopA => (
                manager(store, &root, Contract::Thread, "/root", None),
                id,
                format!("/root/{}", op.segment),
                Some("/root".to_string()),
                None,
                None,
            ),
            Kind::ChildA { with_parent_id } => {
                let Some(p) = pick(&|t| t.contract == "thread" && t.path.starts_with("/root"))
                else {
                    continue;
                };
                let t = &nodes[p];
                let session = format!("ses_of_{}", t.id);
                (
                    manager(store, &session, Contract::Thread, &t.path, Some(&t.id)),
                    id,
                    format!("{}/{}", t.path, op.segment),
                    Some(t.path.clone()),
                    with_parent_id.then(|| t.id.as_str().into()),
                    Some(p),
                )
            }
            Kind::Agent => {
                let m = manager(store, &root, Contract::Agent, "/root", None);
                match pick(&|t| t.contract == "agent") {
                    Some(p) => (
                        m,
                        id,
                        format!("{}/{}", nodes[p].path, op.segment),
                        Some(nodes[p].path.clone()),
                        Some(nodes[p].id.clone()),
                        Some(p),
                    ),
                    None => (
                        m,
                        id,
                        format!("/root/{}", op.segment),
                        Some("/root".into()),
                        None,
                        None,
                    ),
                }
            }
            Kind::Worker => {
                let worker = format!("ses_{n:032x}");
                (
                    manager(store, &root, Contract::Worker, "/", None),
                    worker.clone(),
                    format!("/{worker}"),
                    None,
                    None,
                    None,
                )
            }
            Kind::WorkerChild => {
                let Some(w) = pick(&|t| t.contract == "worker") else {
                    continue;
                };
                let worker = nodes[w].id.clone();
                (
                    manager(store, &worker, Contract::Thread, "/root", None),
                    id,
                    format!("/root/{}", op.segment),
                    Some("/root".into()),
                    None,
                    Some(w),
                )
            }
        };
        let task_name = path.rsplit('/').next().unwrap().to_string();
        let inserted = store.write(|tx| {
            insert_thread(
                tx,
                &NewThread {
                    id: id.as_str().into(),
                    manager_id,
                    path: path.clone(),
                    parent_path: parent_path.clone(),
                    parent_id: parent_id.clone().map(ThreadId::from),
                    name: task_name.clone(),
                    task_name: task_name.clone(),
                    depth: 1,
                    cwd: "/tmp".into(),
                    status: ThreadStatus::Live,
                    phase: Phase::Idle,
                    ..Default::default()
                },
            )
        });
        if inserted.is_err() {
            continue;
        }
        let mut sum = Usage::default();
        for &(i, o, cr, cw, c, t) in &op.messages {
            let m = Usage {
                input_tokens: i,
                output_tokens: o,
                cache_read_tokens: cr,
                cache_write_tokens: cw,
                cost_usd: f64::from(c) / 256.0,
                turns: 1,
                tool_calls: t,
            };
            store
                .write(|tx| usage::add(tx, &ThreadId::new(&id), &m, "2026-01-01T00:00:00.000Z"))
                .unwrap();
            sum.add(&m);
        }
        let tree_root = parent.map_or(root, |p| nodes[p].root.clone());
        nodes.push(Node {
            id,
            contract: match op.kind {
                Kind::Agent => "agent",
                Kind::Worker => "worker",
                _ => "thread",
            },
            path,
            root: tree_root,
            parent,
            usage: sum,
        });
    }
    nodes
}

/// The naive rollup: a thread's own usage plus, recursively, its children's.
fn naive(nodes: &[Node], i: usize) -> (i64, Usage) {
    let mut n = 1;
    let mut u = nodes[i].usage;
    for (j, c) in nodes.iter().enumerate() {
        if c.parent == Some(i) {
            let (cn, cu) = naive(nodes, j);
            n += cn;
            u.add(&cu);
        }
    }
    (n, u)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn rollups_equal_a_naive_sum(ops in prop::collection::vec(op(), 1..40)) {
        let db = common::temp_db();
        let store = Store::open(&db.path).unwrap();
        let nodes = build(&store, &ops);
        let conn = store.read().unwrap();
        let index: BTreeMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.id.as_str(), i)).collect();

        // Every thread: its root session and the thread it hangs under.
        let mut stmt = conn.prepare("SELECT id, root_session, forest_parent_id FROM thread_forest").unwrap();
        let forest: Vec<(String, String, Option<String>)> = stmt
            .query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap();
        drop(stmt);
        prop_assert_eq!(forest.len(), nodes.len());
        for (id, root, parent) in &forest {
            let n = &nodes[index[id.as_str()]];
            prop_assert_eq!(root, &n.root, "{}", id);
            prop_assert_eq!(parent.as_deref(), n.parent.map(|p| nodes[p].id.as_str()), "{}", id);
        }

        // Every subtree, from the view and from the one-thread query.
        for (i, n) in nodes.iter().enumerate() {
            let (count, want) = naive(&nodes, i);
            let got = usage::of_subtree(&conn, &ThreadId::new(&n.id)).unwrap().expect("a subtree");
            prop_assert_eq!(got.threads, count, "{}", n.path);
            prop_assert_eq!(got.usage, want, "{}", n.path);
            let (path, threads, input, output, cost): (String, i64, i64, i64, f64) = conn.query_row(
                    "SELECT path, threads, input_tokens, output_tokens, cost_usd FROM subtree_usage WHERE thread_id = ?1",
                    [&n.id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .unwrap();
            prop_assert_eq!(&path, &n.path);
            prop_assert_eq!((threads, input, output, cost), (count, want.input_tokens, want.output_tokens, want.cost_usd));
        }

        // Every tree's running total.
        let mut trees: BTreeMap<&str, (i64, Usage)> = BTreeMap::new();
        for n in &nodes {
            let t = trees.entry(n.root.as_str()).or_default();
            t.0 += 1;
            t.1.add(&n.usage);
        }
        let stored: i64 = conn.query_row("SELECT count(*) FROM tree_usage", (), |r| r.get(0)).unwrap();
        prop_assert_eq!(stored as usize, trees.len());
        for (root, (count, want)) in &trees {
            let got = usage::tree_spend(&conn, usage::TreeOf { thread_id: None, self_id: None, session_id: &SessionId::new(*root) }).unwrap();
            prop_assert_eq!(got.threads, *count, "{}", root);
            prop_assert_eq!(got.usage, *want, "{}", root);
        }
        // A thread's own tree is found from the thread, from a child serve's self thread and
        // from a worker's session id.
        for n in &nodes {
            let by_thread = usage::tree_spend(&conn, usage::TreeOf { thread_id: Some(&ThreadId::new(&n.id)), self_id: None, session_id: &SessionId::new("nobody") }).unwrap();
            prop_assert_eq!(&by_thread.root_session, &n.root);
            let by_self = usage::tree_spend(&conn, usage::TreeOf { thread_id: None, self_id: Some(&ThreadId::new(&n.id)), session_id: &SessionId::new("nobody") }).unwrap();
            prop_assert_eq!(&by_self.root_session, &n.root);
            if n.contract == "worker" {
                let by_session = usage::tree_spend(&conn, usage::TreeOf { thread_id: None, self_id: None, session_id: &SessionId::new(&n.id) }).unwrap();
                prop_assert_eq!(&by_session.root_session, &n.root);
            }
        }
        drop(conn);

        // SQLite's V4 migration's backfill (so on SQLite), run over the same rows, places every
        // thread the same way.
        if crate::support::database_is_sqlite(&db.path) {
            // The migration's backfill, run over the same rows, places every thread the same way.
            let migration = include_str!("../../migrations/V4__usage_and_forest.sql");
            let start = migration.find("-- Places for the threads that exist already").unwrap();
            let end = migration.find("-- Threads recorded before this version").unwrap();
            let mut raw = rusqlite::Connection::open(&db.path).unwrap();
            let tx = raw.transaction().unwrap();
            let dump = |tx: &rusqlite::Connection| -> Vec<(String, String, Option<String>, String, i64)> {
                let mut s = tx.prepare("SELECT thread_id, root_session, forest_parent_id, tree_key, level FROM thread_places ORDER BY thread_id").unwrap();
                s.query_map((), |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))
                    .unwrap()
                    .collect::<rusqlite::Result<_>>()
                    .unwrap()
            };
            let by_trigger = dump(&tx);
            tx.execute_batch("DELETE FROM thread_places").unwrap();
            tx.execute_batch(&migration[start..end]).unwrap();
            prop_assert_eq!(dump(&tx), by_trigger);
            tx.rollback().unwrap();
        }
    }
}

/// A hand-deleted thread leaves its tree's total (the engine never deletes one).
#[test]
fn a_deleted_thread_leaves_its_trees_total() {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let m = common::manager(&store, "ses_root");
    common::add(
        &store,
        &[
            common::thread(&common::tid(1), m, "/root/a", true),
            common::thread(&common::tid(2), m, "/root/b", true),
        ],
    );
    let spent = |n: i64| Usage {
        input_tokens: n,
        output_tokens: 2 * n,
        cost_usd: 0.5,
        turns: 1,
        ..Usage::default()
    };
    store
        .write(|tx| {
            usage::add(
                tx,
                &ThreadId::new(common::tid(1)),
                &spent(10),
                "2026-01-01T00:00:00.000Z",
            )?;
            usage::add(
                tx,
                &ThreadId::new(common::tid(2)),
                &spent(100),
                "2026-01-01T00:00:01.000Z",
            )
        })
        .unwrap();
    let tree = |store: &Store| {
        let conn = store.read().unwrap();
        usage::tree_spend(
            &conn,
            usage::TreeOf {
                thread_id: None,
                self_id: None,
                session_id: &SessionId::new("ses_root"),
            },
        )
        .unwrap()
    };
    assert_eq!(
        (tree(&store).threads, tree(&store).usage.input_tokens),
        (2, 110)
    );
    store
        .write(|tx| {
            tx.execute_script(&crate::support::sql::with(
                "DELETE FROM threads WHERE id = ?1",
                [common::tid(2)],
            ))?;
            Ok(())
        })
        .unwrap();
    let after = tree(&store);
    assert_eq!(
        (
            after.threads,
            after.usage.input_tokens,
            after.usage.output_tokens
        ),
        (1, 10, 20)
    );
    assert_eq!(after.usage.cost_usd, 0.5);
    assert_eq!(after.usage.turns, 1);
}
