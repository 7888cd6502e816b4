//! Property tests for the subtree range scan (DESIGN.md principle 3): `list` with
//! `DescendantsOf(P)` reads `lo < sort_key < hi` from an index, and must return exactly what a
//! recursive walk over the children maps finds, in `sort_key` order; `ChildrenOf(P)` exactly
//! the direct children.
//!
//! Trees use contract B-style names, where characters that sort below `/` and `0` occur (`-`,
//! `_`, digits) and names are prefixes of each other (`a`, `a_b`, `a-b`, `a1`, `ab`), with
//! independent roots such as `/a` beside `/root`. A second manager holds copies of some paths.
//! Also: for contract A's alphabet, `sort_key` order is JavaScript `localeCompare` order
//! (reference/contract-semantics.md, Traps: `_` < `/` < digits < letters).

use crate::support::prop::{config, locale_cmp};
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
use crate::support::tree::{self, Copies, Node, Shape};

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::sample::{select, Index};
use threadbase::paths::{descendant_range, is_strictly_under, sort_key};
use threadbase::store::list::{list, ListQuery, StateFilter, Subtree, VisibilityFilter};

/// Contract B segments that are prefixes of each other and mix in `-`, `_` and digits.
const SEGMENTS: &[&str] = &[
    "a", "a_b", "a-b", "a1", "ab", "a0", "a9", "a_", "a-", "a__b", "a--b", "a_b_c", "a-b-c", "b",
    "0", "9", "A", "Z", "root",
];

/// Independent roots beside `/root`, any depth.
const SHAPE: Shape = Shape {
    independent_roots: true,
    max_depth: None,
};

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => select(SEGMENTS).prop_map(String::from),
        1 => "[aZ0][a0Z_-]{0,3}",
    ]
}

/// Parent path → indexes of its children, from the rows' parent links only.
fn children_map(rows: &[Node]) -> BTreeMap<&str, Vec<usize>> {
    let mut map: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if let Some(p) = &r.parent_path {
            map.entry(p.as_str()).or_default().push(i);
        }
    }
    map
}

fn walk(map: &BTreeMap<&str, Vec<usize>>, rows: &[Node], at: &str, out: &mut Vec<usize>) {
    if let Some(children) = map.get(at) {
        for &c in children {
            out.push(c);
            walk(map, rows, &rows[c].path, out);
        }
    }
}

/// The expected listing: the chosen rows' paths, filtered, in `sort_key` order.
fn expected(
    rows: &[Node],
    picked: &[usize],
    state: StateFilter,
    visibility: VisibilityFilter,
) -> Vec<String> {
    let mut v: Vec<String> = picked
        .iter()
        .map(|&i| &rows[i])
        .filter(|r| r.kept_by(state, visibility))
        .map(|r| r.path.clone())
        .collect();
    v.sort_by_key(|p| sort_key(p));
    v
}

/// Where the ancestor comes from.
#[derive(Debug, Clone)]
enum AncestorPick {
    Root,
    Existing(Index),
    /// An existing path plus one more segment (usually no row).
    Below(Index, String),
    /// A string prefix of an existing path, not necessarily ending on a segment boundary.
    Truncated(Index, Index),
    /// Built from segments, under `/root` or as an independent root.
    Built(bool, Vec<String>),
}

fn ancestor_pick() -> impl Strategy<Value = AncestorPick> {
    prop_oneof![
        1 => Just(AncestorPick::Root),
        4 => any::<Index>().prop_map(AncestorPick::Existing),
        1 => (any::<Index>(), segment()).prop_map(|(i, s)| AncestorPick::Below(i, s)),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(i, j)| AncestorPick::Truncated(i, j)),
        2 => (any::<bool>(), prop::collection::vec(segment(), 1..4)).prop_map(|(r, s)| AncestorPick::Built(r, s)),
    ]
}

fn ancestor_path(pick: &AncestorPick, rows: &[Node]) -> String {
    let row = |i: &Index| (!rows.is_empty()).then(|| rows[i.index(rows.len())].path.clone());
    match pick {
        AncestorPick::Root => "/root".into(),
        AncestorPick::Existing(i) => row(i).unwrap_or_else(|| "/root".into()),
        AncestorPick::Below(i, s) => format!("{}/{s}", row(i).unwrap_or_else(|| "/root".into())),
        AncestorPick::Truncated(i, j) => {
            let p = row(i).unwrap_or_else(|| "/root/a_b".into());
            // At least `/x`; ASCII, so every byte offset is a boundary.
            let cut = 2 + j.index(p.len() - 1);
            p[..cut].trim_end_matches('/').to_string()
        }
        AncestorPick::Built(under_root, segs) => {
            let tail = segs.join("/");
            if *under_root {
                format!("/root/{tail}")
            } else {
                format!("/{tail}")
            }
        }
    }
}

fn paths_of(
    conn: &threadbase::store::Conn,
    mgr: threadbase::domain::ManagerId,
    q: &ListQuery,
) -> Vec<String> {
    let listing = list(conn, mgr, q).expect("list");
    assert_eq!(listing.count, listing.threads.len());
    assert_eq!(listing.live_count + listing.closed_count, listing.count);
    assert_eq!(
        listing.live_count,
        listing.threads.iter().filter(|t| t.is_live()).count()
    );
    assert!(listing.threads.iter().all(|t| t.manager_id == mgr));
    listing.threads.into_iter().map(|t| t.path).collect()
}

/// Contract A segments: prefixes of each other, with `_` and digits.
fn thread_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => select(&["a", "a_b", "a1", "ab", "a_", "a0", "a9", "a__b", "a_1", "b", "0", "9", "z", "root"][..]).prop_map(String::from),
        1 => "[a0z][a0z_]{0,3}",
    ]
}

