//! Reference resolution and `list` subtree filters against trees of 1k, 10k, 100k and 1M
//! threads (DESIGN.md, "Targets").
//!
//! Each tree is built once per run in a temp file (see `support`), then benched on one pooled
//! reader. Every bench cycles through [`TARGETS`] targets spread evenly over the tree, so the
//! figures include reaching different parts of the indexes rather than one hot row (and every
//! call binds values its statement did not run with last). The targets' pages stay in the
//! reader's page cache: these are warm-cache figures, read transaction included.
//!
//! The task-name bench resolves unique leaf names (`plan_<b>_<k>`, one candidate) from `/root`,
//! so each call first misses the path step (`/root/<name>` does not exist) and then finds the
//! name, as the contract's order requires; the unknown-reference listing never runs.
//!
//! `THREADBASE_BENCH_SIZES=1000,10000` overrides the sizes (default `1000,10000,100000,1000000`).
//!
//! Groups: `resolve/{id,canonical_path,relative_path,task_name}/<size>`,
//! `list/parent_10_children/<size>`, `list/ancestor_k10/<size>`, `list/ancestor_k100/<size>`.

mod support;

use std::hint::black_box;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use threadbase::store::list::{list, ListQuery, Subtree};
use threadbase::store::refs::{resolve, RefScope};
use threadbase::store::ReadConn;

use support::{BenchDb, Tree, CHILDREN, GRANDCHILDREN};

/// Distinct targets each bench cycles through.
const TARGETS: usize = 16;
const DEFAULT_SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

fn sizes() -> Vec<usize> {
    match std::env::var("THREADBASE_BENCH_SIZES") {
        Ok(text) if !text.trim().is_empty() => text
            .split(',')
            .map(|s| {
                s.trim()
                    .replace('_', "")
                    .parse::<usize>()
                    .unwrap_or_else(|_| panic!("THREADBASE_BENCH_SIZES: bad size {s:?}"))
            })
            .inspect(|&n| {
                assert!(
                    n >= support::BLOCK,
                    "THREADBASE_BENCH_SIZES: each size must be at least {} threads",
                    support::BLOCK
                )
            })
            .collect(),
        _ => DEFAULT_SIZES.to_vec(),
    }
}

/// The complete blocks the targets are taken from, spread evenly over the tree.
fn target_blocks(tree: &Tree) -> Vec<usize> {
    (0..TARGETS)
        .map(|i| (2 * i + 1) * tree.full_blocks / (2 * TARGETS))
        .collect()
}

/// Cycles through `items` one per call.
fn cycle<'a, T>(items: &'a [T]) -> impl FnMut() -> &'a T + 'a {
    let mut i = 0;
    move || {
        let item = &items[i % items.len()];
        i += 1;
        item
    }
}

fn scope<'p>(tree: &Tree, current_path: &'p str) -> RefScope<'p> {
    RefScope {
        manager_id: tree.manager_id,
        current_path,
        self_id: None,
    }
}

fn configure<'c>(c: &'c mut Criterion, name: &str) -> BenchmarkGroup<'c, WallTime> {
    let mut group = c.benchmark_group(name);
    group
        .sample_size(40)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2));
    group
}

