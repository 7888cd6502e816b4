//! Each child in a git worktree of its own (issue 48, `THREADBASE_ISOLATION=worktree`), with
//! real git repositories: two children editing one file at once, each only in its own
//! worktree; `diff`, `merge` (a clean one, then a conflict that leaves the main tree exactly
//! as it was), `worktree clean --merged`; resume, fork (from the source's uncommitted state),
//! a SIGKILL of serve mid-turn and `restore`; the bad inputs, each an error with `Repair:`
//! and nothing changed. Children are scripted agents whose `write` step writes a file in their
//! cwd; the module runs on SQLite and, through `postgres::suite`, on PostgreSQL.

use crate::support::common::{self, git};
use crate::support::serve_client::{scripted_command, Scripted, Serve, ServeSpec};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

const ISOLATED: &[(&str, &str)] = &[("THREADBASE_ISOLATION", "worktree")];

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

/// [`start`], then its result.
fn started(s: &mut Serve, prompt: &str, task: &str, cwd: &Path) -> Value {
    let req = start(s, prompt, task, cwd);
    result_of(s, req)
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
            wt["path"].as_str().unwrap().starts_with(&format!(
                "{}/.threadbase/worktrees/{task}-",
                w.repo.display()
            )),
            "{r}"
        );
        assert_eq!(r["details"]["thread"]["cwd"], wt["path"], "{r}");
        assert!(
            text(r).contains("Worktree: .threadbase/worktrees/"),
            "{}",
            text(r)
        );
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
        assert!(
            d.contains(&format!("+{word}")) && d.contains("-base"),
            "{d}"
        );
        let st = w.cli(&["diff", id, "--stat"]);
        assert!(
            st.contains("notes.txt") && st.contains("1 file changed"),
            "{st}"
        );
        // show and tree say it too.
        let show = w.cli(&["show", id]);
        assert!(
            show.contains(&format!("{path} (branch {branch}, base "))
                && show.contains("1 file changed"),
            "{show}"
        );
        let v: Value = serde_json::from_str(&w.cli(&["show", id, "--json"])).unwrap();
        assert_eq!(
            (
                v["worktree"]["branch"].as_str(),
                v["worktree"]["filesChanged"].as_u64()
            ),
            (Some(branch.as_str()), Some(1)),
            "{v}"
        );
        let tree = w.cli(&["tree"]);
        assert!(tree.contains(&format!("\u{2387} {branch}")), "{tree}");
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
    assert_eq!(
        main_state(&w.repo),
        after_first,
        "the main tree is as before"
    );
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
    assert!(
        !branches.contains("fix_a") && branches.contains("fix_b"),
        "{branches}"
    );
    // A cleaned thread cannot resume: its worktree is gone.
    let e = s.thread_error(json!({"action": "resume", "id": ids[0]}));
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("is gone") && m.contains("worktree clean") && m.contains("Repair:"),
        "{e}"
    );
    let list = w.cli(&["worktree", "list"]);
    assert!(
        list.contains("/root/fix_a [closed]") && list.contains("removed"),
        "{list}"
    );
    assert!(
        list.contains("/root/fix_b [closed]") && list.contains("1 file changed"),
        "{list}"
    );
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}

