//! `list`: the empty list, and long lists streamed into the line a batch at a time (through
//! serve's pipes and over sockets).

use super::{
    details, read_reply, seed_closed_threads, text, with_serve, world, write_list, SCRIPT,
};
use crate::support::common;
use serde_json::{json, Value};

/// `list` with nothing to list: pi-threads' `formatList` text for an empty list, and the
/// list details with every count zero.
#[test]
fn an_empty_list_says_no_threads_are_managed() {
    let (w, mut s) = with_serve(SCRIPT);
    let r = s.thread(json!({"action": "list"}));
    assert_eq!(
        r["content"],
        json!([{"type": "text", "text": "No Pi threads are managed by this parent session."}])
    );
    assert_eq!(
        r["details"],
        json!({"kind": "listed", "threads": [], "snapshots": [], "count": 0, "liveCount": 0,
               "closedCount": 0, "detail": "summary"})
    );
    assert_eq!(text(&r), threadbase::contract::format::NO_THREADS);
    w.close_all(s);
}

/// A long list (streamed into the line a batch at a time) over sockets, as a Pi extension's
/// `child_process.spawn` gives serve its stdio: one socket pair for stdin and one for stdout
/// (a socket whose send buffer serve widened), and one socket for both (kept blocking).
#[test]
fn a_long_list_crosses_sockets_whole() {
    use std::os::fd::OwnedFd;
    const N: u64 = 600;
    for shared in [false, true] {
        let w = world(serde_json::from_str(SCRIPT).unwrap());
        let (ours_in, theirs_in) = std::os::unix::net::UnixStream::pair().unwrap();
        let (ours_out, theirs_out) = if shared {
            (ours_in.try_clone().unwrap(), theirs_in.try_clone().unwrap())
        } else {
            std::os::unix::net::UnixStream::pair().unwrap()
        };
        let mut child = w.spawn_serve(OwnedFd::from(theirs_in), OwnedFd::from(theirs_out));
        let mut writer = ours_in;
        let mut reader = std::io::BufReader::new(ours_out);
        let mut line = String::new();
        let mut list = |writer: &mut std::os::unix::net::UnixStream, id: u64| -> Value {
            write_list(writer, id);
            let r = read_reply(&mut reader, &mut line);
            assert_eq!(r["id"], id, "shared {shared}");
            r["result"].clone()
        };
        assert_eq!(details(&list(&mut writer, 1))["count"], 0);
        seed_closed_threads(&w.base.db, N);
        let r = list(&mut writer, 2);
        let d = details(&r);
        assert_eq!(d["count"].as_u64(), Some(N), "shared {shared}");
        assert_eq!(d["threads"].as_array().map(Vec::len), Some(N as usize));
        assert_eq!(d["threads"], d["snapshots"], "shared {shared}");
        // A line for each of the first 200 threads, then one that says how many more.
        assert_eq!(text(&r).lines().count(), 201, "shared {shared}");
        writer.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(child.wait().unwrap().success());
    }
}

/// A list longer than a batch (256 threads) is streamed into the response line a batch at a
/// time: every thread once, in list order, the list twice (`threads` and `snapshots`), a
/// content line for each of the first 200 threads, and the same answer once the rendered
/// answers are kept.
#[test]
fn a_long_list_is_spilled_whole_and_answers_the_same_each_time() {
    const N: u64 = 700;
    let (w, mut s) = with_serve(SCRIPT);
    let r = s.thread(json!({"action": "list"}));
    assert_eq!(details(&r)["count"], 0);
    seed_closed_threads(&w.base.db, N);

    let first = s.thread(json!({"action": "list"}));
    let d = details(&first);
    assert_eq!(d["kind"], "listed");
    assert_eq!(
        (d["count"].as_u64(), d["closedCount"].as_u64()),
        (Some(N), Some(N))
    );
    assert_eq!(d["liveCount"], 0);
    let ids: Vec<&str> = d["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    let want: Vec<String> = (0..N).map(common::tid).collect();
    assert_eq!(ids, want, "every thread once, in list order");
    assert_eq!(d["threads"], d["snapshots"]);
    let lines: Vec<&str> = text(&first).lines().collect();
    assert_eq!(
        lines.len(),
        201,
        "a content line for each of the first 200 threads, then how many more"
    );
    assert!(lines[0].contains("/root/t_0000"), "{}", lines[0]);
    assert!(lines[199].contains("/root/t_0199"), "{}", lines[199]);
    assert!(
        lines[200].starts_with(&format!(
            "… and {} more not shown: this text lists the first 200 of {N} threads",
            N - 200
        )),
        "{}",
        lines[200]
    );

    // The first list rendered the answers and serve kept them in its memory: a list read
    // from the kept answers is the same answer.
    let again = s.thread(json!({"action": "list"}));
    assert_eq!(again, first);
    // And a long list filtered by state reads only its rows.
    let closed = s.thread(json!({"action": "list", "state": "closed"}));
    assert_eq!(details(&closed)["threads"], d["threads"]);
    let live = s.thread(json!({"action": "list", "state": "live"}));
    assert_eq!(details(&live)["count"], 0);
    assert_eq!(
        text(&live),
        "No Pi threads are managed by this parent session."
    );
}
