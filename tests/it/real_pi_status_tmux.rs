//! The status line in an interactive Pi session (issues 45 and 49), captured with tmux: real
//! Pi 1.6 in its terminal UI, with `pi-extension/index.ts`, against the loopback fake LLM. The
//! model starts a child that spends in several steps; the footer's `threads: …` entry shows
//! the child busy and the tree's spend growing while it runs, then the child idle. The screens
//! are printed. Skips without Pi or tmux unless CI=true.

use crate::support::fake_llm;

use std::process::Command;
use std::time::{Duration, Instant};

use fake_llm::{hermetic_pi_env, pi_or_skip, FakeLlm, RecordedRequest, Step, Usage};
use serde_json::json;

/// A private tmux server (its own socket), killed on drop.
struct Tmux {
    socket: String,
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

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "pi"]).stdout).into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

fn have_tmux() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// How many tool results the request carries (the child's step).
fn tool_results(r: &RecordedRequest) -> usize {
    r.messages().iter().filter(|m| m["role"] == "tool").count()
}

fn is_child(r: &RecordedRequest) -> bool {
    r.messages().iter().any(|m| {
        m["role"] == "user" && fake_llm::content_text(&m["content"]).contains("SPEND-TASK")
    })
}

/// The footer's status entry: the line holding `threads: `, from there on.
fn status_of(screen: &str) -> Option<String> {
    screen
        .lines()
        .find_map(|l| l.find("threads: ").map(|at| l[at..].trim_end().to_string()))
}

#[test]
fn real_pi_status_line_shows_the_spend_moving_while_a_child_runs() {
    let test = "real_pi_status_line_shows_the_spend_moving_while_a_child_runs";
    let Some(pi) = pi_or_skip(test) else {
        return;
    };
    if !have_tmux() {
        crate::support::common::required_or_skip(test, "tmux", "apt-get install -y tmux");
        return;
    }
    let fake = FakeLlm::start();
    // The session's model starts one child and says so.
    fake.route(
        |r| !is_child(r) && tool_results(r) == 0,
        Step::tool_call(
            "thread",
            json!({"action": "start", "taskName": "spender", "prompt": "SPEND-TASK: work in steps"}),
        ),
    );
    fake.route(
        |r| !is_child(r) && tool_results(r) > 0,
        Step::text("Started the spender."),
    );
    // The child: five steps, each a model call that costs, then a slow tool.
    for step in 0..5 {
        fake.route(
            move |r| is_child(r) && tool_results(r) == step,
            Step::bash("sleep 1.5").with_usage(Usage::new(20_000, 400, 0, 0)),
        );
    }
    fake.route(
        |r| is_child(r) && tool_results(r) == 5,
        Step::text("SPENT").with_usage(Usage::new(20_000, 400, 0, 0)),
    );
    let env = hermetic_pi_env(&fake);
    env.set_model_cost(3.0, 15.0, 0.3, 3.75);
    let extension = concat!(env!("CARGO_MANIFEST_DIR"), "/pi-extension/index.ts");
    // Interactive Pi: the hermetic flags without `--mode rpc`, plus the extension.
    let mut argv: Vec<String> = pi.clone();
    let mut skip = false;
    for a in &env.args {
        if skip {
            skip = false;
            continue;
        }
        if a == "--mode" {
            skip = true;
            continue;
        }
        argv.push(a.clone());
    }
    argv.extend(["-e".to_string(), extension.to_string()]);
    let db = env.root.path().join("db.sqlite");
    let mut vars = env.env.clone();
    vars.push((
        "THREADBASE_BIN".into(),
        env!("CARGO_BIN_EXE_threadbase").into(),
    ));
    vars.push(("THREADBASE_DB".into(), db.display().to_string()));
    vars.push(("TERM".into(), "xterm-256color".into()));
    // The session's serve launches its children as real Pi too.
    vars.push((
        "THREADBASE_PI_COMMAND".into(),
        serde_json::to_string(&env.child_command(&pi, &[])).unwrap(),
    ));
    let quote = |s: &str| format!("'{}'", s.replace('\'', "'\\''"));
    let command = format!(
        "cd {} && env -i {} {}",
        quote(&env.cwd.display().to_string()),
        vars.iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect::<Vec<_>>()
            .join(" "),
        argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
    );
    let tmux = Tmux {
        socket: format!("tbstatus-{}", std::process::id()),
    };
    let out = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "pi",
        "-x",
        "140",
        "-y",
        "40",
        &command,
    ]);
    assert!(out.status.success(), "tmux new-session: {out:?}");
    // Pi's editor is up: type the prompt.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = tmux.capture();
        if screen.lines().filter(|l| !l.trim().is_empty()).count() > 3 {
            break;
        }
        assert!(Instant::now() < deadline, "Pi never drew its UI:\n{screen}");
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(1500));
    assert!(tmux
        .cmd(&[
            "send-keys",
            "-t",
            "pi",
            "Start the spender in the background.",
            "Enter"
        ])
        .status
        .success());
    // The footer while the child runs: busy, with the spend growing.
    let mut busy_spends: Vec<String> = Vec::new();
    let mut screens = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    let idle = loop {
        let screen = tmux.capture();
        if let Some(status) = status_of(&screen) {
            if status.contains("1 busy") && busy_spends.last() != Some(&status) {
                busy_spends.push(status.clone());
                screens.push(screen.clone());
            }
            if status.contains("1 idle") {
                break status;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the child never went idle; busy statuses {busy_spends:?}; screen:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    for s in &screens {
        println!("---- a screen while the child ran ----\n{s}");
    }
    println!("statuses while busy: {busy_spends:?}; then: {idle}");
    assert!(
        busy_spends.iter().filter(|s| s.contains('$')).count() >= 2,
        "the spend did not move while the child ran: {busy_spends:?}"
    );
    assert!(idle.contains('$'), "{idle}");
    let _ = tmux.cmd(&["send-keys", "-t", "pi", "C-c", ""]);
    let _ = tmux.cmd(&["send-keys", "-t", "pi", "C-d", ""]);
    let left = env.leftovers_after(Duration::from_secs(20));
    if !left.is_empty() {
        // The tmux server's end kills the session's process group; Pi's serve and child end
        // with it.
        drop(tmux);
        let left = env.leftovers_after(Duration::from_secs(20));
        assert!(left.is_empty(), "{left:?}");
    }
}
