//! Property tests for contract A reference resolution (`threadbase::store::refs`) against a naive
//! in-memory model of reference/contract-semantics.md §1.4.
//!
//! Each case builds a random tree of up to 40 threads in a real temporary database, with
//! task names from a small alphabet so equal basenames on different branches are common
//! (and with a name that looks like a thread id, `root` and `self`), random live/closed and
//! archived flags, and a second manager holding some of the same paths. From a random current
//! path, many random references (ids of this and the other manager, unknown ids, canonical,
//! `root/…` and relative paths, task names, garbage, whitespace around any of them) must
//! resolve to the thread the model picks, or fail with the model's error code, candidate list
//! and known-threads listing.

use crate::support::common;
use crate::support::prop::{config, locale_cmp, model_reference_path};
use crate::support::tree::{self, Copies, Node, Shape};

use proptest::prelude::*;
use proptest::sample::{select, Index};
use threadbase::domain::ThreadId;
use threadbase::store::list::{list, ListQuery, StateFilter, Subtree, VisibilityFilter};
use threadbase::store::refs::{resolve, resolve_list_filter, RefScope};
use threadbase::ErrorCode;

use common::tid;

/// Task names: prefixes of each other, `_` and digits, an id look-alike (`tid(10)`), and the
/// words `root` and `self` that mean something else in references.
const NAMES: &[&str] = &[
    "a",
    "b",
    "ab",
    "a_b",
    "a1",
    "root",
    "self",
    "thread_00000000000a",
];

/// Every thread under `/root`, any depth. Ids are `tid(k + 1)` for spec `k`, so `tid(10)`
/// (which reads like the task name `thread_00000000000a`) exists in larger trees.
const SHAPE: Shape = Shape {
    independent_roots: false,
    max_depth: None,
};

/// The manager's session, and the other root session's that holds copies of its paths (other
/// ids, the opposite live flag).
const SESSIONS: (&str, &str) = ("session-a", "session-b");

/// The id the manager's own thread has (never one of its children).
const SELF_ID: &str = "thread_00000000beef";

// ---- the model ---------------------------------------------------------------------------