/// Resume runs in the same worktree; a fork of an isolated thread gets a worktree of its own
/// whose branch starts from the source's current state, uncommitted and untracked files
/// included, and the source's worktree is not touched.
#[test]
fn resume_and_fork_keep_each_worktree_and_its_row() {
    let w = World::new(
        "wt_resume_fork",
        // Each new process plays the script from its first turn (a resume too).
        json!({"turns": [
            [{"write": {"path": "notes.txt", "content": "{prompt}\n"}},
             {"write": {"path": "new/{prompt}.txt", "content": "{prompt}\n"}}, {"text": "wrote"}],
            [{"write": {"path": "notes.txt", "content": "{prompt}\n"}},
             {"write": {"path": "new/{prompt}.txt", "content": "{prompt}\n"}}, {"text": "wrote"}]
        ]}),
    );
    let mut s = w.serve(ISOLATED);
    let r = started(&mut s, "one", "worker", &w.repo.join("src"));
    let id = r["details"]["thread"]["id"].as_str().unwrap().to_string();
    wait(&mut s, &id);
    let (path, branch, base, _) = w.row(&id).unwrap();
    // The child's cwd is the same relative directory inside its worktree.
    assert_eq!(
        r["details"]["thread"]["cwd"].as_str().unwrap(),
        format!("{path}/src")
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&path).join("src/notes.txt")).unwrap(),
        "one\n"
    );
    s.thread(json!({"action": "stop", "id": id}));
    assert!(
        Path::new(&path).join("src/notes.txt").exists(),
        "stop keeps it"
    );
    s.thread(json!({"action": "archive", "id": id}));
    let r = s.thread(json!({"action": "resume", "id": id}));
    s.expect_launched_idle(&r, &id);
    assert_eq!(
        r["details"]["snapshot"]["cwd"].as_str().unwrap(),
        format!("{path}/src"),
        "{r}"
    );
    s.thread(json!({"action": "send", "id": id, "message": "two"}));
    wait(&mut s, &id);
    assert_eq!(
        std::fs::read_to_string(Path::new(&path).join("src/new/two.txt")).unwrap(),
        "two\n"
    );
    assert!(Path::new(&path).join("src/new/one.txt").exists());
    assert_eq!(
        w.row(&id).unwrap(),
        (path.clone(), branch.clone(), base.clone(), None)
    );
    // The fork starts from the source's state: notes.txt changed, new/ untracked.
    let source_status = git(
        Path::new(&path),
        &["status", "--porcelain", "--untracked-files=all"],
    );
    let source_head = git(Path::new(&path), &["rev-parse", "HEAD"]);
    let f = s.thread(json!({"action": "fork", "id": id}));
    let fid = f["details"]["thread"]["id"].as_str().unwrap().to_string();
    s.expect_launched_idle(&f, &fid);
    let (fpath, fbranch, fbase, _) = w.row(&fid).expect("the fork's worktree row");
    assert_ne!(fpath, path);
    assert_ne!(fbranch, branch);
    assert_eq!(
        f["details"]["thread"]["cwd"].as_str().unwrap(),
        format!("{fpath}/src")
    );
    assert!(
        text(&f).contains(&format!("(branch {fbranch})")),
        "{}",
        text(&f)
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&fpath).join("src/notes.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&fpath).join("src/new/two.txt")).unwrap(),
        "two\n"
    );
    // Its branch starts at a commit of that state, whose parent is the source's HEAD.
    assert_eq!(git(Path::new(&fpath), &["rev-parse", "HEAD"]).trim(), fbase);
    assert_eq!(git(Path::new(&fpath), &["rev-parse", "HEAD^"]), source_head);
    assert_eq!(git(Path::new(&fpath), &["status", "--porcelain"]), "");
    // The source is untouched.
    assert_eq!(
        git(
            Path::new(&path),
            &["status", "--porcelain", "--untracked-files=all"]
        ),
        source_status
    );
    assert_eq!(git(Path::new(&path), &["rev-parse", "HEAD"]), source_head);
    // The fork's diff is its own changes (none yet); the source's has both files.
    assert_eq!(w.cli(&["diff", &fid]), "");
    let d = w.cli(&["diff", &id, "--stat"]);
    assert!(d.contains("3 files changed"), "{d}");
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}

