//! The whole tree of each root session, for `tree`, `list` and `top`. Every child Pi runs its
//! own serve and so its own manager; `thread_places` (migration V4) hangs each child manager's
//! threads under the thread whose session it is, so one user session reads as one tree. A
//! database no serve has migrated to V4 yet falls back to one tree per manager. The trees
//! come newest session first (store::sessions: by start time), each in tree order; `only`
//! keeps the one `--session` picked.

use std::collections::HashMap;

use crate::domain::{Attention, Contract, ThreadId};
use crate::error::Result;
use crate::store::hosts::Placements;
use crate::store::list::Listing;
use crate::store::threads::ThreadRow;

/// One thread in its tree.
#[derive(Debug, Clone)]
pub struct Node {
    pub row: ThreadRow,
    /// 1 at the top of the tree.
    pub level: usize,
    pub manager_session: String,
    pub contract: Contract,
}

/// What identifies a root session to a person: where it ran, when, and its name.
pub use crate::store::sessions::SessionInfo as RootInfo;

/// One root session's tree, a parent before its descendants.
#[derive(Debug, Clone)]
pub struct Tree {
    pub info: RootInfo,
    pub nodes: Vec<Node>,
}

/// Every tree of the database holding the listed threads, in root-session order, each in tree
/// order. Threads the listing does not hold (filtered out) are left out; a kept thread whose
/// parent was left out keeps its level, so its place stays visible.
pub fn trees(conn: &crate::store::Conn, listing: Listing) -> Result<Vec<Tree>> {
    let mut by_id: HashMap<ThreadId, ThreadRow> = listing
        .threads
        .into_iter()
        .map(|t| (t.id.clone(), t))
        .collect();
    let mut trees: Vec<Tree> = Vec::new();
    if crate::store::usage::has_tables(conn)? {
        for place in crate::store::forest::places(conn)? {
            let crate::store::forest::Place {
                root_session: root,
                thread_id: id,
                level,
                manager_session,
                contract,
            } = place;
            let Some(thread) = by_id.remove(&id) else {
                continue;
            };
            if trees.last().map(|t| &t.info.root_session) != Some(&root) {
                trees.push(Tree {
                    info: RootInfo {
                        root_session: root,
                        ..Default::default()
                    },
                    nodes: Vec::new(),
                });
            }
            let tree = trees.last_mut().expect("pushed above");
            tree.nodes.push(Node {
                row: thread,
                level: level.max(1) as usize,
                manager_session,
                contract,
            });
        }
    }
    // Threads without a place (a database before V4): one tree per manager, nested by path.
    if !by_id.is_empty() {
        let mut rest: Vec<ThreadRow> = by_id.into_values().collect();
        rest.sort_by(|a, b| {
            (a.manager_id, crate::paths::sort_key(&a.path))
                .cmp(&(b.manager_id, crate::paths::sort_key(&b.path)))
        });
        let managers = crate::store::forest::manager_names(conn)?;
        for t in rest {
            // threads.manager_id references managers: every thread has its manager.
            let Some((session, contract)) = managers.get(&t.manager_id).cloned() else {
                continue;
            };
            if trees.last().map(|x| &x.info.root_session) != Some(&session) {
                trees.push(Tree {
                    info: RootInfo {
                        root_session: session.clone(),
                        ..Default::default()
                    },
                    nodes: Vec::new(),
                });
            }
            let tree = trees.last_mut().expect("pushed above");
            let level = 1 + tree
                .nodes
                .iter()
                .filter(|n| crate::paths::is_strictly_under(&t.path, &n.row.path))
                .count();
            tree.nodes.push(Node {
                row: t,
                level,
                manager_session: session,
                contract,
            });
        }
    }
    let infos = crate::store::sessions::infos(conn)?;
    for tree in &mut trees {
        if let Some(info) = infos
            .iter()
            .find(|i| i.root_session == tree.info.root_session)
        {
            tree.info = info.clone();
        }
        tree.info.last_activity = tree
            .nodes
            .iter()
            .map(|n| n.row.created_at.as_str().max(n.row.last_event_at.as_str()))
            .max()
            .map(str::to_string);
        if tree.info.started_at.is_none() {
            tree.info.started_at = tree.nodes.iter().map(|n| n.row.created_at.clone()).min();
        }
    }
    // Newest session first; within a tree, tree order.
    let mut infos: Vec<RootInfo> = trees.iter().map(|t| t.info.clone()).collect();
    crate::store::sessions::sort_newest_first(&mut infos);
    trees.sort_by_key(|t| {
        infos
            .iter()
            .position(|i| i.root_session == t.info.root_session)
    });
    Ok(trees)
}

/// Keeps only the tree of one root session (`--session`).
pub fn only(trees: Vec<Tree>, session: Option<&RootInfo>) -> Vec<Tree> {
    match session {
        None => trees,
        Some(s) => trees
            .into_iter()
            .filter(|t| t.info.root_session == s.root_session)
            .collect(),
    }
}

/// [`crate::domain::state_words`] (`live/busy`, `closed/stopped`, `live/asking`, `live/owner
/// gone`), contract B's `completed`, and ` archived` when it is. What needs the user is the
/// view `thread_attention`'s word, seen from this host ([`Placements::need_of`]); a live thread
/// of a host whose lease ran out reads `live/host unreachable since T` (issue 33), and one of
/// another host is never "owner gone" here (its pid means nothing on this host).
pub fn state_label(t: &ThreadRow, placements: &Placements) -> String {
    let need = placements.need_of(&t.into());
    let mut s = match (&t.agent_state, &need) {
        (_, Some(n)) if t.is_live() && n.attention == Attention::Unreachable => {
            match placements.unreachable_since(t.id.as_str(), true) {
                Some(since) => format!("live/host unreachable since {}", short_time(since)),
                None => format!("live/{}", n.word()),
            }
        }
        (_, Some(n)) if t.is_live() => format!("live/{}", n.word()),
        (Some(state), _) => state.to_string(),
        (None, _) => t.state_words(need.map(|n| n.attention)),
    };
    if t.archived {
        s.push_str(" archived");
    }
    s
}

/// The host column of the team views: the host that holds (or held) the thread, `-` when
/// none is recorded.
pub fn host_cell(placements: &Placements, t: &ThreadRow) -> String {
    placements.host_of(t.id.as_str()).unwrap_or("-").to_string()
}

/// The heading line of a tree: session, cwd, start, name, thread count.
pub fn heading(tree: &Tree) -> String {
    heading_of(&tree.info, tree.nodes.len())
}

/// [`heading`] for a root and a count of threads.
pub fn heading_of(i: &RootInfo, n: usize) -> String {
    let mut s = format!("session {}", i.root_session);
    if let Some(name) = &i.name {
        s.push_str(&format!(" \"{name}\""));
    }
    if let Some(cwd) = &i.cwd {
        s.push_str(&format!(" · {cwd}"));
    }
    if let Some(at) = &i.started_at {
        s.push_str(&format!(" · started {}", short_time(at)));
    }
    s.push_str(&format!(" · {n} thread{}", if n == 1 { "" } else { "s" }));
    s
}

pub use crate::store::sessions::short_time;
