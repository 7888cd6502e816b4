//! Property tests for contract A's reach below a manager: on random trees spread over managers
//! the way serves spread them (the root's manager holds `/root/*`, each thread with children
//! has its own serve's manager holding them, with that thread as its self thread), from every
//! manager, `list ancestor`/`parent` equal a naive filter of the subtree in list order, and a
//! reference by id, path or task name resolves as the model says: the manager's own threads
//! first, then the threads below it; never a thread outside its subtree, a thread of another
//! root session with the same paths, or one below a contract B manager.

use crate::support::common;
use crate::support::prop::{config, locale_cmp};
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
use crate::support::tree::{self, Node, Shape};

use proptest::prelude::*;
use threadbase::domain::{SessionId, ThreadId};
use threadbase::store::list::{list, ListQuery, StateFilter, Subtree, VisibilityFilter};
use threadbase::store::refs::{resolve, RefScope};
use threadbase::store::threads::{insert_thread, upsert_manager, Contract, ManagerSpec};
use threadbase::{ErrorCode, Store};

use common::{manager_spec, temp_db, thread, tid};

/// Few names, so equal basenames on different branches (and in different managers) are common.
const NAMES: &[&str] = &["a", "b", "a_b", "a1", "docs"];

/// Every node under `/root`, at most four segments deep (`/root/a/b/c`).
const SHAPE: Shape = Shape {
    independent_roots: false,
    max_depth: Some(4),
};

/// A manager of the model: its scope, its self thread (a node) and its own threads.
#[derive(Debug, Clone)]
struct Mgr {
    db_id: threadbase::domain::ManagerId,
    scope: String,
    own: Vec<usize>,
}

/// Writes the tree: the root's manager, one manager per node with children (created after
/// that node, as a child's serve registers after its thread exists), every node in the
/// manager of its parent. Plus noise: another root session holding the same paths, and a
/// contract B manager under the first node holding a thread below it.
fn seed(nodes: &[Node]) -> (common::TempDb, Store, Vec<Mgr>) {
    let db = temp_db();
    let store = Store::open(&db.path).expect("open");
    let mgrs = store
        .write(|tx| {
            let root = add_manager(tx, "ses_root", Contract::Thread, "/root", None)?;
            let mut mgrs = vec![Mgr {
                db_id: root,
                scope: "/root".into(),
                own: vec![],
            }];
            // The manager each node's children go to, created on first use.
            let mut of_node: Vec<Option<usize>> = vec![None; nodes.len()];
            for (i, n) in nodes.iter().enumerate() {
                let m = match n.parent {
                    None => 0,
                    Some(p) => match of_node[p] {
                        Some(m) => m,
                        None => {
                            let id = add_manager(
                                tx,
                                &format!("ses_of_{}", nodes[p].id),
                                Contract::Thread,
                                &nodes[p].path,
                                Some(&nodes[p].id),
                            )?;
                            mgrs.push(Mgr {
                                db_id: id,
                                scope: nodes[p].path.clone(),
                                own: vec![],
                            });
                            of_node[p] = Some(mgrs.len() - 1);
                            mgrs.len() - 1
                        }
                    },
                };
                mgrs[m].own.push(i);
                let mut row = thread(&n.id, mgrs[m].db_id, &n.path, true);
                row.parent_id = n.parent.map(|p| nodes[p].id.as_str().into());
                insert_thread(tx, &row)?;
                if !n.live {
                    tx.execute_script(&crate::support::sql::with(
                        "UPDATE threads SET status='closed', phase='stale', exit_kind='stale', exit_message='seeded' WHERE id=?1",
                        [&n.id]))?;
                }
            }
            // Noise: another root session with every path, each in its own root manager.
            let other = add_manager(tx, "ses_other", Contract::Thread, "/root", None)?;
            for (i, n) in nodes.iter().enumerate() {
                insert_thread(tx, &thread(&tid(0x10_0000 + i as u64), other, &n.path, true))?;
            }
            // Noise: a contract B manager hanging under the first node, with a thread below it.
            if let Some(first) = nodes.first() {
                let agent =
                    add_manager(tx, "ses_agent", Contract::Agent, &first.path, Some(&first.id))?;
                let path = format!("{}/agent_x", first.path);
                insert_thread(tx, &thread(&tid(0x20_0000), agent, &path, true))?;
            }
            Ok(mgrs)
        })
        .expect("seed");
    (db, store, mgrs)
}

fn add_manager(
    tx: &threadbase::store::Conn,
    session: &str,
    contract: Contract,
    scope: &str,
    self_id: Option<&str>,
) -> threadbase::Result<threadbase::domain::ManagerId> {
    let (session, self_id) = (SessionId::new(session), self_id.map(ThreadId::new));
    upsert_manager(
        tx,
        &ManagerSpec {
            depth: scope.matches('/').count() as i64 - 1,
            cwd: Some("/tmp"),
            ..manager_spec(&session, contract, scope, self_id.as_ref())
        },
    )
}

/// The nodes a manager reaches: its subtree (every node below its scope).
fn reach(nodes: &[Node], m: &Mgr) -> Vec<usize> {
    let prefix = format!("{}/", m.scope);
    (0..nodes.len())
        .filter(|&i| nodes[i].path.starts_with(&prefix))
        .collect()
}

