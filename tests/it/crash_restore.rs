//! SIGKILL the owning process while its children stream, then restore: no committed event is
//! lost, no child process survives, every formerly live thread reads closed/stale, and a new
//! runtime on the same database works. Rounds: THREADBASE_CRASH_ROUNDS (default 20).
//!
//! The owner is this test binary re-executed (`crash_owner_process` runs only when
//! THREADBASE_TEST_OWNER is set).

use crate::support::runtime::{bash_launch, insert_starting, two_workers};
#[allow(unused_imports)]
use crate::support::sql::Rusqlite as _;
use crate::support::{common, serve_client};

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serve_client::processes_with_env;
use threadbase::contract::thread::STALE_MESSAGE;
use threadbase::domain::ThreadId;
use threadbase::engine::restore_dead_owners;
use threadbase::runtime::signals::ProcessIdentity;
use threadbase::runtime::{Runtime, RuntimeConfig, StartKind};
use threadbase::store::events;
use threadbase::Store;

const CHILDREN: u64 = 3;
const MARKER_VAR: &str = "THREADBASE_TEST_MARKER";

/// Streams tool events forever, ignores SIGPIPE and SIGTERM, and keeps a grandchild: it
/// survives its owner's death unless restore kills its group.
const STREAMER: &str = r#"trap '' PIPE TERM; sleep 1000 &
read -r line; id=$(printf '%s' "$line" | sed 's/.*"id":"\([^"]*\)".*/\1/')
printf '{"id":"%s","type":"response","command":"get_state","success":true,"data":{"isStreaming":true}}\n' "$id"
i=0; while :; do i=$((i+1)); echo "{\"type\":\"tool_execution_start\",\"toolName\":\"t$i\"}" 2>/dev/null; sleep 0.002; done"#;

#[test]
fn crash_owner_process() {
    let Ok(spec) = std::env::var("THREADBASE_TEST_OWNER") else {
        return;
    };
    let (db, marker) = spec.split_once('|').expect("db|marker");
    two_workers().block_on(async {
        let store = Arc::new(Store::open(db).unwrap());
        let manager = common::manager(&store, "ses_crash");
        let runtime = Runtime::new(store.clone(), RuntimeConfig::default());
        let mut ids = Vec::new();
        for n in 0..CHILDREN {
            let id = format!("thread_{:06x}{:06x}", std::process::id(), n);
            let path = format!("/root/p{}_{n}", std::process::id());
            insert_starting(&store, manager, &id, &path);
            let env = vec![(MARKER_VAR.into(), marker.into())];
            let spec = bash_launch(&ThreadId::new(&id), STREAMER, env, StartKind::Resumed);
            runtime.launch(spec).await.unwrap();
            ids.push(id);
        }
        println!("ready");
        loop {
            tokio::time::sleep(Duration::from_millis(5)).await;
            runtime.flush().await;
            let conn = store.read().unwrap();
            for id in &ids {
                let seq: i64 = conn
                    .query_row("SELECT last_seq FROM threads WHERE id = ?1", [id], |r| {
                        r.get(0)
                    })
                    .unwrap();
                println!("committed {id} {seq}");
            }
        }
    });
}

fn marked_processes(marker: &str) -> Vec<u32> {
    processes_with_env(MARKER_VAR, marker)
}

#[test]
fn sigkill_of_the_owner_loses_no_committed_event_and_leaves_no_process() {
    let rounds: u64 = std::env::var("THREADBASE_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let db = common::temp_db();
    drop(Store::open(&db.path).unwrap());
    let exe = std::env::current_exe().unwrap();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for round in 0..rounds {
        let marker = format!("crash-{}-{round}", std::process::id());
        let mut owner = Command::new(&exe)
            .args([
                "--exact",
                "crash_restore::crash_owner_process",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "THREADBASE_TEST_OWNER",
                format!("{}|{marker}", db.path.display()),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = BufReader::new(owner.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            for line in lines.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait until the children run, then let them stream for a random while.
        loop {
            let line = rx
                .recv_timeout(Duration::from_secs(30))
                .expect("owner became ready");
            if line.ends_with("ready") {
                break;
            }
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 200));
        owner.kill().unwrap(); // SIGKILL
        owner.wait().unwrap();
        reader.join().unwrap();
        let mut committed: HashMap<String, i64> = HashMap::new();
        for line in rx.try_iter() {
            if let Some(rest) = line.strip_prefix("committed ") {
                let (id, seq) = rest.split_once(' ').unwrap();
                committed.insert(id.to_string(), seq.parse().unwrap());
            }
        }
        assert!(
            !marked_processes(&marker).is_empty(),
            "round {round}: the children outlived their owner"
        );

        let store = Store::open(&db.path).unwrap();
        let report = restore_dead_owners(&store, ProcessIdentity::current()).unwrap();
        assert_eq!(
            report.restored.len() as u64,
            CHILDREN,
            "round {round}: {report:?}"
        );
        assert_eq!(
            report.killed_groups.len() as u64,
            CHILDREN,
            "round {round}: {report:?}"
        );
        // Group kills land at once; give the kernel a moment to reap.
        let mut left = marked_processes(&marker);
        for _ in 0..40 {
            if left.is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(25));
            left = marked_processes(&marker);
        }
        assert!(left.is_empty(), "round {round}: survivors {left:?}");

        let conn = store.read().unwrap();
        for (id, seq) in &committed {
            let (status, phase, exit, message, last_seq): (String, String, String, String, i64) = conn.query_row(
                    "SELECT status, phase, exit_kind, exit_message, last_seq FROM threads WHERE id = ?1",
                    [id],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)),
                )
                .unwrap();
            assert_eq!(
                (status.as_str(), phase.as_str(), exit.as_str()),
                ("closed", "stale", "stale"),
                "round {round}"
            );
            assert_eq!(message, STALE_MESSAGE);
            // Every event committed before the kill is still there (plus the stale close).
            assert!(
                last_seq > *seq,
                "round {round}: {id} committed {seq}, stored {last_seq}"
            );
            let evs = events::of_thread(&conn, &ThreadId::new(id)).unwrap();
            assert!(
                evs.windows(2).all(|w| w[1].seq == w[0].seq + 1),
                "seq contiguous"
            );
            assert_eq!(evs.last().unwrap().kind, "thread_closed");
            assert_eq!(evs.last().unwrap().seq, last_seq);
        }
        // A second pass finds nothing to do.
        assert_eq!(
            restore_dead_owners(&store, ProcessIdentity::current())
                .unwrap()
                .restored
                .len(),
            0
        );
    }

    // The next runtime on the same database is fully usable.
    two_workers().block_on(async {
        let store = Arc::new(Store::open(&db.path).unwrap());
        let m = common::manager(&store, "ses_after");
        insert_starting(&store, m, &common::tid(1), "/root/after");
        let runtime = Runtime::new(store.clone(), RuntimeConfig::default());
        let spec = bash_launch(
            &ThreadId::new(common::tid(1)),
            "exit 0",
            vec![],
            StartKind::Resumed,
        );
        runtime.launch(spec).await.unwrap();
        runtime.shutdown().await;
        let status: String = store
            .read()
            .unwrap()
            .query_row(
                "SELECT status FROM threads WHERE id = ?1",
                [common::tid(1)],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(status, "closed");
    });
}