/// A serve killed with SIGKILL mid-turn, then `restore`: the thread is closed as stale and its
/// worktree, its files and its row stay as they were; while it was busy, `merge` and `clean`
/// of it were refused.
#[test]
fn a_serve_killed_mid_turn_and_restore_keep_the_worktree_and_its_row() {
    let w = World::new(
        "wt_kill",
        json!({"turns": [
            [{"write": {"path": "notes.txt", "content": "{prompt}\n"}}, {"delay_ms": 60000}, {"text": "late"}]
        ]}),
    );
    let mut s = w.serve(ISOLATED);
    let r = started(&mut s, "busy", "long", &w.repo);
    let id = r["details"]["thread"]["id"].as_str().unwrap().to_string();
    let (path, branch, base, _) = w.row(&id).unwrap();
    common::poll(
        Duration::from_secs(20),
        Duration::from_millis(20),
        "the child writes notes.txt",
        || {
            std::fs::read_to_string(Path::new(&path).join("notes.txt"))
                .ok()
                .filter(|t| t == "busy\n")
        },
    );
    let p = s.thread(json!({"action": "poll", "id": id}));
    assert_eq!(p["details"]["snapshot"]["phase"], "busy", "{p}");
    let before = main_state(&w.repo);
    let e = w.cli_error(&["merge", &id]);
    assert!(e.contains("live and busy") && e.contains("Repair:"), "{e}");
    let e = w.cli_error(&["worktree", "clean", &id]);
    assert!(
        e.contains("the thread is live") && e.contains("Repair:"),
        "{e}"
    );
    let e = w.cli_error(&["worktree", "clean"]);
    assert!(e.contains("--merged") && e.contains("Repair:"), "{e}");
    assert_eq!(main_state(&w.repo), before);
    assert!(Path::new(&path).join("notes.txt").exists());
    s.child.kill().unwrap();
    s.child.wait().unwrap();
    w.cli(&["restore"]);
    common::poll(
        Duration::from_secs(20),
        Duration::from_millis(50),
        "restore ends the child",
        || w.base.leftovers().is_empty().then_some(()),
    );
    let v: Value = serde_json::from_str(&w.cli(&["show", &id, "--json"])).unwrap();
    assert_eq!(v["status"], "closed", "{v}");
    assert_eq!(w.row(&id).unwrap(), (path.clone(), branch, base, None));
    assert_eq!(
        std::fs::read_to_string(Path::new(&path).join("notes.txt")).unwrap(),
        "busy\n"
    );
    assert_eq!(main_state(&w.repo), before);
    // Closed now: its work can be reviewed and merged.
    assert!(w.cli(&["diff", &id]).contains("+busy"));
    assert!(w.cli(&["merge", &id, "--squash"]).contains("as one commit"));
    assert_eq!(
        std::fs::read_to_string(w.repo.join("notes.txt")).unwrap(),
        "busy\n"
    );
    assert_eq!(git(&w.repo, &["status", "--porcelain"]), "");
}