fn thread_path() -> impl Strategy<Value = String> {
    prop::collection::vec(thread_segment(), 0..5).prop_map(|s| {
        let mut p = "/root".to_string();
        for seg in s {
            p.push('/');
            p.push_str(&seg);
        }
        p
    })
}

proptest! {
    #![proptest_config(config())]

    /// `DescendantsOf(P)` equals the recursive walk below `P`, `ChildrenOf(P)` the direct
    /// children, `Everything` all rows, each in `sort_key` order, for random `P` and filters.
    #[test]
    fn range_scan_matches_recursive_walk(
        specs in tree::specs(segment(), 0..=50),
        copies in 0usize..8,
        picks in prop::collection::vec((ancestor_pick(), tree::state_filter(), tree::visibility_filter()), 12),
    ) {
        let rows = tree::build(&specs, SHAPE);
        let copies = Copies { count: copies, id_base: 0x20_0000, flip_live: false };
        let tree::Seeded { db: _db, store, mine: mgr, .. } = tree::seed(&rows, ("ranges-a", "ranges-b"), copies);
        let conn = store.read().expect("read");
        let map = children_map(&rows);

        let everything = paths_of(&conn, mgr, &ListQuery {
            state: StateFilter::All,
            visibility: VisibilityFilter::All,
            subtree: Subtree::Everything,
        });
        let all: Vec<usize> = (0..rows.len()).collect();
        prop_assert_eq!(everything, expected(&rows, &all, StateFilter::All, VisibilityFilter::All));

        for (pick, state, visibility) in &picks {
            let p = ancestor_path(pick, &rows);
            let mut below = Vec::new();
            walk(&map, &rows, &p, &mut below);
            let direct: Vec<usize> = map.get(p.as_str()).cloned().unwrap_or_default();

            for (state, visibility) in [(StateFilter::All, VisibilityFilter::All), (*state, *visibility)] {
                let got = paths_of(&conn, mgr, &ListQuery {
                    state,
                    visibility,
                    subtree: Subtree::DescendantsOf(p.clone()),
                });
                prop_assert_eq!(got, expected(&rows, &below, state, visibility), "descendants of {} ({:?}, {:?})", p, state, visibility);
                let got = paths_of(&conn, mgr, &ListQuery {
                    state,
                    visibility,
                    subtree: Subtree::ChildrenOf(p.clone()),
                });
                prop_assert_eq!(got, expected(&rows, &direct, state, visibility), "children of {} ({:?}, {:?})", p, state, visibility);
            }
        }
    }

    /// On strings alone: `lo < sort_key(x) < hi` exactly when `x` lies strictly below `p` by
    /// whole segments, for paths that share long prefixes.
    #[test]
    fn descendant_range_is_segment_ancestry(
        p in prop::collection::vec(segment(), 1..4),
        rest in prop::collection::vec(segment(), 0..3),
        joint in select(&["/", "/", "-", "_", "0", "9", "a", "A", ""][..]),
        cut in any::<Index>(),
    ) {
        let p = format!("/{}", p.join("/"));
        let x = if rest.is_empty() {
            format!("{p}{joint}")
        } else {
            format!("{p}{joint}{}", rest.join("/"))
        };
        // Also an arbitrary prefix of `x` as the ancestor.
        let q = x[..1 + cut.index(x.len())].to_string();
        for (anc, path) in [(&p, &x), (&q, &x), (&x, &p)] {
            let (lo, hi) = descendant_range(anc);
            let key = sort_key(path);
            let in_range = lo.as_str() < key.as_str() && key.as_str() < hi.as_str();
            let segs_a: Vec<&str> = anc.split('/').collect();
            let segs_x: Vec<&str> = path.split('/').collect();
            let by_segments = segs_x.len() > segs_a.len()
                && segs_x[..segs_a.len()] == segs_a[..]
                && segs_x[segs_a.len()..].iter().all(|s| !s.is_empty());
            // Paths with empty segments are not paths; skip what the grammar excludes.
            if anc.ends_with('/') || anc.contains("//") || path.contains("//") || path.ends_with('/') {
                continue;
            }
            prop_assert_eq!(in_range, by_segments, "{} under {}: key {:?} in ({:?}, {:?})", path, anc, key, lo, hi);
            prop_assert_eq!(is_strictly_under(path, anc), by_segments, "is_strictly_under({}, {})", path, anc);
        }
    }

    /// For contract A's alphabet, `sort_key` byte order is `localeCompare` order.
    #[test]
    fn sort_key_order_is_locale_order(paths in prop::collection::vec(thread_path(), 2..12)) {
        for a in &paths {
            for b in &paths {
                prop_assert_eq!(sort_key(a).cmp(&sort_key(b)), locale_cmp(a, b), "{} vs {}", a, b);
            }
        }
        let mut by_key = paths.clone();
        by_key.sort_by_key(|p| sort_key(p));
        let mut by_locale = paths;
        by_locale.sort_by(|a, b| locale_cmp(a, b));
        prop_assert_eq!(by_key, by_locale);
    }
}

/// The example from the Traps section.
#[test]
fn traps_example_order() {
    let mut v = vec!["/root/a1", "/root/a/x", "/root/a_b", "/root/a"];
    v.sort_by(|a, b| locale_cmp(a, b));
    assert_eq!(v, ["/root/a", "/root/a_b", "/root/a/x", "/root/a1"]);
    v.reverse();
    v.sort_by_key(|p| sort_key(p));
    assert_eq!(v, ["/root/a", "/root/a_b", "/root/a/x", "/root/a1"]);
}
