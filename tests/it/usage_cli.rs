//! `threadbase usage`, and the usage in `tree` and `show`, against a tree spread over three
//! managers (a root's, its child's own serve's and the grandchild's), seeded through the
//! library API; the budget line and its refusal come from the same rows.

use crate::support::common;

use std::process::{Command, Output};

use serde_json::Value;
use threadbase::domain::{SessionId, ThreadId};
use threadbase::store::threads::{insert_thread, upsert_manager, Contract};
use threadbase::store::usage::{self, Usage};
use threadbase::Store;

fn threadbase(db: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_threadbase"));
    cmd.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("THREADBASE_DB")
        .env_remove("THREADBASE_BUDGET_TOKENS")
        .env_remove("THREADBASE_BUDGET_USD");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run threadbase")
}

fn text(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn spent(input: i64, output: i64, cost: f64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        cache_read_tokens: 10,
        cache_write_tokens: 0,
        cost_usd: cost,
        turns: 1,
        tool_calls: 1,
    }
}

/// /root/lead (root manager) → /root/lead/docs (lead's own serve) → /root/lead/docs/check
/// (docs' own serve), and /root/other beside lead; a second root with one thread.
fn seed() -> common::TempDb {
    let db = common::temp_db();
    let store = Store::open(&db.path).unwrap();
    let manager = |session: &str, scope: &str, self_id: Option<&str>| {
        let (session, self_id) = (SessionId::new(session), self_id.map(ThreadId::new));
        store
            .write(|tx| {
                upsert_manager(
                    tx,
                    &common::manager_spec(&session, Contract::Thread, scope, self_id.as_ref()),
                )
            })
            .unwrap()
    };
    let root = manager("ses_root", "/root", None);
    let (lead, docs, check, other) = (
        common::tid(1),
        common::tid(2),
        common::tid(3),
        common::tid(4),
    );
    let lead_serve = manager("ses_lead", "/root/lead", Some(&lead));
    let docs_serve = manager("ses_docs", "/root/lead/docs", Some(&docs));
    let elsewhere = manager("ses_elsewhere", "/root", None);
    let rows = [
        (lead.as_str(), root, "/root/lead", None),
        (
            docs.as_str(),
            lead_serve,
            "/root/lead/docs",
            Some(lead.as_str()),
        ),
        (
            check.as_str(),
            docs_serve,
            "/root/lead/docs/check",
            Some(docs.as_str()),
        ),
        (other.as_str(), root, "/root/other", None),
    ];
    store
        .write(|tx| {
            for (id, m, path, parent) in rows {
                let mut t = common::thread(id, m, path, true);
                t.parent_id = parent.map(Into::into);
                insert_thread(tx, &t)?;
            }
            insert_thread(
                tx,
                &common::thread(&common::tid(9), elsewhere, "/root/solo", true),
            )?;
            usage::add(
                tx,
                &ThreadId::new(&lead),
                &spent(100, 10, 0.5),
                "2026-01-01T00:00:00.000Z",
            )?;
            usage::add(
                tx,
                &ThreadId::new(&docs),
                &spent(200, 20, 0.25),
                "2026-01-01T00:00:00.000Z",
            )?;
            usage::add(
                tx,
                &ThreadId::new(&check),
                &spent(400, 40, 0.125),
                "2026-01-01T00:00:00.000Z",
            )?;
            usage::add(
                tx,
                &ThreadId::new(&other),
                &spent(800, 80, 1.0),
                "2026-01-01T00:00:00.000Z",
            )?;
            usage::add(
                tx,
                &ThreadId::new(common::tid(9)),
                &spent(1, 1, 0.0),
                "2026-01-01T00:00:00.000Z",
            )
        })
        .unwrap();
    db
}