fn model_is_id(s: &str) -> bool {
    s.len() == 19
        && s.starts_with("thread_")
        && s[7..]
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

fn model_task_name(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit() => {}
        _ => return false,
    }
    s.chars().count() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

fn model_canonical(p: &str) -> bool {
    if p == "/root" {
        return true;
    }
    match p.strip_prefix("/root/") {
        Some(rest) => rest.split('/').all(model_task_name),
        None => false,
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ModelError {
    Unknown,
    Ambiguous(Vec<String>),
}

/// §1.4 steps 1–4 as a loop over every thread the manager knows.
fn model_resolve(threads: &[Node], current: &str, reference: &str) -> Result<usize, ModelError> {
    let text = reference.trim();
    // 1. An id is an exact id or an error; it never falls through.
    if model_is_id(text) {
        for (i, t) in threads.iter().enumerate() {
            if t.id == text {
                return Ok(i);
            }
        }
        return Err(ModelError::Unknown);
    }
    // 2. A path that parses and that a thread has.
    if let Some(path) = model_reference_path(text, current, model_canonical) {
        for (i, t) in threads.iter().enumerate() {
            if t.path == path {
                return Ok(i);
            }
        }
    }
    // 3. Task name or basename, over every thread.
    let mut matches = Vec::new();
    for (i, t) in threads.iter().enumerate() {
        let base = t.path.rsplit('/').next().unwrap();
        if t.name == text || base == text {
            matches.push(i);
        }
    }
    match matches.len() {
        1 => Ok(matches[0]),
        // 4.
        0 => Err(ModelError::Unknown),
        _ => {
            let mut paths: Vec<String> = matches.iter().map(|&i| threads[i].path.clone()).collect();
            paths.sort_by(|a, b| locale_cmp(a, b));
            Err(ModelError::Ambiguous(paths))
        }
    }
}

/// `list.parent` / `list.ancestor` (§1.4): `.`, `self`, the own id, a known id, any
/// syntactically valid path, else full resolution.
fn model_list_filter(
    threads: &[Node],
    current: &str,
    self_id: Option<&str>,
    reference: &str,
) -> Result<String, ModelError> {
    let text = reference.trim();
    if text == "." || text == "self" {
        return Ok(current.to_string());
    }
    if model_is_id(text) {
        if self_id == Some(text) {
            return Ok(current.to_string());
        }
        return match threads.iter().find(|t| t.id == text) {
            Some(t) => Ok(t.path.clone()),
            None => Err(ModelError::Unknown),
        };
    }
    if let Some(path) = model_reference_path(text, current, model_canonical) {
        return Ok(path);
    }
    model_resolve(threads, current, reference).map(|i| threads[i].path.clone())
}

// ---- trees -------------------------------------------------------------------------------

// ---- references --------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum RefKind {
    Id(Index),
    OtherManagerId(Index),
    SelfId,
    UnknownId(u32),
    Path(Index),
    RootForm(Index),
    /// A thread's path relative to the current path when it lies below it, else its last
    /// `n` segments.
    Relative(Index, Index),
    /// `a/b` style, relative to the current path.
    Names(Vec<usize>),
    /// `/root/a/b`, usually not a thread.
    AbsNames(Vec<usize>),
    /// `root/a/b`.
    RootNames(Vec<usize>),
    Name(usize),
    Dot,
    Garbage(String),
}

#[derive(Debug, Clone)]
struct RefGen {
    kind: RefKind,
    left: &'static str,
    right: &'static str,
}

fn names() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(0..NAMES.len(), 1..4)
}

fn ref_kind() -> impl Strategy<Value = RefKind> {
    prop_oneof![
        3 => any::<Index>().prop_map(RefKind::Id),
        1 => any::<Index>().prop_map(RefKind::OtherManagerId),
        1 => Just(RefKind::SelfId),
        1 => (0u32..0x1000).prop_map(RefKind::UnknownId),
        2 => any::<Index>().prop_map(RefKind::Path),
        2 => any::<Index>().prop_map(RefKind::RootForm),
        3 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| RefKind::Relative(a, b)),
        2 => names().prop_map(RefKind::Names),
        2 => names().prop_map(RefKind::AbsNames),
        1 => names().prop_map(RefKind::RootNames),
        5 => (0..NAMES.len()).prop_map(RefKind::Name),
        1 => Just(RefKind::Dot),
        3 => prop_oneof![
            select(&[
                "", " ", ".", "..", "/", "//", "root", "root/", "/root", "/root/", "/root//a",
                "thread_", "THREAD_00000000000A", "Thread_00000000000a", "thread_00000000000A",
                "thread_0000000000a", "A", "a-b", "a.b", "./a", "../a", "a/", "/a", "self/a",
                "a b", "a\\b", "a\"b", "root/root",
            ][..]).prop_map(String::from),
            "[a-zA-Z0-9_/. ?%-]{0,12}",
        ].prop_map(RefKind::Garbage),
    ]
}

fn ref_gen() -> impl Strategy<Value = RefGen> {
    let pad = select(&["", "", "", " ", "\t", "\n", "  "][..]);
    (ref_kind(), pad.clone(), pad).prop_map(|(kind, left, right)| RefGen { kind, left, right })
}