fn sorted_paths(nodes: &[Node], mut idx: Vec<usize>) -> Vec<String> {
    idx.sort_by(|&a, &b| locale_cmp(&nodes[a].path, &nodes[b].path));
    idx.into_iter().map(|i| nodes[i].path.clone()).collect()
}

fn listed(store: &Store, m: &Mgr, subtree: Subtree, state: StateFilter) -> Vec<String> {
    let conn = store.read().unwrap();
    let q = ListQuery {
        state,
        visibility: VisibilityFilter::All,
        subtree,
    };
    list(&conn, m.db_id, &q)
        .unwrap()
        .threads
        .into_iter()
        .map(|t| t.path)
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lists_and_references_reach_the_whole_subtree(
        specs in tree::specs(tree::names(NAMES), 1..28),
        probes in prop::collection::vec(0usize..64, 4),
    ) {
        let nodes = tree::build(&specs, SHAPE);
        let (_db, store, mgrs) = seed(&nodes);
        let conn = store.read().unwrap();
        for m in &mgrs {
            let below = reach(&nodes, m);
            // list ancestor / parent: at the scope, at nodes, and at a path nothing has.
            let mut targets = vec![m.scope.clone(), format!("{}/zz", m.scope)];
            targets.extend(probes.iter().map(|p| nodes[p % nodes.len()].path.clone()));
            for p in &targets {
                let want: Vec<usize> = below
                    .iter()
                    .copied()
                    .filter(|&i| nodes[i].path.starts_with(&format!("{p}/")))
                    .collect();
                prop_assert_eq!(
                    listed(&store, m, Subtree::DescendantsOf(p.clone()), StateFilter::All),
                    sorted_paths(&nodes, want.clone()),
                    "ancestor {} from {}", p, m.scope
                );
                let live: Vec<usize> = want.iter().copied().filter(|&i| nodes[i].live).collect();
                prop_assert_eq!(
                    listed(&store, m, Subtree::DescendantsOf(p.clone()), StateFilter::Live),
                    sorted_paths(&nodes, live),
                    "live ancestor {} from {}", p, m.scope
                );
                let children: Vec<usize> = below
                    .iter()
                    .copied()
                    .filter(|&i| threadbase::paths::parent_path(&nodes[i].path) == Some(p.as_str()))
                    .collect();
                prop_assert_eq!(
                    listed(&store, m, Subtree::ChildrenOf(p.clone()), StateFilter::All),
                    sorted_paths(&nodes, children),
                    "parent {} from {}", p, m.scope
                );
            }
            // No filter: the manager's own threads only.
            prop_assert_eq!(
                listed(&store, m, Subtree::Everything, StateFilter::All),
                sorted_paths(&nodes, m.own.clone())
            );
            let scope = RefScope {
                manager_id: m.db_id,
                current_path: &m.scope,
                self_id: None,
            };
            for (i, n) in nodes.iter().enumerate() {
                let reached = below.contains(&i);
                // By id and by canonical path: found exactly when below the scope.
                for reference in [n.id.clone(), n.path.clone()] {
                    match resolve(&conn, scope, &reference) {
                        Ok(t) => {
                            prop_assert!(reached, "{} from {} found {}", reference, m.scope, t.path);
                            prop_assert_eq!(t.id.as_str(), n.id.as_str());
                        }
                        Err(e) => {
                            prop_assert!(!reached, "{} from {}: {}", reference, m.scope, e.message);
                            prop_assert_eq!(e.code, ErrorCode::UnknownReference);
                        }
                    }
                }
                // A path relative to the scope.
                if reached {
                    let rel = &n.path[m.scope.len() + 1..];
                    let t = resolve(&conn, scope, rel).unwrap();
                    prop_assert_eq!(t.id.as_str(), n.id.as_str());
                }
            }
            // By task name: the own thread with it, else the one below with it, else several
            // below are ambiguous (listed in path order), else unknown.
            for name in NAMES {
                let base = |i: &usize| threadbase::paths::basename(&nodes[*i].path) == *name;
                let own: Vec<usize> = m.own.iter().copied().filter(base).collect();
                let deeper: Vec<usize> = below
                    .iter()
                    .copied()
                    .filter(|i| !m.own.contains(i))
                    .filter(base)
                    .collect();
                let got = resolve(&conn, scope, name);
                match (own.len(), deeper.len()) {
                    (1, _) => prop_assert_eq!(got.unwrap().id.into_string(), nodes[own[0]].id.clone()),
                    (0, 1) => prop_assert_eq!(got.unwrap().id.into_string(), nodes[deeper[0]].id.clone()),
                    (0, 0) => prop_assert_eq!(got.unwrap_err().code, ErrorCode::UnknownReference),
                    (0, _) => {
                        let e = got.unwrap_err();
                        prop_assert_eq!(e.code, ErrorCode::AmbiguousReference);
                        let want = sorted_paths(&nodes, deeper).join(", ");
                        prop_assert!(
                            e.message.contains(&format!("Candidate paths: {want}. Repair:")),
                            "{} from {}: {}", name, m.scope, e.message
                        );
                    }
                    _ => unreachable!("own threads are children of one scope: names differ"),
                }
            }
        }
    }
}