#[test]
fn usage_shows_each_tree_across_its_managers() {
    let db = seed();
    let out = text(&threadbase(&db.path, &["usage", "--json"], &[]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let trees = v["trees"].as_array().unwrap();
    assert_eq!(trees.len(), 2, "{v}");
    let t = trees
        .iter()
        .find(|t| t["rootSession"] == "ses_root")
        .unwrap();
    assert_eq!(t["threads"], 4);
    assert_eq!(t["inputTokens"], 1500);
    assert_eq!(t["outputTokens"], 150);
    assert_eq!(t["cacheReadTokens"], 40);
    assert_eq!(t["costUsd"], 1.875);
    let paths: Vec<&str> = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/root/lead",
            "/root/lead/docs",
            "/root/lead/docs/check",
            "/root/other"
        ]
    );
    let lead = &t["rows"][0];
    assert_eq!(lead["level"], 1);
    assert_eq!(lead["usage"]["inputTokens"], 100);
    assert_eq!(lead["subtree"]["threads"], 3);
    assert_eq!(lead["subtree"]["inputTokens"], 700);
    assert_eq!(lead["subtree"]["costUsd"], 0.875);
    let check = &t["rows"][2];
    assert_eq!(
        (&check["level"], &check["managerSession"]),
        (&Value::from(3), &Value::from("ses_docs"))
    );
    assert_eq!(check["forestParentId"], common::tid(2));
    assert!(t.get("budget").is_none());

    // One thread's subtree, found by path across every manager.
    let out = text(&threadbase(&db.path, &["usage", "/root/lead/docs"], &[]));
    assert!(
        out.contains("tree of session ses_root: 4 threads · 1,690 tokens"),
        "{out}"
    );
    assert!(
        out.contains(&format!("subtree of {}", common::tid(2))),
        "{out}"
    );
    assert!(out.contains("/root/lead/docs/check"), "{out}");
    assert!(
        !out.contains("/root/other") && !out.contains("/root/lead  "),
        "{out}"
    );

    // The plain listing: both trees, the nested rows indented.
    let out = text(&threadbase(&db.path, &["usage"], &[]));
    assert!(
        out.contains("tree of session ses_elsewhere: 1 thread · 12 tokens"),
        "{out}"
    );
    assert!(out.contains("\n    /root/lead/docs/check "), "{out}");

    // tree and show carry the figures too.
    let out = text(&threadbase(&db.path, &["tree"], &[]));
    assert!(
        out.contains("/root/lead  [live/idle]  lead  · 120 tokens · $0.5000"),
        "{out}"
    );
    let out = text(&threadbase(
        &db.path,
        &["show", "/root/lead/docs", "--json"],
        &[],
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["usage"]["inputTokens"], 200);
    assert_eq!(v["subtreeUsage"]["threads"], 2);
    assert_eq!(v["subtreeUsage"]["inputTokens"], 600);
}

#[test]
fn usage_shows_the_budget_and_refuses_a_bad_one() {
    let db = seed();
    let out = text(&threadbase(
        &db.path,
        &["usage"],
        &[
            ("THREADBASE_BUDGET_TOKENS", "1000"),
            ("THREADBASE_BUDGET_USD", "5"),
        ],
    ));
    assert!(
        out.contains("budget: 1,690 of 1,000 tokens (THREADBASE_BUDGET_TOKENS) · $1.8750 of $5.0000 (THREADBASE_BUDGET_USD) · REACHED"),
        "{out}"
    );
    assert!(out.contains("budget: 12 of 1,000 tokens"), "{out}");
    let out = threadbase(&db.path, &["usage"], &[("THREADBASE_BUDGET_USD", "lots")]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("error[invalid_params]")
            && err.contains("THREADBASE_BUDGET_USD")
            && err.contains("Repair:"),
        "{err}"
    );
}

/// A database no serve of this version has migrated yet (schema 3, before V4's usage): the
/// read-only commands still work without usage, `usage` says how to migrate, and `restore`
/// migrates it, placing and counting the threads it already had.
#[test]
fn a_database_from_before_usage_accounting() {
    if crate::support::sql::sqlite_only(
        "a_database_from_before_usage_accounting",
        "an old SQLite file from before migration V4",
    ) {
        return;
    }
    // Schema 3, as the released migrations made it (tests/data/v3.sqlite): the same trees as
    // `seed`, without usage.
    let db = crate::old_databases::copy_of(3);
    let out = text(&threadbase(&db.path, &["tree"], &[]));
    assert!(
        out.contains("/root/lead/docs/check") && out.contains("· 0 tokens · $0.0000"),
        "{out}"
    );
    let out = text(&threadbase(
        &db.path,
        &["show", "/root/lead", "--json"],
        &[],
    ));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert!(v["usage"].is_null(), "{v}");
    let out = threadbase(&db.path, &["usage"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("predates usage accounting")
            && err.contains("Repair: run `threadbase restore`"),
        "{err}"
    );

    text(&threadbase(&db.path, &["restore"], &[]));
    let out = text(&threadbase(&db.path, &["usage", "--json"], &[]));
    let v: Value = serde_json::from_str(&out).unwrap();
    let t = v["trees"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["rootSession"] == "ses_root")
        .unwrap()
        .clone();
    assert_eq!(t["threads"], 4, "{t}");
    assert_eq!(t["inputTokens"], 0, "what was spent before is not known");
    let check = t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["path"] == "/root/lead/docs/check")
        .unwrap()
        .clone();
    assert_eq!(
        (&check["level"], &check["forestParentId"]),
        (&Value::from(3), &Value::from(common::tid(2)))
    );
    let out = threadbase(&db.path, &["check"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