fn render(r: &RefGen, threads: &[Node], other_ids: &[String], current: &str) -> String {
    let pick = |i: &Index| (!threads.is_empty()).then(|| &threads[i.index(threads.len())]);
    let core = match &r.kind {
        RefKind::Id(i) => pick(i).map_or_else(|| tid(0xdead), |t| t.id.clone()),
        RefKind::OtherManagerId(i) if !other_ids.is_empty() => {
            other_ids[i.index(other_ids.len())].clone()
        }
        RefKind::OtherManagerId(_) => tid(0x10_0000),
        RefKind::SelfId => SELF_ID.to_string(),
        RefKind::UnknownId(n) => tid(0xf000_0000 + u64::from(*n)),
        RefKind::Path(i) => pick(i).map_or_else(|| "/root/a".into(), |t| t.path.clone()),
        RefKind::RootForm(i) => {
            pick(i).map_or_else(|| "root/a".into(), |t| t.path[1..].to_string())
        }
        RefKind::Relative(i, n) => match pick(i) {
            None => "a/b".into(),
            Some(t) => match t.path.strip_prefix(&format!("{current}/")) {
                Some(rel) => rel.to_string(),
                None => {
                    let segs: Vec<&str> = t.path.split('/').skip(2).collect();
                    let k = 1 + n.index(segs.len());
                    segs[segs.len() - k..].join("/")
                }
            },
        },
        RefKind::Names(v) => v.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join("/"),
        RefKind::AbsNames(v) => format!(
            "/root/{}",
            v.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join("/")
        ),
        RefKind::RootNames(v) => format!(
            "root/{}",
            v.iter().map(|&i| NAMES[i]).collect::<Vec<_>>().join("/")
        ),
        RefKind::Name(i) => NAMES[*i].to_string(),
        RefKind::Dot => ".".to_string(),
        RefKind::Garbage(g) => g.clone(),
    };
    format!("{}{core}{}", r.left, r.right)
}

/// Whether JSON quoting and plain `"…"` quoting print `s` the same way.
fn plain_quotable(s: &str) -> bool {
    s.chars().all(|c| c != '"' && c != '\\' && !c.is_control())
}