/// Each bad input is an error with `Repair:` and changes nothing: merge of a thread that is
/// not isolated, of an unknown reference, in a main tree with uncommitted changes to the same
/// file; isolation in a folder that is not a repository (the thread runs there, its start
/// result says why) and in a repository with no commit yet (refused before any row).
#[test]
fn bad_inputs_are_refused_with_a_repair_and_change_nothing() {
    let w = World::new("wt_bad", writer_script());
    // Not isolated: a serve without the setting.
    let mut plain = w.serve(&[]);
    let r = started(&mut plain, "plain", "plain", &w.repo);
    let pid = r["details"]["thread"]["id"].as_str().unwrap().to_string();
    wait(&mut plain, &pid);
    assert!(r["details"]["thread"].get("worktree").is_none(), "{r}");
    assert!(!text(&r).contains("Worktree:"), "{}", text(&r));
    plain.close(Duration::from_secs(10));
    // The plain child wrote into the main tree itself: put it back.
    git(&w.repo, &["checkout", "--", "notes.txt"]);
    let e = w.cli_error(&["merge", &pid]);
    assert!(e.contains("not isolated") && e.contains("Repair:"), "{e}");
    let e = w.cli_error(&["diff", &pid]);
    assert!(e.contains("not isolated") && e.contains("Repair:"), "{e}");
    let e = w.cli_error(&["merge", "no_such_thread"]);
    assert!(e.contains("Repair:"), "{e}");

    let mut s = w.serve(ISOLATED);
    let r = started(&mut s, "mine", "edit", &w.repo);
    let id = r["details"]["thread"]["id"].as_str().unwrap().to_string();
    wait(&mut s, &id);
    s.thread(json!({"action": "stop", "id": id}));
    let (path, branch, _, _) = w.row(&id).unwrap();
    // The main tree has its own uncommitted change to notes.txt.
    std::fs::write(w.repo.join("notes.txt"), "mine too\n").unwrap();
    let before = main_state(&w.repo);
    let tip = git(&w.repo, &["rev-parse", &branch]);
    let wt_status = git(Path::new(&path), &["status", "--porcelain"]);
    let e = w.cli_error(&["merge", &id]);
    assert!(
        e.contains("uncommitted changes") && e.contains("notes.txt") && e.contains("Repair:"),
        "{e}"
    );
    assert_eq!(main_state(&w.repo), before);
    assert_eq!(
        git(&w.repo, &["rev-parse", &branch]),
        tip,
        "no commit on the branch"
    );
    assert_eq!(git(Path::new(&path), &["status", "--porcelain"]), wt_status);
    // An unrelated uncommitted change does not stop the merge.
    git(&w.repo, &["checkout", "--", "notes.txt"]);
    std::fs::write(w.repo.join("src/lib.txt"), "lib, edited\n").unwrap();
    assert!(w.cli(&["merge", &id]).contains("Merged"));
    assert_eq!(
        std::fs::read_to_string(w.repo.join("src/lib.txt")).unwrap(),
        "lib, edited\n"
    );

    // Not a repository: the thread runs there, and the start result says why.
    let plain_dir = w.base.root.join("plain");
    std::fs::create_dir_all(&plain_dir).unwrap();
    let r = started(&mut s, "free", "free", &plain_dir);
    let t = text(&r);
    assert!(
        t.contains("Note: not isolated:")
            && t.contains("not inside a git work tree")
            && t.contains("Repair:"),
        "{t}"
    );
    assert!(r["details"]["note"]
        .as_str()
        .unwrap()
        .contains("not isolated"));
    assert!(r["details"]["thread"].get("worktree").is_none(), "{r}");
    assert_eq!(
        r["details"]["thread"]["cwd"].as_str().unwrap(),
        plain_dir.display().to_string()
    );

    // A repository without a commit: refused before anything is reserved.
    let empty = w.base.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    git(&empty, &["init", "--quiet"]);
    let threads = common::count(&w.base.db, "SELECT count(*) FROM threads");
    let req = start(&mut s, "nothing", "nothing", &empty);
    let e = s.response(req, Duration::from_secs(30));
    let message = e["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("no commit yet") && message.contains("Repair:"),
        "{e}"
    );
    assert_eq!(
        common::count(&w.base.db, "SELECT count(*) FROM threads"),
        threads
    );
    assert!(!empty.join(".threadbase").exists());
    s.close(Duration::from_secs(10));
    assert!(w.base.leftovers().is_empty());
}

