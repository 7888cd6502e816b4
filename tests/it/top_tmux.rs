//! `threadbase top` driven in tmux against a database seeded by a real `threadbase serve` whose
//! children are scripted agents: the tree, selection and detail, the state filter, the search,
//! the emergency stop carried out by the serve's watcher, and quitting. Also prints the idle CPU
//! of `top` (asserted nothing about: timing depends on the machine).

use crate::support::serve_client;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use serve_client::{processes_with_env, Scripted};

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
    session: String,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", &self.session];
        args.extend_from_slice(keys);
        assert!(self.cmd(&args).status.success());
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(
            &self
                .cmd(&["capture-pane", "-p", "-t", &self.session])
                .stdout,
        )
        .into_owned()
    }

    /// Waits until the screen satisfies `ok`, returning it; panics with the screen otherwise.
    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let screen = self.capture();
            if ok(&screen) {
                return screen;
            }
            if Instant::now() > deadline {
                panic!("timed out waiting for {what}; screen:\n{screen}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

/// The first line of the detail pane (the selected thread's path and id).
fn detail_head(screen: &str) -> String {
    let mut lines = screen
        .lines()
        .skip_while(|l| !l.contains("detail (poll, tail)"));
    lines.next();
    lines.next().unwrap_or("").trim().to_string()
}

/// Lines of the tree that show a thread path.
fn tree_paths(screen: &str) -> Vec<String> {
    screen
        .lines()
        .take_while(|l| !l.contains("detail (poll, tail)"))
        .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("/root/")))
        .map(str::to_string)
        .collect()
}

fn status_of(db: &Path, path: &str) -> String {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("SELECT status FROM threads WHERE path = ?1", [path], |r| {
        r.get(0)
    })
    .unwrap()
}

/// utime + stime of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    // Fields after the command: state is field 3, utime 14, stime 15 (1-based).
    Some(rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?)
}