fn check_error(
    err: &threadbase::Error,
    want: &ModelError,
    threads: &[Node],
    reference: &str,
    other_ids: &[String],
) -> Result<(), TestCaseError> {
    match want {
        ModelError::Unknown => {
            prop_assert_eq!(err.code, ErrorCode::UnknownReference, "{}", err.message);
            // Another session's exact thread id: the contract's text, with whose thread it is
            // and how to continue that session.
            let elsewhere = other_ids.iter().any(|id| id == reference.trim());
            let forms = " Accepted reference forms: thread id (thread_012345abcdef), canonical path (/root/task), relative path from the current thread (task or parent/task), or unambiguous taskName.";
            if plain_quotable(reference) {
                let quoted = format!("Unknown thread reference: \"{reference}\".");
                if elsewhere {
                    let head = format!("{quoted} It is ");
                    prop_assert!(err.message.starts_with(&head), "{}", err.message);
                    prop_assert!(
                        err.message.contains(" of another Pi session, "),
                        "{}",
                        err.message
                    );
                    prop_assert!(err.message.contains(forms), "{}", err.message);
                } else {
                    let head = format!("{quoted}{forms}");
                    prop_assert!(err.message.starts_with(&head), "{}", err.message);
                }
            }
            let repair = if elsewhere {
                " Repair: to use it, continue that session"
            } else {
                " Repair: use a known path/id"
            };
            prop_assert!(err.message.contains(repair), "{}", err.message);
            prop_assert!(
                err.message.ends_with(
                    "use a known path/id, run { \"action\": \"list\" }, or start the thread first."
                ),
                "{}",
                err.message
            );
            // Up to 8 known threads in path order, each `path (id: …, taskName: …)`.
            let mut sorted: Vec<&Node> = threads.iter().collect();
            sorted.sort_by(|a, b| locale_cmp(&a.path, &b.path));
            if sorted.is_empty() {
                prop_assert!(
                    err.message
                        .contains(" No threads are currently managed by this parent. "),
                    "{}",
                    err.message
                );
            } else {
                let mut from = 0;
                for t in sorted.iter().take(8) {
                    let item = format!("{} (id: {}, taskName: {})", t.path, t.id, t.name);
                    match err.message[from..].find(&item) {
                        Some(at) => from += at + item.len(),
                        None => {
                            prop_assert!(false, "{item} missing or out of order in {}", err.message)
                        }
                    }
                }
                prop_assert_eq!(
                    err.message.matches(" (id: ").count(),
                    sorted.len().min(8),
                    "{}",
                    err.message
                );
                prop_assert!(err.message.contains(" Known threads: "), "{}", err.message);
            }
        }
        ModelError::Ambiguous(paths) => {
            prop_assert_eq!(err.code, ErrorCode::AmbiguousReference, "{}", err.message);
            if plain_quotable(reference) {
                let head = format!("Ambiguous thread reference \"{reference}\". Candidate paths: ");
                prop_assert!(err.message.starts_with(&head), "{}", err.message);
            }
            let tail = " Repair: use one of the candidate paths or a thread id instead.";
            prop_assert!(err.message.ends_with(tail), "{}", err.message);
            let start = err.message.find("Candidate paths: ").unwrap() + "Candidate paths: ".len();
            let end = err.message.len() - tail.len() - 1;
            let got: Vec<&str> = err.message[start..end].split(", ").collect();
            prop_assert_eq!(got, paths.iter().map(String::as_str).collect::<Vec<_>>());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// `resolve` and `resolve_list_filter` agree with the model on random trees and
    /// references; the paths a list filter yields select what the model selects.
    #[test]
    fn resolution_matches_model(
        specs in tree::specs(tree::names(NAMES), 0..=40),
        others in 0usize..6,
        current_pick in any::<Index>(),
        current_is_root in prop::bool::weighted(0.3),
        has_self in any::<bool>(),
        refs in prop::collection::vec(ref_gen(), 40),
        filters in prop::collection::vec((tree::state_filter(), tree::visibility_filter()), 4),
    ) {
        let threads = tree::build(&specs, SHAPE);
        let copies = Copies { count: others, id_base: 0x10_0000, flip_live: true };
        let tree::Seeded { db: _db, store, mine: mgr, copy_ids: other_ids } = tree::seed(&threads, SESSIONS, copies);
        let conn = store.read().expect("read");
        let current = if current_is_root || threads.is_empty() {
            "/root".to_string()
        } else {
            threads[current_pick.index(threads.len())].path.clone()
        };
        let self_thread = ThreadId::new(SELF_ID);
        let self_id = has_self.then_some(&self_thread);
        let scope = RefScope { manager_id: mgr, current_path: &current, self_id };

        for (n, r) in refs.iter().enumerate() {
            let reference = render(r, &threads, &other_ids, &current);

            // Full resolution.
            let got = resolve(&conn, scope, &reference);
            let want = model_resolve(&threads, &current, &reference);
            match (&got, &want) {
                (Ok(row), Ok(i)) => {
                    prop_assert_eq!(row.id.as_str(), threads[*i].id.as_str(), "resolve({:?}) from {}", reference, current);
                    prop_assert_eq!(&row.path, &threads[*i].path);
                    prop_assert_eq!(row.manager_id, mgr);
                }
                (Err(e), Err(m)) => check_error(e, m, &threads, &reference, &other_ids)?,
                _ => prop_assert!(
                    false,
                    "resolve({:?}) from {}: got {:?}, model {:?}",
                    reference, current, got.map(|t| t.path), want.map(|i| &threads[i].path)
                ),
            }

            // List filter.
            let got = resolve_list_filter(&conn, scope, &reference);
            let want = model_list_filter(&threads, &current, self_id.map(ThreadId::as_str), &reference);
            match (&got, &want) {
                (Ok(p), Ok(q)) => prop_assert_eq!(p, q, "list filter {:?} from {}", reference, current),
                (Err(e), Err(m)) => check_error(e, m, &threads, &reference, &other_ids)?,
                _ => prop_assert!(
                    false,
                    "resolve_list_filter({:?}) from {} (self {:?}): got {:?}, model {:?}",
                    reference, current, self_id, got, want
                ),
            }

            // What the filter selects, for a few of them.
            if let (Ok(p), true) = (&got, n < filters.len()) {
                let (state, visibility) = filters[n];
                for (subtree, under) in [
                    (Subtree::ChildrenOf(p.clone()), true),
                    (Subtree::DescendantsOf(p.clone()), false),
                ] {
                    let q = ListQuery { state, visibility, subtree };
                    let listed: Vec<String> = list(&conn, mgr, &q).expect("list").threads.into_iter().map(|t| t.path).collect();
                    let mut want: Vec<String> = threads
                        .iter()
                        .filter(|t| t.kept_by(state, visibility))
                        .filter(|t| if under { t.parent_path.as_ref() == Some(p) } else { t.path.starts_with(&format!("{p}/")) })
                        .map(|t| t.path.clone())
                        .collect();
                    want.sort_by(|a, b| locale_cmp(a, b));
                    prop_assert_eq!(listed, want, "{:?}", q);
                }
            }
        }

        // The whole listing is in localeCompare order and holds only this manager's threads.
        let all = list(&conn, mgr, &ListQuery { state: StateFilter::All, visibility: VisibilityFilter::All, subtree: Subtree::Everything }).expect("list");
        let mut want: Vec<&str> = threads.iter().map(|t| t.path.as_str()).collect();
        want.sort_by(|a, b| locale_cmp(a, b));
        prop_assert_eq!(all.threads.iter().map(|t| t.path.as_str()).collect::<Vec<_>>(), want);
        prop_assert_eq!(all.live_count, threads.iter().filter(|t| t.live).count());
    }

    /// Syntactically valid paths that no thread has are accepted as list filters as given
    /// (canonical, `root/…`, relative, one segment), and `.`/`self`/the own id mean the
    /// current path.
    #[test]
    fn list_filter_accepts_valid_paths_without_threads(
        specs in tree::specs(tree::names(NAMES), 0..=12),
        current_pick in any::<Index>(),
        segs in prop::collection::vec("[a-z0-9][a-z0-9_]{0,6}", 1..4),
        form in 0usize..4,
        pad in select(&["", " ", "\t"][..]),
    ) {
        let threads = tree::build(&specs, SHAPE);
        let copies = Copies { count: 0, id_base: 0x10_0000, flip_live: true };
        let tree::Seeded { db: _db, store, mine: mgr, .. } = tree::seed(&threads, SESSIONS, copies);
        let conn = store.read().expect("read");
        let current = if threads.is_empty() {
            "/root".to_string()
        } else {
            threads[current_pick.index(threads.len())].path.clone()
        };
        let self_thread = ThreadId::new(SELF_ID);
        let scope = RefScope { manager_id: mgr, current_path: &current, self_id: Some(&self_thread) };
        for special in [".", "self", SELF_ID, " . ", "\tself\n"] {
            prop_assert_eq!(resolve_list_filter(&conn, scope, special).map_err(|e| e.message), Ok(current.clone()));
        }
        let joined = segs.join("/");
        let (reference, expected) = match form {
            0 => (format!("/root/{joined}"), format!("/root/{joined}")),
            1 => (format!("root/{joined}"), format!("/root/{joined}")),
            2 => (joined.clone(), format!("{current}/{joined}")),
            _ => (segs[0].clone(), format!("{current}/{}", segs[0])),
        };
        let reference = format!("{pad}{reference}{pad}");
        prop_assume!(!model_is_id(reference.trim()) && reference.trim() != "self");
        prop_assert_eq!(
            resolve_list_filter(&conn, scope, &reference).map_err(|e| e.message),
            Ok(expected)
        );
    }
}
