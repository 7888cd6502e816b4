//! Each child in a git worktree of its own (issue 48), with real Pi 1.6 children: two children
//! started at once on one repository are each told (through the fake LLM) to write the same
//! file with Pi's own `write` tool; each change lands only in its own worktree, the main tree
//! is untouched, `diff` shows each, `merge` of the first succeeds and `merge` of the second
//! reports the conflict and leaves the main tree exactly as before; `worktree clean --merged`
//! removes only the first. Skips without Pi unless CI=true.

use crate::support::common::git;
use crate::support::fake_llm;
use crate::support::serve_client;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use fake_llm::{content_text, hermetic_pi_env, pi_or_skip, FakeLlm, RecordedRequest, Step};
use serde_json::{json, Value};
use serve_client::serve_with_pi_children;

const TIMEOUT: Duration = Duration::from_secs(150);

fn after_tool(r: &RecordedRequest, needle: &str) -> bool {
    let messages = r.messages();
    messages.last().is_some_and(|m| m["role"] == "tool")
        && r.last_user_text().is_some_and(|t| t.contains(needle))
        && content_text(&messages.last().unwrap()["content"]).contains("Successfully wrote")
}

fn threadbase(db: &Path, cwd: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_threadbase"))
        .arg("--db")
        .arg(db)
        .args(args)
        .current_dir(cwd)
        .env_remove("THREADBASE_DB")
        .output()
        .unwrap()
}

fn ok(db: &Path, cwd: &Path, args: &[&str]) -> String {
    let out = threadbase(db, cwd, args);
    assert!(
        out.status.success(),
        "threadbase {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn worktree_of(db: &Path, cwd: &Path, path: &str) -> (String, String) {
    let v: Value = serde_json::from_str(&ok(
        db,
        cwd,
        &[
            "sql",
            "--json",
            &format!("SELECT w.path AS dir, w.branch FROM thread_worktrees w JOIN threads t ON t.id = w.thread_id WHERE t.path = '{path}'"),
        ],
    ))
    .unwrap();
    let r = v
        .as_array()
        .and_then(|rows| rows.first())
        .unwrap_or_else(|| panic!("no worktree row for {path}: {v}"));
    (
        r["dir"].as_str().unwrap().to_string(),
        r["branch"].as_str().unwrap().to_string(),
    )
}

#[test]
fn real_pi_two_children_edit_one_file_each_in_its_own_worktree() {
    let Some(pi) = pi_or_skip("real_pi_two_children_edit_one_file_each_in_its_own_worktree") else {
        return;
    };
    let fake = FakeLlm::start();
    for (task, text) in [("EDIT-A", "from child A\n"), ("EDIT-B", "from child B\n")] {
        fake.route(
            move |r| r.last_is_user(task),
            Step::tool_call("write", json!({"path": "notes.txt", "content": text})),
        );
        fake.route(
            move |r| after_tool(r, task),
            Step::text(format!("{task} DONE")),
        );
    }
    let env = hermetic_pi_env(&fake);
    let repo = env.root.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    std::fs::write(repo.join("notes.txt"), "base\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "init"]);
    let before = (
        git(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(&repo, &["hash-object", "notes.txt"]),
    );
    let db = env.root.path().join("db.sqlite");
    let argv = env.child_command(&pi, &[]);
    let mut vars = env.env.clone();
    vars.push(("THREADBASE_ISOLATION".into(), "worktree".into()));
    let mut root = serve_with_pi_children(&db, &vars, &repo, &argv, "thread", "ses_root");
    // Both starts in one burst, as one assistant message's two tool calls.
    let a = root.send(
        "thread",
        json!({"action": "start", "taskName": "a", "prompt": "EDIT-A: write notes.txt"}),
    );
    let b = root.send(
        "thread",
        json!({"action": "start", "taskName": "b", "prompt": "EDIT-B: write notes.txt"}),
    );
    for id in [a, b] {
        let r = root.response(id, TIMEOUT);
        assert!(r.get("error").is_none(), "{r}");
    }
    for task in ["a", "b"] {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let r = root.thread(json!({"action": "wait", "id": task, "timeoutMs": 30000}));
            let summary = r["details"]["snapshot"]["resultSummary"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            if summary.contains("DONE") {
                break;
            }
            assert!(Instant::now() < deadline, "{task} never finished: {r}");
        }
    }
    let (dir_a, branch_a) = worktree_of(&db, &repo, "/root/a");
    let (dir_b, branch_b) = worktree_of(&db, &repo, "/root/b");
    assert_ne!(dir_a, dir_b);
    assert!(dir_a.contains("/.threadbase/worktrees/a-"), "{dir_a}");
    assert!(branch_a.starts_with("threadbase/a-"), "{branch_a}");
    assert!(branch_b.starts_with("threadbase/b-"), "{branch_b}");
    // Each change only in its own worktree; the main tree untouched.
    assert_eq!(
        std::fs::read_to_string(Path::new(&dir_a).join("notes.txt")).unwrap(),
        "from child A\n"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&dir_b).join("notes.txt")).unwrap(),
        "from child B\n"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "base\n"
    );
    let now = (
        git(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(&repo, &["hash-object", "notes.txt"]),
    );
    assert_eq!(now, before, "the main tree changed");
    // diff shows each.
    let diff_a = ok(&db, &repo, &["diff", "/root/a"]);
    assert!(diff_a.contains("+from child A"), "{diff_a}");
    let diff_b = ok(&db, &repo, &["diff", "/root/b"]);
    assert!(diff_b.contains("+from child B"), "{diff_b}");
    // Merge the first; the second conflicts and leaves the main tree exactly as before.
    ok(&db, &repo, &["merge", "/root/a"]);
    assert_eq!(
        std::fs::read_to_string(repo.join("notes.txt")).unwrap(),
        "from child A\n"
    );
    let merged = (
        git(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(&repo, &["hash-object", "notes.txt"]),
        git(&repo, &["rev-parse", "HEAD"]),
    );
    let refused = threadbase(&db, &repo, &["merge", "/root/b"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("conflict") && err.contains("Repair:"), "{err}");
    let after = (
        git(&repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(&repo, &["hash-object", "notes.txt"]),
        git(&repo, &["rev-parse", "HEAD"]),
    );
    assert_eq!(after, merged, "a refused merge changed the main tree");
    // Clean of merged worktrees (of closed threads) removes only the first.
    root.thread(json!({"action": "stop", "id": "a"}));
    root.thread(json!({"action": "stop", "id": "b"}));
    ok(&db, &repo, &["worktree", "clean", "--merged"]);
    assert!(!Path::new(&dir_a).exists(), "{dir_a} still there");
    assert!(Path::new(&dir_b).exists(), "{dir_b} was removed");
    root.close(Duration::from_secs(30));
}