fn clock_ticks() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn top_in_tmux() {
    if !have_tmux() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "tmux is required under CI=true"
        );
        eprintln!("SKIPPED top_in_tmux: tmux is not installed (apt-get install -y tmux)");
        return;
    }
    let place = Scripted::new("top");
    let db = place.db.clone();
    place.script(
        "script",
        r#"{"turns":[{"steps":[{"delay_ms":30000},{"text":"x"}]}]}"#,
    );
    let session_id = |id: &str| vec!["--session-id".to_string(), id.to_string()];
    let mut serve = place.serve("script", session_id("ses_top_test"), &[]);
    for (task, name) in [("alpha", "Alpha"), ("beta", "Beta"), ("gamma", "Gamma")] {
        let r: Value = serve.thread(
            json!({"action": "start", "prompt": format!("{name} work"), "taskName": task, "name": name}),
        );
        assert_eq!(r["details"]["kind"], "started", "{r}");
    }
    let r = serve.thread(json!({"action": "stop", "id": "gamma"}));
    assert_eq!(r["details"]["snapshot"]["status"], "closed", "{r}");

    let tmux = Tmux {
        socket: format!("tbtop-{}", std::process::id()),
        session: "top".into(),
    };
    let top_marker = format!("{}-tui", place.marker);
    let command = format!(
        "env THREADBASE_TOP_MARKER={top_marker} {} --db {} top",
        env!("CARGO_BIN_EXE_threadbase"),
        db.display()
    );
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "top",
        "-x",
        "100",
        "-y",
        "30",
        &command,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");

    // The tree shows every path, live before closed.
    let screen = tmux.wait_for("the tree", |s| s.contains("/root/gamma"));
    assert_eq!(
        tree_paths(&screen),
        ["/root/alpha", "/root/beta", "/root/gamma"],
        "{screen}"
    );
    assert!(screen.contains("session ses_top_test"), "{screen}");

    // j/k move the selection; the detail pane follows.
    tmux.keys(&["j"]);
    tmux.wait_for("alpha's detail", |s| {
        detail_head(s).starts_with("/root/alpha")
    });
    tmux.keys(&["j"]);
    let screen = tmux.wait_for("beta's detail", |s| {
        detail_head(s).starts_with("/root/beta")
    });
    assert!(screen.contains("recent events"), "{screen}");
    // Tokens and cost per row; the thread's and its subtree's spend in the detail pane.
    assert!(
        screen.contains("TOKENS") && screen.contains("COST"),
        "{screen}"
    );
    assert!(screen.contains("usage: 0 tokens"), "{screen}");
    assert!(
        screen.contains("subtree: 1 thread · 0 tokens · $0.0000"),
        "{screen}"
    );
    tmux.keys(&["k"]);
    tmux.wait_for("alpha again", |s| detail_head(s).starts_with("/root/alpha"));

    // The state filter: live hides the closed one; back to all.
    tmux.keys(&["f"]);
    let screen = tmux.wait_for("state:live", |s| s.contains("state:live"));
    assert_eq!(
        tree_paths(&screen),
        ["/root/alpha", "/root/beta"],
        "{screen}"
    );
    tmux.keys(&["f"]);
    let screen = tmux.wait_for("state:closed", |s| s.contains("state:closed"));
    assert_eq!(tree_paths(&screen), ["/root/gamma"], "{screen}");
    tmux.keys(&["f"]);
    tmux.wait_for("state:all", |s| s.contains("state:all"));

    // Idle CPU over ~5 s (printed, not asserted).
    let pids = processes_with_env("THREADBASE_TOP_MARKER", &top_marker);
    assert_eq!(pids.len(), 1, "one top process: {pids:?}");
    let pid = pids[0];
    let t0 = cpu_ticks(pid).unwrap();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs(5));
    let used = cpu_ticks(pid).unwrap() - t0;
    let secs = start.elapsed().as_secs_f64();
    let hz = clock_ticks();
    eprintln!(
        "top idle CPU: {used} ticks (CLK_TCK {hz}) over {secs:.1} s = {:.2}% of one core",
        used as f64 / hz as f64 / secs * 100.0
    );

    // `/` search narrows to one thread.
    tmux.keys(&["/"]);
    tmux.wait_for("the search input", |s| s.contains("search names:"));
    tmux.keys(&["Alpha", "Enter"]);
    let screen = tmux.wait_for("search:Alpha", |s| s.contains("search:Alpha"));
    assert_eq!(tree_paths(&screen), ["/root/alpha"], "{screen}");

    // s + y on the live alpha: the serve's watcher stops it.
    tmux.keys(&["g", "j"]);
    tmux.wait_for("alpha selected", |s| {
        detail_head(s).starts_with("/root/alpha")
    });
    tmux.keys(&["s"]);
    tmux.wait_for("the stop prompt", |s| s.contains("y to confirm"));
    tmux.keys(&["y"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while status_of(&db, "/root/alpha") != "closed" {
        assert!(
            Instant::now() < deadline,
            "alpha not closed after stop; screen:\n{}",
            tmux.capture()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The tree refreshes from the change counter.
    tmux.wait_for("alpha shown closed", |s| {
        s.lines()
            .any(|l| l.contains("/root/alpha") && l.contains("closed/"))
    });
    assert_eq!(status_of(&db, "/root/beta"), "live");
    let exit: Option<String> = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT exit_kind FROM threads WHERE path = '/root/alpha'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(exit.as_deref(), Some("stopped"));

    // Esc clears the search.
    tmux.keys(&["Escape"]);
    tmux.wait_for("all paths again", |s| tree_paths(s).len() == 3);

    // beta's own serve (a second manager, beta's session) starts a thread: it shows nested
    // under beta in the same tree, not as a separate manager.
    let (beta_id, beta_session): (String, String) = rusqlite::Connection::open(&db)
        .unwrap()
        .query_row(
            "SELECT id, session_id FROM threads WHERE path = '/root/beta'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let beta_env = [
        ("PI_THREADS_PATH", "/root/beta"),
        ("PI_THREADS_SELF_ID", beta_id.as_str()),
        ("PI_THREADS_DEPTH", "1"),
        ("PI_THREADS_ROOT_SESSION_ID", "ses_top_test"),
    ];
    let mut beta_serve = place.serve("script", session_id(&beta_session), &beta_env);
    let r: Value = beta_serve.thread(
        json!({"action": "start", "prompt": "Nested work", "taskName": "nested", "name": "Nested"}),
    );
    assert_eq!(r["details"]["kind"], "started", "{r}");
    let screen = tmux.wait_for("the nested thread", |s| tree_paths(s).len() == 4);
    assert_eq!(
        tree_paths(&screen),
        [
            "/root/beta",
            "/root/beta/nested",
            "/root/alpha",
            "/root/gamma"
        ],
        "{screen}"
    );
    let column = |path: &str| {
        screen
            .lines()
            .find_map(|l| Some(l[..l.find(&format!("{path} "))?].chars().count()))
            .unwrap_or_else(|| panic!("{path} not on screen:\n{screen}"))
    };
    assert!(
        column("/root/beta/nested") > column("/root/beta"),
        "{screen}"
    );
    assert_eq!(
        screen.matches("session ses_top_test").count(),
        1,
        "{screen}"
    );
    assert!(
        !screen.contains("manager "),
        "one tree, no second manager group:\n{screen}"
    );
    beta_serve.close(Duration::from_secs(10));

    // q quits.
    tmux.keys(&["q"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with_env("THREADBASE_TOP_MARKER", &top_marker).is_empty() {
        assert!(Instant::now() < deadline, "top did not exit on q");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(tmux);
    serve.close(Duration::from_secs(10));
}