/// `check` reports a worktree row whose folder is gone and a folder under
/// `.threadbase/worktrees/` that no row owns, each with its repair; `worktree clean` of the
/// row then forgets it.
#[test]
fn check_reports_a_missing_worktree_and_an_orphan_folder() {
    let w = World::new("wt_check", writer_script());
    let mut s = w.serve(ISOLATED);
    let r = started(&mut s, "gone", "gone", &w.repo);
    let id = r["details"]["thread"]["id"].as_str().unwrap().to_string();
    wait(&mut s, &id);
    s.thread(json!({"action": "stop", "id": id}));
    s.close(Duration::from_secs(10));
    let checked = |w: &World| -> Vec<Value> {
        let out = common::threadbase(&w.base.db, &["check", "--json"]);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "check --json: {e}: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["check"].as_str().unwrap().starts_with("worktree_"))
            .cloned()
            .collect()
    };
    assert_eq!(checked(&w), Vec::<Value>::new());
    let (path, branch, _, _) = w.row(&id).unwrap();
    std::fs::remove_dir_all(&path).unwrap();
    let stray = w.repo.join(".threadbase/worktrees/stray");
    std::fs::create_dir_all(&stray).unwrap();
    let problems = checked(&w);
    assert_eq!(problems.len(), 2, "{problems:?}");
    let gone = problems
        .iter()
        .find(|p| p["check"] == "worktree_folder_gone")
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert!(gone["message"].as_str().unwrap().contains(&path), "{gone}");
    assert!(
        gone["repair"]
            .as_str()
            .unwrap()
            .contains(&format!("threadbase worktree clean {id}")),
        "{gone}"
    );
    let orphan = problems
        .iter()
        .find(|p| p["check"] == "worktree_orphan_folder")
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert!(
        orphan["message"].as_str().unwrap().contains("stray")
            && orphan["repair"]
                .as_str()
                .unwrap()
                .contains("worktree remove"),
        "{orphan}"
    );
    // The repair: clean forgets the row and deletes the branch.
    let e = w.cli_error(&["diff", &id]);
    assert!(e.contains("is gone") && e.contains("Repair:"), "{e}");
    assert!(w.cli(&["worktree", "clean", &id]).contains("removed: "));
    assert!(w.row(&id).unwrap().3.is_some());
    assert_eq!(git(&w.repo, &["branch", "--list", &branch]), "");
    std::fs::remove_dir(&stray).unwrap();
    assert_eq!(checked(&w), Vec::<Value>::new());
}

/// Contract B: an agent type with `"isolation": "worktree"` puts its children in worktrees of
/// their own (a type without it does not); contract C: `threads_spawn` with
/// `THREADBASE_ISOLATION=worktree` does, and a retried spawn keeps the worker's one worktree.
#[test]
fn agent_types_and_workers_get_worktrees_of_their_own() {
    let base = Scripted::new("wt_bc");
    base.script("script", &writer_script().to_string());
    // The serve's own directory is the repository.
    git(&base.root, &["init", "--quiet", "-b", "main"]);
    std::fs::write(base.root.join("notes.txt"), "base\n").unwrap();
    git(&base.root, &["add", "notes.txt"]);
    git(&base.root, &["commit", "--quiet", "-m", "init"]);
    let header = json!({"type":"session","version":3,"id":"ses_wt_bc","timestamp":"2026-12-06T00:00:00.000Z","cwd":base.root});
    let session = base.session_file("sessions/main.jsonl", &[header]);
    std::fs::create_dir_all(base.root.join("agent")).unwrap();
    std::fs::write(
        base.root.join("agent/threadbase-agents.json"),
        json!({"agentTypes": {"coder": {"isolation": "worktree"}, "plain": {}}}).to_string(),
    )
    .unwrap();
    let worktrees = |base: &Scripted| -> Vec<(String, String, String)> {
        crate::support::sql::values(
            &base.db,
            "SELECT t.path, t.cwd, w.branch FROM thread_worktrees w JOIN threads t ON t.id = w.thread_id ORDER BY t.path",
        )
        .into_iter()
        .map(|r| {
            let s: Vec<String> = r
                .into_iter()
                .map(|c| crate::support::sql::json(c).as_str().unwrap_or_default().to_string())
                .collect();
            (s[0].clone(), s[1].clone(), s[2].clone())
        })
        .collect()
    };
    let mut s = base.serve(
        "script",
        vec!["--session-file".into(), session.display().to_string()],
        &[],
    );
    let call = |s: &mut Serve, method: &str, params: Value| -> Value {
        let id = s.send(method, params);
        let r = s.response(id, Duration::from_secs(60));
        assert!(r.get("error").is_none(), "{r}");
        r["result"].clone()
    };
    call(
        &mut s,
        "agent_spawn",
        json!({"path": "c1", "type": "coder", "task": "bee"}),
    );
    call(
        &mut s,
        "agent_spawn",
        json!({"path": "p1", "type": "plain", "task": "plain"}),
    );
    let rows = worktrees(&base);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (path, cwd, branch) = &rows[0];
    assert_eq!(path, "/root/c1");
    assert!(branch.starts_with("threadbase/c1-"), "{branch}");
    assert_eq!(
        std::fs::read_to_string(Path::new(cwd).join("notes.txt")).unwrap(),
        "bee\n"
    );
    // The plain child wrote into the main tree (no isolation); put it back.
    assert_eq!(
        std::fs::read_to_string(base.root.join("notes.txt")).unwrap(),
        "plain\n"
    );
    git(&base.root, &["checkout", "--", "notes.txt"]);
    s.close(Duration::from_secs(10));

    // Contract C, with the setting on.
    let mut s = base.serve(
        "script",
        vec!["--session-file".into(), session.display().to_string()],
        ISOLATED,
    );
    let params = json!({"key": "w1", "title": "W", "directory": base.root, "task": "sea"});
    let v = call(&mut s, "threads_spawn", params.clone());
    let rows = worktrees(&base);
    assert_eq!(rows.len(), 2, "{rows:?}");
    let (_, wcwd, wbranch) = rows
        .iter()
        .find(|r| r.2.starts_with("threadbase/w1-"))
        .unwrap()
        .clone();
    assert_eq!(
        v["details"]["directory"].as_str(),
        Some(wcwd.as_str()),
        "{v}"
    );
    common::poll(
        Duration::from_secs(30),
        Duration::from_millis(50),
        "the worker writes notes.txt in its worktree",
        || {
            std::fs::read_to_string(Path::new(&wcwd).join("notes.txt"))
                .ok()
                .filter(|t| t.contains("sea"))
        },
    );
    call(&mut s, "threads_spawn", params);
    assert_eq!(
        worktrees(&base).len(),
        2,
        "a retried spawn keeps its one worktree"
    );
    assert_eq!(
        std::fs::read_to_string(base.root.join("notes.txt")).unwrap(),
        "base\n"
    );
    assert!(w_diff(&base, &wbranch).contains("sea"));
    s.close(Duration::from_secs(10));
    assert!(base.leftovers().is_empty());
}

