//! Each child in a git worktree of its own (issue 48, `THREADBASE_ISOLATION=worktree`), with
//! real git repositories: two children editing one file at once, each only in its own
//! worktree; `diff`, `merge` (a clean one, then a conflict that leaves the main tree exactly
//! as it was), `worktree clean --merged`; resume, fork (from the source's uncommitted state),
//! a SIGKILL of serve mid-turn and `restore`; the bad inputs, each an error with `Repair:`
//! and nothing changed. Children are scripted agents whose `write` step writes a file in their
//! cwd; the module runs on SQLite and, through `postgres::suite`, on PostgreSQL.

use crate::support::common;
use crate::support::serve_client::{Scripted, Serve};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{json, Value};

const ISOLATED: &[(&str, &str)] = &[("THREADBASE_ISOLATION", "worktree")];

/// Runs git in `dir`; its stdout (it must succeed).
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository at `<root>/repo` on branch main with `notes.txt` and `src/lib.txt` committed.
fn repo(root: &Path) -> PathBuf {
    let r = root.join("repo");
    std::fs::create_dir_all(r.join("src")).unwrap();
    git(&r, &["init", "--quiet", "-b", "main"]);
    std::fs::write(r.join("notes.txt"), "base\n").unwrap();
    std::fs::write(r.join("src/lib.txt"), "lib\n").unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "--quiet", "-m", "init"]);
    r
}

/// `git status --porcelain` and the hash of `notes.txt`: what "exactly as before" compares.
fn main_state(repo: &Path) -> (String, String) {
    (
        git(repo, &["status", "--porcelain", "--untracked-files=all"]),
        git(repo, &["hash-object", "notes.txt"]),
    )
}

struct World {
    base: Scripted,
    repo: PathBuf,
}

impl World {
    fn new(name: &str, script: Value) -> World {
        let base = Scripted::new(name);
        base.script("script", &script.to_string());
        let repo = repo(&base.root);
        World { base, repo }
    }

    fn serve(&self, env: &[(&str, &str)]) -> Serve {
        self.base.serve("script", Vec::new(), env)
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = common::threadbase(&self.base.db, args);
        assert!(
            out.status.success(),
            "threadbase {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// A CLI run that must fail: its stderr.
    fn cli_error(&self, args: &[&str]) -> String {
        let out = common::threadbase(&self.base.db, args);
        assert!(
            !out.status.success(),
            "threadbase {args:?} should fail: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8(out.stderr).unwrap()
    }

    /// The worktree row of `id`: (path, branch, base_commit, removed_at).
    fn row(&self, id: &str) -> Option<(String, String, String, Option<String>)> {
        let v: Value = serde_json::from_str(&self.cli(&[
            "sql",
            "--json",
            &format!("SELECT path, branch, base_commit, removed_at FROM thread_worktrees WHERE thread_id = '{id}'"),
        ]))
        .unwrap();
        v.as_array().unwrap().first().map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["branch"].as_str().unwrap().to_string(),
                r["base_commit"].as_str().unwrap().to_string(),
                r["removed_at"].as_str().map(str::to_string),
            )
        })
    }
}

/// One turn that writes `{prompt}` into `notes.txt` in the child's cwd, then answers.
fn writer_script() -> Value {
    json!({"turns": [
        [{"write": {"path": "notes.txt", "content": "{prompt}\n"}}, {"text": "wrote {prompt}"}]
    ]})
}

fn start(s: &mut Serve, prompt: &str, task: &str, cwd: &Path) -> u64 {
    s.send(
        "thread",
        json!({"action": "start", "prompt": prompt, "taskName": task, "cwd": cwd}),
    )
}

fn result_of(s: &Serve, req: u64) -> Value {
    let r = s.response(req, Duration::from_secs(60));
    assert!(r.get("error").is_none(), "{r}");
    r["result"].clone()
}

fn wait(s: &mut Serve, id: &str) -> Value {
    s.thread(json!({"action": "wait", "id": id, "timeoutMs": 30000}))
}

fn text(r: &Value) -> &str {
    r["content"][0]["text"].as_str().unwrap()
}