fn bench_resolve(c: &mut Criterion, conn: &ReadConn, tree: &Tree) {
    let n = tree.threads;
    let blocks = target_blocks(tree);
    // The leaf grandchild `k` of child `j` of each target block: unique name, depth 3.
    let leaves: Vec<(usize, usize, usize)> = blocks
        .iter()
        .enumerate()
        .map(|(i, &b)| (b, i % (CHILDREN - 1), i % GRANDCHILDREN))
        .collect();

    // 1. Thread id (primary key).
    let ids: Vec<String> = leaves
        .iter()
        .map(|&(b, j, k)| support::thread_id(support::grandchild_row(b, j, k)))
        .collect();
    // 2a. Canonical path.
    let canonical: Vec<String> = leaves
        .iter()
        .map(|&(b, j, k)| {
            format!(
                "{}/{}",
                support::child_path(b, j),
                support::grandchild_name(b, j, k)
            )
        })
        .collect();
    // 2b. Relative `a/b` path from the top-level thread.
    let relative: Vec<(String, String)> = leaves
        .iter()
        .map(|&(b, j, k)| {
            (
                support::top_path(b),
                format!(
                    "{}/{}",
                    support::child_name(j),
                    support::grandchild_name(b, j, k)
                ),
            )
        })
        .collect();
    // 3. Unique task name from `/root`: the path step misses (`/root/<name>` does not exist)
    //    before the name step finds it, as the contract's order requires.
    let names: Vec<String> = leaves
        .iter()
        .map(|&(b, j, k)| support::grandchild_name(b, j, k))
        .collect();

    // Check every target resolves to the expected row before timing anything.
    for (i, id) in ids.iter().enumerate() {
        let want = &canonical[i];
        let s = scope(tree, "/root");
        assert_eq!(&resolve(conn, s, id).unwrap().path, want);
        assert_eq!(&resolve(conn, s, want).unwrap().path, want);
        assert_eq!(&resolve(conn, s, &names[i]).unwrap().path, want);
        let (cur, rel) = &relative[i];
        assert_eq!(&resolve(conn, scope(tree, cur), rel).unwrap().path, want);
    }

    let mut g = configure(c, "resolve/id");
    g.bench_with_input(BenchmarkId::from_parameter(n), &ids, |bch, ids| {
        let mut next = cycle(ids);
        let s = scope(tree, "/root");
        bch.iter(|| black_box(resolve(conn, s, black_box(next().as_str())).unwrap()));
    });
    g.finish();

    let mut g = configure(c, "resolve/canonical_path");
    g.bench_with_input(BenchmarkId::from_parameter(n), &canonical, |bch, paths| {
        let mut next = cycle(paths);
        let s = scope(tree, "/root");
        bch.iter(|| black_box(resolve(conn, s, black_box(next().as_str())).unwrap()));
    });
    g.finish();

    let mut g = configure(c, "resolve/relative_path");
    g.bench_with_input(BenchmarkId::from_parameter(n), &relative, |bch, rel| {
        let mut next = cycle(rel);
        bch.iter(|| {
            let (cur, text) = next();
            black_box(resolve(conn, scope(tree, cur), black_box(text.as_str())).unwrap())
        });
    });
    g.finish();

    let mut g = configure(c, "resolve/task_name");
    g.bench_with_input(BenchmarkId::from_parameter(n), &names, |bch, names| {
        let mut next = cycle(names);
        let s = scope(tree, "/root");
        bch.iter(|| black_box(resolve(conn, s, black_box(next().as_str())).unwrap()));
    });
    g.finish();
}

fn bench_list(c: &mut Criterion, conn: &ReadConn, tree: &Tree) {
    let n = tree.threads;
    let blocks = target_blocks(tree);
    let query = |subtree: Subtree| ListQuery {
        subtree,
        ..ListQuery::default()
    };
    // Top-level threads: exactly 10 children, 100 descendants.
    let parents: Vec<ListQuery> = blocks
        .iter()
        .map(|&b| query(Subtree::ChildrenOf(support::top_path(b))))
        .collect();
    let k100: Vec<ListQuery> = blocks
        .iter()
        .map(|&b| query(Subtree::DescendantsOf(support::top_path(b))))
        .collect();
    // Children j < 9: 10 descendants each.
    let k10: Vec<ListQuery> = blocks
        .iter()
        .enumerate()
        .map(|(i, &b)| {
            query(Subtree::DescendantsOf(support::child_path(
                b,
                i % (CHILDREN - 1),
            )))
        })
        .collect();

    for (queries, want) in [(&parents, 10), (&k10, 10), (&k100, 100)] {
        for q in queries {
            let got = list(conn, tree.manager_id, q).unwrap().count;
            assert_eq!(got, want, "{:?}", q.subtree);
        }
    }

    for (name, queries) in [
        ("list/parent_10_children", &parents),
        ("list/ancestor_k10", &k10),
        ("list/ancestor_k100", &k100),
    ] {
        let mut g = configure(c, name);
        g.bench_with_input(BenchmarkId::from_parameter(n), queries, |bch, qs| {
            let mut next = cycle(qs);
            bch.iter(|| black_box(list(conn, tree.manager_id, black_box(next())).unwrap()));
        });
        g.finish();
    }
}

fn benches(c: &mut Criterion) {
    for n in sizes() {
        let db: BenchDb = support::open_db();
        let tree = support::seed_tree(&db, n);
        let conn = db.store.read().expect("reader");
        bench_resolve(c, &conn, &tree);
        bench_list(c, &conn, &tree);
        drop(conn);
        drop(db);
    }
}

criterion_group!(resolve_benches, benches);
criterion_main!(resolve_benches);