/// `threadbase diff` of the thread whose branch is `branch`.
fn w_diff(base: &Scripted, branch: &str) -> String {
    let v = crate::support::sql::values(
        &base.db,
        &format!("SELECT thread_id FROM thread_worktrees WHERE branch = '{branch}'"),
    );
    let id = crate::support::sql::json(v[0][0].clone());
    let out = common::threadbase(&base.db, &["diff", id.as_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Contracts B and C outside a git work tree with isolation asked for: the thread runs in its
/// directory as without the setting, and its spawn result says why (`isolationNote`, present
/// only then).
#[test]
fn agent_and_worker_spawns_outside_a_repository_say_why_they_are_not_isolated() {
    let base = Scripted::new("wt_bc_plain");
    base.script("script", &writer_script().to_string());
    let header = json!({"type":"session","version":3,"id":"ses_wt_bc_plain","timestamp":"2026-12-06T00:00:00.000Z","cwd":base.root});
    let session = base.session_file("sessions/main.jsonl", &[header]);
    let call = |s: &mut Serve, method: &str, params: Value| -> Value {
        let id = s.send(method, params);
        let r = s.response(id, Duration::from_secs(60));
        assert!(r.get("error").is_none(), "{r}");
        r["result"].clone()
    };
    let mut s = base.serve(
        "script",
        vec!["--session-file".into(), session.display().to_string()],
        ISOLATED,
    );
    let b = call(
        &mut s,
        "agent_spawn",
        json!({"path": "a1", "type": "general", "task": "bee"}),
    );
    let note = b["details"]["isolationNote"].as_str().unwrap_or_default();
    assert!(
        note.contains("not isolated") && note.contains("Repair:"),
        "{b}"
    );
    let c = call(
        &mut s,
        "threads_spawn",
        json!({"key": "w1", "title": "W", "directory": base.root, "task": "sea"}),
    );
    let note = c["details"]["isolationNote"].as_str().unwrap_or_default();
    assert!(
        note.contains("not isolated") && note.contains("Repair:"),
        "{c}"
    );
    assert_eq!(
        c["details"]["directory"].as_str(),
        Some(base.root.display().to_string().as_str())
    );
    assert_eq!(
        common::count(&base.db, "SELECT count(*) FROM thread_worktrees"),
        0
    );
    s.close(Duration::from_secs(10));
    // Without the setting, no note.
    let mut s = base.serve(
        "script",
        vec!["--session-file".into(), session.display().to_string()],
        &[],
    );
    let b = call(
        &mut s,
        "agent_spawn",
        json!({"path": "a2", "type": "general", "task": "bee"}),
    );
    assert!(b["details"].get("isolationNote").is_none(), "{b}");
    s.close(Duration::from_secs(10));
}

/// A trusted session's children run with `--approve` when their cwd lies inside its cwd, and
/// an isolated child's worktree stands for the same place in its project however the child
/// is launched: started, launched by the queue, resumed. The session's cwd is a folder of
/// the repository (`src`), so the worktrees themselves lie outside it.
#[test]
fn an_isolated_child_is_approved_as_in_its_project_when_started_queued_or_resumed() {
    let w = World::new("wt_approve", writer_script());
    let sub = w.repo.join("src");
    let mut s = Serve::start(ServeSpec {
        db: &w.base.db,
        args: vec![
            "--cwd".into(),
            sub.display().to_string(),
            "--session-id".into(),
            "ses_approve".into(),
            "--trusted".into(),
        ],
        env: [
            (
                "THREADBASE_PI_COMMAND",
                scripted_command(&w.base.root.join("script.json")),
            ),
            ("THREADBASE_ISOLATION", "worktree".into()),
            ("THREADBASE_QUEUE", "1".into()),
            ("PI_THREADS_MAX_THREADS", "1".into()),
            (
                "PI_CODING_AGENT_DIR",
                w.base.root.join("agent").display().to_string(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
        cwd: sub.clone(),
        clear_env: false,
    });
    // The approval flag of the live child at `path` whose pid is not `before`, and its pid.
    let flag_of = |path: &str, before: Option<i64>| -> (String, i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let v: Value = serde_json::from_str(&w.cli(&[
                "sql",
                "--json",
                &format!("SELECT pid FROM threads WHERE path = '{path}' AND status = 'live' AND pid IS NOT NULL"),
            ]))
            .unwrap();
            let pid = v
                .as_array()
                .unwrap()
                .first()
                .and_then(|r| r["pid"].as_i64());
            if let Some(pid) = pid.filter(|p| Some(*p) != before) {
                let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let argv = String::from_utf8_lossy(&argv).into_owned();
                let flag = argv
                    .split('\0')
                    .find(|a| a.ends_with("approve"))
                    .unwrap_or_else(|| panic!("no approval flag in {argv:?}"));
                return (flag.to_string(), pid);
            }
            assert!(std::time::Instant::now() < deadline, "{path} never ran");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let first = started(&mut s, "one", "first", &sub);
    assert_eq!(
        first["details"]["thread"]["cwd"]
            .as_str()
            .map(|c| c.ends_with("/src")),
        Some(true),
        "{first}"
    );
    assert_eq!(flag_of("/root/first", None).0, "--approve", "started");
    let second = started(&mut s, "two", "second", &sub);
    assert!(text(&second).contains("queued"), "{}", text(&second));
    s.thread(json!({"action": "stop", "id": "first"}));
    let (flag, pid) = flag_of("/root/second", None);
    assert_eq!(flag, "--approve", "launched by the queue");
    wait(&mut s, "second");
    s.thread(json!({"action": "stop", "id": "second"}));
    s.thread(json!({"action": "resume", "id": "second"}));
    assert_eq!(flag_of("/root/second", Some(pid)).0, "--approve", "resumed");
    s.close(Duration::from_secs(20));
}
