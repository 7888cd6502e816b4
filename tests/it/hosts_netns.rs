//! Two hosts that share nothing but the database (issue 33): each host's serve runs in a
//! network namespace of its own (and, as in hosts.rs, a PID namespace of its own, so their pids
//! collide), reaching a PostgreSQL cluster of this test over its own veth link. Neither can
//! reach the other, nor the database on loopback: the database socket is the only channel
//! between them, so what host A asks of host B's thread travels as rows.
//!
//! Needs root (`ip netns`, veth links, `unshare`) and PostgreSQL's binaries (`.ci/postgres`
//! starts a throwaway cluster listening on the two links); skips with the reason without them,
//! and fails under `CI=true`.

use crate::support::serve_client::{Scripted, Serve};

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A network namespace with a veth link to this one: its end is `.2`, ours `.1`, of
/// `10.233.<net>.0/30`. Removed (with the link) when dropped, the test failing or not.
struct Netns {
    name: String,
    host_side: String,
    net: u8,
}

impl Netns {
    fn new(tag: &str, net: u8) -> Netns {
        let pid = std::process::id();
        let ns = Netns {
            name: format!("tb{tag}{pid}"),
            host_side: format!("tbv{tag}{pid}"),
            net,
        };
        let peer = format!("tbp{tag}{pid}");
        let ours = format!("{}/30", ns.ours());
        let theirs = format!("{}/30", ns.theirs());
        for args in [
            vec!["netns", "add", &ns.name],
            vec![
                "link",
                "add",
                &ns.host_side,
                "type",
                "veth",
                "peer",
                "name",
                &peer,
            ],
            vec!["link", "set", &peer, "netns", &ns.name],
            vec!["addr", "add", &ours, "dev", &ns.host_side],
            vec!["link", "set", &ns.host_side, "up"],
            vec![
                "netns", "exec", &ns.name, "ip", "addr", "add", &theirs, "dev", &peer,
            ],
            vec!["netns", "exec", &ns.name, "ip", "link", "set", &peer, "up"],
            vec!["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"],
        ] {
            ok(&run("ip", &args), &format!("ip {}", args.join(" ")));
        }
        ns
    }

    /// This namespace's end of the link (the database's address, seen from inside).
    fn ours(&self) -> String {
        format!("10.233.{}.1", self.net)
    }

    fn theirs(&self) -> String {
        format!("10.233.{}.2", self.net)
    }

    /// Whether a TCP connection to `addr:port` from inside the namespace succeeds within 2 s.
    fn reaches(&self, addr: &str, port: u16) -> bool {
        run(
            "ip",
            &[
                "netns",
                "exec",
                &self.name,
                "timeout",
                "2",
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{addr}/{port}"),
            ],
        )
        .status
        .success()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting the namespace deletes its end of the link, and with it ours.
        let _ = run("ip", &["netns", "del", &self.name]);
        let _ = run("ip", &["link", "del", &self.host_side]);
    }
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd).args(args).output().unwrap()
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A throwaway PostgreSQL cluster listening on loopback and on the given veth addresses
/// (`.ci/postgres` with THREADBASE_PG_LISTEN); stopped and removed when dropped.
struct Cluster {
    /// A temporary folder holding the cluster's (`cluster/`); removed with it.
    parent: PathBuf,
    dir: PathBuf,
    port: u16,
}