/// Two children started at once on one repository, each editing the same file: two different
/// changes, each only in its own worktree, the main tree untouched; `diff` shows each; the
/// first merges; the second's conflict is refused and the main tree is exactly as before;
/// `clean --merged` removes only the first.
#[test]
fn two_children_edit_one_file_each_in_its_own_worktree() {
    let w = World::new("wt_two", writer_script());
    let mut s = w.serve(ISOLATED);
    let before = main_state(&w.repo);
    let a = start(&mut s, "alpha", "fix_a", &w.repo);
    let b = start(&mut s, "beta", "fix_b", &w.repo);
    let (ra, rb) = (result_of(&s, a), result_of(&s, b));
    let ids: Vec<String> = [&ra, &rb]
        .iter()
        .map(|r| r["details"]["thread"]["id"].as_str().unwrap().to_string())
        .collect();
    for (r, task) in [(&ra, "fix_a"), (&rb, "fix_b")] {
        let wt = &r["details"]["thread"]["worktree"];
        let branch = wt["branch"].as_str().unwrap();
        assert!(branch.starts_with(&format!("threadbase/{task}-")), "{r}");
        assert!(
            wt["path"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{}/.threadbase/worktrees/{task}-", w.repo.display())),
            "{r}"
        );
        assert_eq!(r["details"]["thread"]["cwd"], wt["path"], "{r}");
        assert!(text(r).contains("Worktree: .threadbase/worktrees/"), "{}", text(r));
    }
    let mut paths = Vec::new();
    for (id, word) in ids.iter().zip(["alpha", "beta"]) {
        let r = wait(&mut s, id);
        assert_eq!(r["details"]["snapshot"]["phase"], "idle", "{r}");
        let (path, branch, base, removed) = w.row(id).expect("a worktree row");
        assert_eq!(removed, None);
        assert_eq!(base, git(&w.repo, &["rev-parse", "HEAD"]).trim());
        assert_eq!(
            std::fs::read_to_string(Path::new(&path).join("notes.txt")).unwrap(),
            format!("{word}\n")
        );
        // The poll and wait texts say where and what changed.
        let line = format!(
            "Worktree: {} (branch {branch}): 1 file changed, +1 \u{2212}1",
            Path::new(&path).strip_prefix(&w.repo).unwrap().display()
        );
        assert!(text(&r).contains(&line), "{}", text(&r));
        let p = s.thread(json!({"action": "poll", "id": id}));
        assert!(text(&p).contains(&line), "{}", text(&p));
        assert_eq!(p["details"]["snapshot"]["worktree"]["branch"], branch);
        // diff shows the thread's own change.
        let d = w.cli(&["diff", id]);
        assert!(d.contains(&format!("+{word}")) && d.contains("-base"), "{d}");
        let st = w.cli(&["diff", id, "--stat"]);
        assert!(st.contains("notes.txt") && st.contains("1 file changed"), "{st}");
        paths.push(path);
    }
    // The main tree is untouched: .threadbase/ is excluded, notes.txt as committed.
    assert_eq!(main_state(&w.repo), before);
    assert_eq!(before.0, "");
    // Merge needs the threads settled; stop them (their worktrees stay).
    for id in &ids {
        s.thread(json!({"action": "stop", "id": id}));
    }
    for p in &paths {
        assert!(Path::new(p).join("notes.txt").exists(), "stop keeps {p}");
    }
    let merged = w.cli(&["merge", &ids[0]]);
    assert!(merged.contains("Merged /root/fix_a"), "{merged}");
    assert_eq!(
        std::fs::read_to_string(w.repo.join("notes.txt")).unwrap(),
        "alpha\n"
    );
    let after_first = main_state(&w.repo);
    let head = git(&w.repo, &["rev-parse", "HEAD"]);
    let e = w.cli_error(&["merge", &ids[1]]);
    assert!(
        e.contains("conflict") && e.contains("notes.txt") && e.contains("Repair:"),
        "{e}"
    );
    assert_eq!(main_state(&w.repo), after_first, "the main tree is as before");
    assert_eq!(git(&w.repo, &["rev-parse", "HEAD"]), head);
    assert!(!w.repo.join(".git/MERGE_HEAD").exists());
    // clean --merged removes only the first.
    let dry = w.cli(&["worktree", "clean", "--merged", "--dry-run"]);
    assert!(dry.contains("would remove: /root/fix_a"), "{dry}");
    assert!(Path::new(&paths[0]).exists());
    let cleaned = w.cli(&["worktree", "clean", "--merged"]);
    assert!(cleaned.contains("removed: /root/fix_a"), "{cleaned}");
    assert!(
        cleaned.contains("kept: not merged: /root/fix_b"),
        "{cleaned}\n{e}\n{}",
        git(&w.repo, &["log", "--all", "--graph", "--oneline"])
    );
    assert!(!Path::new(&paths[0]).exists());
    assert!(Path::new(&paths[1]).join("notes.txt").exists());
    assert!(w.row(&ids[0]).unwrap().3.is_some());
    assert_eq!(w.row(&ids[1]).unwrap().3, None);
    let branches = git(&w.repo, &["branch", "--list", "threadbase/*"]);
    assert!(!branches.contains("fix_a") && branches.contains("fix_b"), "{branches}");
    let list = w.cli(&["worktree", "list"]);
    assert!(list.contains("/root/fix_a [closed]") && list.contains("removed"), "{list}");
    assert!(list.contains("/root/fix_b [closed]") && list.contains("1 file changed"), "{list}");
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}