impl Cluster {
    fn start(nets: &[&Netns]) -> Cluster {
        let parent = tempfile::tempdir().unwrap().keep();
        // The cluster's owner (`postgres` when run as root) must reach its folder.
        let _ = run("chmod", &["755", parent.to_str().unwrap()]);
        let dir = parent.join("cluster");
        let listen: Vec<String> = nets.iter().map(|n| format!("{}/30", n.ours())).collect();
        let out = Command::new("bash")
            .arg(repo().join(".ci/postgres"))
            .arg("start")
            .arg(&dir)
            .env("THREADBASE_PG_LISTEN", listen.join(","))
            .env("THREADBASE_PG_FAST", "1")
            .output()
            .unwrap();
        ok(&out, ".ci/postgres start");
        let port = std::fs::read_to_string(dir.join("port"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        Cluster { parent, dir, port }
    }

    /// The URL of its test database at `addr`.
    fn url(&self, addr: &str) -> String {
        format!("postgres://threadbase@{addr}:{}/threadbase_test", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join(".ci/postgres"))
            .arg("stop")
            .arg(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.parent);
    }
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Whether this machine can run the test (root, `ip`, `unshare`, PostgreSQL's binaries);
/// prints why not, and fails under `CI=true`.
fn can_run(test: &str) -> bool {
    let root = run("id", &["-u"]).stdout == b"0\n";
    let ip = Command::new("ip").arg("-V").output().is_ok();
    let pg = Path::new("/usr/lib/postgresql").exists()
        || Command::new("pg_ctl").arg("--version").output().is_ok();
    let why = match (root, ip, pg) {
        (false, _, _) => Some("it needs root (network namespaces, veth links)"),
        (_, false, _) => Some("`ip` (iproute2) is missing"),
        (_, _, false) => Some("PostgreSQL's binaries are missing (.ci/postgres installs them)"),
        _ => None,
    };
    if let Some(why) = why {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{test}: {why}"
        );
        eprintln!("{test}: skipped: {why}");
        return false;
    }
    crate::hosts::pid_namespaces_or_skip(test)
}

/// The thread at `path`: (status, exit kind, host id).
fn row(db: &str, path: &str) -> (String, Option<String>, Option<String>) {
    crate::support::sql::Conn::open(Path::new(db))
        .unwrap()
        .query_row(
            "SELECT status, exit_kind, host_id FROM threads WHERE path = ?1",
            [path],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap()
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_hosts_in_network_namespaces_reach_each_other_only_through_the_database() {
    if !can_run("two_hosts_in_network_namespaces") {
        return;
    }
    let net = (std::process::id() % 100) as u8 * 2;
    let (ns_a, ns_b) = (Netns::new("a", net), Netns::new("b", net + 1));
    let cluster = Cluster::start(&[&ns_a, &ns_b]);
    let (url_a, url_b) = (cluster.url(&ns_a.ours()), cluster.url(&ns_b.ours()));
    // What each namespace reaches: the database on its own link, nothing else.
    assert!(ns_a.reaches(&ns_a.ours(), cluster.port));
    assert!(ns_b.reaches(&ns_b.ours(), cluster.port));
    assert!(
        !ns_a.reaches("127.0.0.1", cluster.port),
        "host A reaches loopback's database"
    );
    assert!(
        !ns_a.reaches(&ns_b.ours(), cluster.port),
        "host A reaches host B's link"
    );
    assert!(!ns_a.reaches(&ns_b.theirs(), 22), "host A reaches host B");
    assert!(
        !ns_b.reaches(&ns_a.ours(), cluster.port),
        "host B reaches host A's link"
    );
    // This test process reads the database on loopback.
    let db = cluster.url("127.0.0.1");

    let mut base = Scripted::new("hosts_netns");
    let header = json!({"type":"session","version":3,"id":"ses_netns","timestamp":"2026-12-05T00:00:00.000Z","cwd":base.root});
    let parent = base.session_file("sessions/parent.jsonl", &[header]);
    base.script(
        "script",
        &json!({"default_reply": "reply to {prompt}"}).to_string(),
    );
    // One session, two hosts: each serve is pid 1 of its own PID namespace inside its own
    // network namespace, and names the database by its link's address.
    let mut serve = |ns: &Netns, url: &str, host: &str| -> Serve {
        base.db = PathBuf::from(url);
        let prefix = [
            "ip",
            "netns",
            "exec",
            &ns.name,
            "unshare",
            "--pid",
            "--fork",
            "--mount-proc",
            "--kill-child",
        ];
        base.serve_under(
            &prefix,
            "script",
            vec!["--session-file".into(), parent.display().to_string()],
            &[("THREADBASE_HOST_ID", host)],
        )
    };
    // B's first: A's serve looks for unreachable hosts once its heartbeat has seen another
    // host's (Store::hosts_to_check), and this test moves B's last heartbeat back rather than
    // wait the 30 s in which A would beat six times.
    let mut b = serve(&ns_b, &url_b, "host-b");
    b.thread(json!({"action": "list"}));
    crate::hosts::until_host_beats(
        &crate::support::sql::Conn::open(Path::new(&db)).unwrap(),
        "host-b",
    );
    let mut a = serve(&ns_a, &url_a, "host-a");
    a.thread(json!({"action": "start", "prompt": "go", "taskName": "on_a"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "b1"}));
    b.thread(json!({"action": "start", "prompt": "go", "taskName": "b2"}));
    for path in ["/root/on_a", "/root/b1", "/root/b2"] {
        until(&format!("{path} idle"), || {
            let listed = a.thread(json!({"action": "poll", "id": path}));
            listed["details"]["snapshot"]["phase"] == "idle"
        });
    }
    assert_eq!(row(&db, "/root/b1").2.as_deref(), Some("host-b"));

    // A send and a stop from host A reach host B's children: command rows B's serve claims.
    let sent = a.thread(json!({"action": "send", "id": "/root/b1", "message": "again"}));
    assert_eq!(sent["details"]["accepted"], true, "{sent}");
    assert!(
        sent["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("carried out by the serve that holds it"),
        "{sent}"
    );
    until("b1's answer to the send", || {
        let polled = a.thread(json!({"action": "poll", "id": "/root/b1"}));
        polled["details"]["snapshot"]["resultSummary"] == "reply to again"
    });
    a.thread(json!({"action": "stop", "id": "/root/b2"}));
    until("b2 stopped", || row(&db, "/root/b2").0 == "closed");
    assert_eq!(row(&db, "/root/b2").1.as_deref(), Some("stopped"));

    // Host B goes away (its serve and its namespace's processes killed) and its lease runs
    // out: host A leaves its live row alone and says at once that it cannot reach it.
    b.child.kill().unwrap();
    b.child.wait().unwrap();
    crate::support::sql::Conn::open(Path::new(&db))
        .unwrap()
        .execute(
            "UPDATE host_serves SET heartbeat_at = '2026-01-01T00:00:00.000Z' WHERE host_id = 'host-b'",
            (),
        )
        .unwrap();
    let out = run(
        "ip",
        &[
            "netns",
            "exec",
            &ns_a.name,
            env!("CARGO_BIN_EXE_threadbase"),
            "--db",
            &url_a,
            "host",
            "list",
            "--json",
        ],
    );
    ok(&out, "host list from host A");
    let hosts: Value = serde_json::from_slice(&out.stdout).unwrap();
    let host_b = hosts["hosts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["hostId"] == "host-b")
        .unwrap()
        .clone();
    assert_eq!(
        (&host_b["up"], &host_b["liveThreads"]),
        (&json!(false), &json!(1)),
        "{hosts}"
    );
    let refused = a.thread_error(json!({"action": "send", "id": "/root/b1", "message": "more"}));
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("held on host host-b, unreachable since 2026-01-01T00:00:00.000Z"),
        "{refused}"
    );
    let polled = a.thread(json!({"action": "poll", "id": "/root/b1"}));
    assert_eq!(
        polled["details"]["snapshot"]["hostUnreachable"]["hostId"], "host-b",
        "{polled}"
    );
    assert_eq!(row(&db, "/root/b1").0, "live");
    assert_eq!(row(&db, "/root/on_a").0, "live");

    // Host B's next serve restores B's row, and only B's: host A's thread stays live.
    let mut b = serve(&ns_b, &url_b, "host-b");
    b.thread(json!({"action": "list"}));
    assert_eq!(
        row(&db, "/root/b1"),
        (
            "closed".to_string(),
            Some("stale".to_string()),
            Some("host-b".to_string())
        )
    );
    assert_eq!(row(&db, "/root/on_a").0, "live");
    a.close(Duration::from_secs(20));
    b.close(Duration::from_secs(20));
    assert!(base.leftovers().is_empty(), "{:?}", base.leftovers());
}
