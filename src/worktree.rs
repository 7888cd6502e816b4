//! Git worktrees of isolated threads (issue 48): every git run threadbase makes, through the
//! `git` command line (`std::process::Command`), and nothing else. It knows no table: the
//! rows (`thread_worktrees`) are `store::worktrees`', and the engine and the CLI put the two
//! together. Like the ground modules, it imports nothing of the crate but the error type.
//!
//! - [`probe`]: whether a directory is inside a git work tree, which repository, the
//!   directory's place in it and the commit a branch would start from;
//! - [`plan`] / [`create`]: a thread's worktree `<repo>/.threadbase/worktrees/<name>` on branch
//!   `threadbase/<name>`, with `.threadbase/` in the repository's `info/exclude`;
//! - [`snapshot`]: a commit of a worktree's current state, uncommitted and untracked files
//!   included, made with a temporary index so the worktree itself is not touched (a fork
//!   starts from it; `diff` compares it);
//! - [`stat`], [`diff`], [`merge`], [`is_merged`], [`remove`].

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::error::{Error, ErrorCode, Result};

/// Where the worktrees of a repository go, relative to its main work tree.
pub const WORKTREES_DIR: &str = ".threadbase/worktrees";
/// The line `.git/info/exclude` gets, so the main tree's `git status` never shows them.
const EXCLUDE_LINE: &str = "/.threadbase/";
/// The prefix of every branch threadbase makes.
pub const BRANCH_PREFIX: &str = "threadbase/";

fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.arg("-C").arg(dir);
    // Never a pager, never a prompt, never a translated message.
    c.env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_PAGER", "cat")
        .env("LC_ALL", "C");
    c
}

fn run(mut c: Command) -> Result<Output> {
    c.output().map_err(|e| {
        Error::io(format!(
            "Cannot run git: {e}. Repair: install git (and put it on PATH), or unset THREADBASE_ISOLATION."
        ))
    })
}

/// Runs `c`; its stdout when it exits 0, else an error quoting git's own words.
fn ok(c: Command, what: &str, repair: &str) -> Result<String> {
    let out = run(c)?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    Err(Error::io(format!(
        "git could not {what}: {}. Repair: {repair}",
        String::from_utf8_lossy(&out.stderr).trim()
    )))
}

fn line(s: String) -> String {
    s.trim_end_matches(['\n', '\r']).to_string()
}

/// A directory inside a git work tree.
#[derive(Debug, Clone, PartialEq)]
pub struct Repo {
    /// The main work tree's root (every worktree of the repository goes under it).
    pub root: PathBuf,
    /// The root of the work tree the directory is in (the main one, or a worktree).
    pub top: PathBuf,
    /// The directory, relative to `top`.
    pub rel: PathBuf,
    /// The commit `HEAD` names there: what a new branch starts from.
    pub head: String,
}

/// What [`probe`] finds.
#[derive(Debug, Clone, PartialEq)]
pub enum Probe {
    Repo(Repo),
    /// Not inside a git work tree: why, in a sentence (the thread runs as without isolation).
    NotRepo(String),
}

/// Whether `cwd` is inside a git work tree, and where. A repository whose `HEAD` names no
/// commit yet is an error: a branch needs a commit to start from.
pub fn probe(cwd: &Path) -> Result<Probe> {
    let mut c = git(cwd);
    c.args(["rev-parse", "--show-toplevel"]);
    let out = run(c)?;
    if !out.status.success() {
        return Ok(Probe::NotRepo(format!(
            "{} is not inside a git work tree",
            cwd.display()
        )));
    }
    let top = PathBuf::from(line(String::from_utf8_lossy(&out.stdout).into_owned()));
    let mut c = git(cwd);
    c.args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]);
    let out = run(c)?;
    if !out.status.success() {
        return Err(Error::invalid(format!(
            "Cannot isolate a thread in {}: the repository has no commit yet, so there is nothing to branch from. Repair: make a first commit (git -C {} commit --allow-empty -m init), or unset THREADBASE_ISOLATION for this serve.",
            top.display(),
            top.display()
        )));
    }
    let head = line(String::from_utf8_lossy(&out.stdout).into_owned());
    let root = main_root(cwd)?.unwrap_or_else(|| top.clone());
    let canon = |p: &Path| dunce_like(p);
    let rel = canon(cwd)
        .strip_prefix(canon(&top))
        .map(Path::to_path_buf)
        .unwrap_or_default();
    Ok(Probe::Repo(Repo {
        root,
        top,
        rel,
        head,
    }))
}

fn dunce_like(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The main work tree of the repository `dir` is in: the first entry of `git worktree list`.
fn main_root(dir: &Path) -> Result<Option<PathBuf>> {
    let mut c = git(dir);
    c.args(["worktree", "list", "--porcelain"]);
    let out = run(c)?;
    if !out.status.success() {
        return Ok(None);
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("worktree ").map(PathBuf::from)))
}

/// A worktree to make: its folder, branch and base, and the child's cwd inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub repo: PathBuf,
    pub path: PathBuf,
    pub branch: String,
    pub base: String,
    pub cwd: PathBuf,
}

/// `task` as a piece of a folder and branch name: ASCII letters, digits, `_` and `-` kept,
/// anything else `_`, at most 40 characters, never starting with `-`.
pub fn name_part(task: &str) -> String {
    let mut s: String = task
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .take(40)
        .collect();
    if s.is_empty() || s.starts_with(['.', '-']) {
        s.insert(0, 't');
    }
    s
}

/// The worktree of a new thread named `task` (with `short`, a piece of its id) in `repo`,
/// starting from `base`, its cwd at `rel` inside it.
pub fn plan(root: &Path, rel: &Path, base: &str, task: &str, short: &str) -> Plan {
    let name = format!("{}-{short}", name_part(task));
    let path = root.join(WORKTREES_DIR).join(&name);
    Plan {
        repo: root.to_path_buf(),
        cwd: if rel.as_os_str().is_empty() {
            path.clone()
        } else {
            path.join(rel)
        },
        path,
        branch: format!("{BRANCH_PREFIX}{name}"),
        base: base.to_string(),
    }
}

/// The directory of the project a worktree's `cwd` stands for: `<root>/<rel>` for a cwd
/// `<root>/.threadbase/worktrees/<name>/<rel>` ([`plan`]); any other directory is itself. A
/// thread's approval is judged by it, so an isolated thread is approved as it would be in
/// its project, however it is launched (a start, the queue, a resume).
pub fn project_dir(cwd: &Path) -> PathBuf {
    let parts: Vec<_> = cwd.components().collect();
    let inside: Vec<_> = Path::new(WORKTREES_DIR).components().collect();
    let at = parts
        .windows(inside.len() + 1)
        .rposition(|w| w[..inside.len()] == inside[..]);
    match at {
        Some(i) => parts[..i]
            .iter()
            .chain(&parts[i + inside.len() + 1..])
            .collect(),
        None => cwd.to_path_buf(),
    }
}

/// Makes `plan`'s worktree: `.threadbase/` excluded in the repository, the folder and its
/// branch from the base commit, and the cwd inside it (created if the base lacks it).
pub fn create(plan: &Plan) -> Result<()> {
    let common = common_dir(&plan.repo)?;
    // Two `git worktree add` at once in one repository trip over each other's half-made
    // entries: one at a time, across processes (the exclude line too).
    let _lock = lock(&common)?;
    exclude(&common)?;
    let mut c = git(&plan.repo);
    c.args(["worktree", "add", "--quiet", "-b", &plan.branch])
        .arg(&plan.path)
        .arg(&plan.base);
    ok(
        c,
        &format!("add the worktree {}", plan.path.display()),
        "remove what is in the way (git worktree prune; git branch -D of a leftover threadbase/ branch), then start the thread again.",
    )?;
    std::fs::create_dir_all(&plan.cwd).map_err(|e| {
        Error::io(format!(
            "Cannot create the child's directory {} in its worktree: {e}. Repair: check the permissions of {}.",
            plan.cwd.display(),
            plan.path.display()
        ))
    })
}

/// The repository's git folder (shared by its worktrees).
fn common_dir(repo: &Path) -> Result<PathBuf> {
    let mut c = git(repo);
    c.args(["rev-parse", "--path-format=absolute", "--git-common-dir"]);
    Ok(PathBuf::from(line(ok(
        c,
        "find the repository's git folder",
        "check that the repository is readable.",
    )?)))
}

/// An exclusive lock on `<git folder>/threadbase.lock`, held until dropped: every change
/// threadbase makes to a repository's list of worktrees takes it.
fn lock(common: &Path) -> Result<std::fs::File> {
    let path = common.join("threadbase.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .and_then(|f| {
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(f)
        });
    file.map_err(|e| {
        Error::io(format!(
            "Cannot lock {}: {e}. Repair: check the permissions of the repository's git folder.",
            path.display()
        ))
    })
}

/// Adds `/.threadbase/` to the repository's `info/exclude` once.
fn exclude(common: &Path) -> Result<()> {
    let file = common.join("info").join("exclude");
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    if text.lines().any(|l| l.trim() == EXCLUDE_LINE) {
        return Ok(());
    }
    let io = |e: std::io::Error| {
        Error::io(format!(
            "Cannot add {EXCLUDE_LINE} to {}: {e}. Repair: make the file writable.",
            file.display()
        ))
    };
    std::fs::create_dir_all(common.join("info")).map_err(io)?;
    let mut new = text;
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    new.push_str(EXCLUDE_LINE);
    new.push('\n');
    std::fs::write(&file, new).map_err(io)
}

/// Git's committer identity for threadbase's own commits when the repository has none.
fn identity(c: &mut Command, dir: &Path) {
    let mut probe = git(dir);
    probe.args(["config", "user.email"]);
    let known = run(probe).map(|o| o.status.success()).unwrap_or(false);
    if !known {
        c.env("GIT_AUTHOR_NAME", "threadbase")
            .env("GIT_AUTHOR_EMAIL", "threadbase@localhost")
            .env("GIT_COMMITTER_NAME", "threadbase")
            .env("GIT_COMMITTER_EMAIL", "threadbase@localhost");
    }
}

/// Tells this process's temporary indexes apart.
static TEMP_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A temporary index in the temporary folder, removed when dropped.
struct TempIndex(PathBuf);

impl Drop for TempIndex {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The tree of `worktree`'s current state (tracked changes and untracked files, ignored
/// files left out), written with a copy of its index: the worktree, its index and its
/// branch stay as they are.
fn state_tree(worktree: &Path) -> Result<String> {
    let repair = "check that the worktree folder exists and is readable (threadbase check).";
    let mut c = git(worktree);
    c.args(["rev-parse", "--path-format=absolute", "--git-path", "index"]);
    let index = PathBuf::from(line(ok(c, "find the worktree's index", repair)?));
    let temp = TempIndex(std::env::temp_dir().join(format!(
        "threadbase-index-{}-{}",
        std::process::id(),
        TEMP_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )));
    if index.exists() {
        // The copy keeps the index's own mtime: git trusts an entry's cached stat only when
        // the file is older than the index, so a file rewritten in the index's second with
        // the same size is still read again (git's "racy" check).
        let copied = std::fs::copy(&index, &temp.0).and_then(|_| {
            let modified = std::fs::metadata(&index)?.modified()?;
            std::fs::File::options()
                .write(true)
                .open(&temp.0)?
                .set_modified(modified)
        });
        copied.map_err(|e| {
            Error::io(format!(
                "Cannot copy the worktree's index {}: {e}. Repair: {repair}",
                index.display()
            ))
        })?;
    } else {
        let mut c = git(worktree);
        c.env("GIT_INDEX_FILE", &temp.0).args(["read-tree", "HEAD"]);
        ok(c, "read the worktree's HEAD", repair)?;
    }
    let mut c = git(worktree);
    c.env("GIT_INDEX_FILE", &temp.0).args(["add", "-A", "."]);
    ok(c, "read the worktree's files", repair)?;
    let mut c = git(worktree);
    c.env("GIT_INDEX_FILE", &temp.0).arg("write-tree");
    Ok(line(ok(c, "write the worktree's state", repair)?))
}

fn head_of(dir: &Path) -> Result<String> {
    let mut c = git(dir);
    c.args(["rev-parse", "--verify", "HEAD^{commit}"]);
    Ok(line(ok(
        c,
        "read HEAD",
        "check that the worktree folder exists (threadbase check).",
    )?))
}

fn tree_of(dir: &Path, rev: &str) -> Result<String> {
    let mut c = git(dir);
    c.args(["rev-parse", "--verify", &format!("{rev}^{{tree}}")]);
    Ok(line(ok(
        c,
        &format!("read the tree of {rev}"),
        "check the repository (git fsck).",
    )?))
}

/// A commit of `worktree`'s current state, uncommitted and untracked files included, whose
/// parent is its `HEAD` (its `HEAD` itself when nothing is uncommitted). No branch moves and
/// the worktree is untouched: the commit is reachable only from what is made from it.
pub fn snapshot(worktree: &Path, message: &str) -> Result<String> {
    let head = head_of(worktree)?;
    let tree = state_tree(worktree)?;
    if tree == tree_of(worktree, &head)? {
        return Ok(head);
    }
    let mut c = git(worktree);
    identity(&mut c, worktree);
    c.args(["commit-tree", &tree, "-p", &head, "-m", message]);
    Ok(line(ok(
        c,
        "record the worktree's state",
        "check that the repository is writable.",
    )?))
}

/// What a thread changed since its base: files, lines added, lines removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stat {
    pub files: u64,
    pub insertions: u64,
    pub deletions: u64,
}

/// [`Stat`] of `worktree` (its current state, uncommitted and untracked included) against
/// `base`.
pub fn stat(worktree: &Path, base: &str) -> Result<Stat> {
    let tree = state_tree(worktree)?;
    let mut c = git(worktree);
    c.args(["diff", "--numstat", "--no-renames", base, &tree]);
    let text = ok(
        c,
        "compare the worktree with its base",
        "check that the base commit still exists (git cat-file -t BASE).",
    )?;
    let mut s = Stat::default();
    for l in text.lines() {
        let mut parts = l.split('\t');
        let (Some(a), Some(d)) = (parts.next(), parts.next()) else {
            continue;
        };
        s.files += 1;
        s.insertions += a.parse::<u64>().unwrap_or(0);
        s.deletions += d.parse::<u64>().unwrap_or(0);
    }
    Ok(s)
}

/// The diff of `worktree`'s current state against `base` (`--stat` when `stat_only`).
pub fn diff(worktree: &Path, base: &str, stat_only: bool) -> Result<String> {
    let tree = state_tree(worktree)?;
    let mut c = git(worktree);
    c.args(["diff", "--no-color", "--no-ext-diff"]);
    if stat_only {
        c.arg("--stat");
    }
    c.args([base, &tree]);
    ok(
        c,
        "compare the worktree with its base",
        "check that the base commit still exists (git cat-file -t BASE).",
    )
}

/// The paths a tree-ish pair differs in.
fn changed_paths(dir: &Path, from: &str, to: &str) -> Result<Vec<String>> {
    let mut c = git(dir);
    c.args(["diff", "--name-only", "--no-renames", "-z", from, to]);
    Ok(ok(
        c,
        "list the changed files",
        "check the repository (git fsck).",
    )?
    .split('\0')
    .filter(|s| !s.is_empty())
    .map(str::to_string)
    .collect())
}

/// The paths `git status` shows as changed in the work tree `dir` (staged, unstaged or
/// untracked; renames by both names).
pub fn dirty_paths(dir: &Path) -> Result<Vec<String>> {
    let mut c = git(dir);
    c.args(["status", "--porcelain", "-z", "--untracked-files=all"]);
    let text = ok(
        c,
        "read the work tree's status",
        "check that the folder exists and is a git work tree.",
    )?;
    let mut out = Vec::new();
    let mut fields = text.split('\0').filter(|s| !s.is_empty());
    while let Some(f) = fields.next() {
        if f.len() < 4 {
            continue;
        }
        out.push(f[3..].to_string());
        // A rename or copy names its source in the next field.
        if matches!(f.as_bytes()[0], b'R' | b'C') {
            if let Some(src) = fields.next() {
                out.push(src.to_string());
            }
        }
    }
    Ok(out)
}

/// How `merge` is to bring a thread's branch in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergeMode {
    /// A merge commit (`git merge --no-ff`).
    Merge,
    /// One commit with the branch's changes (`git merge --squash`, then a commit).
    Squash,
}

/// A thread's worktree as `merge` needs it.
#[derive(Debug, Clone)]
pub struct MergeRequest<'a> {
    pub repo: &'a Path,
    pub worktree: &'a Path,
    pub branch: &'a str,
    pub base: &'a str,
    /// Names the thread in the commit messages (`<path> (<id>)`).
    pub thread: &'a str,
    pub mode: MergeMode,
}

/// What `merge` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The commit made on the thread's branch from its uncommitted work, if any.
    pub committed: Option<String>,
    /// The main tree's new `HEAD`; `None` when there was nothing to bring in.
    pub head: Option<String>,
    /// The files brought in.
    pub files: Vec<String>,
}

fn refuse(message: String) -> Error {
    Error::conflict(message)
}

/// Brings a thread's changes into the main work tree's current branch. Every refusal is
/// decided before anything changes: the main tree's uncommitted changes to files the thread
/// changed, and a conflict (found with `git merge-tree` on a snapshot of the thread's
/// state, which writes no ref). Then the thread's uncommitted work is committed on its branch
/// and the branch merged; should git still fail, the merge is aborted.
pub fn merge(req: &MergeRequest<'_>) -> Result<Merged> {
    let repo = req.repo;
    let state = snapshot(req.worktree, &commit_message(req))?;
    let files = changed_paths(repo, req.base, &state)?;
    let dirty = dirty_paths(repo)?;
    let both: Vec<&String> = files.iter().filter(|f| dirty.contains(f)).collect();
    if !both.is_empty() {
        return Err(refuse(format!(
            "Cannot merge {}: the main work tree {} has uncommitted changes to files the thread changed: {}. Nothing was changed. Repair: commit or stash those changes in {} (git -C {} stash), then merge again.",
            req.thread,
            repo.display(),
            list(&both),
            repo.display(),
            repo.display()
        )));
    }
    let main_head = head_of(repo)?;
    let mut c = git(repo);
    c.args([
        "merge-tree",
        "--write-tree",
        "--name-only",
        "--no-messages",
        &main_head,
        &state,
    ]);
    let out = run(c)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match out.status.code() {
        Some(0) => {}
        Some(1) => {
            let conflicted: Vec<String> = text.lines().skip(1).map(str::to_string).collect();
            return Err(refuse(format!(
                "Cannot merge {}: its changes conflict with the main work tree's {} in {}. The merge was not made; the main tree is as it was. Repair: resolve it by hand (git -C {} merge {}, fix the files, commit), or send the thread a message to rebase its branch onto {}, then merge again.",
                req.thread,
                branch_name(repo),
                list(&conflicted.iter().collect::<Vec<_>>()),
                repo.display(),
                req.branch,
                branch_name(repo)
            )));
        }
        _ => {
            return Err(Error::io(format!(
                "git could not check {} for conflicts: {}. Repair: check the repository (git -C {} status).",
                req.branch,
                String::from_utf8_lossy(&out.stderr).trim(),
                repo.display()
            )))
        }
    }
    let merged_tree = text.lines().next().unwrap_or_default().to_string();
    if merged_tree == tree_of(repo, &main_head)? && is_ancestor(repo, &state, &main_head)? {
        return Ok(Merged {
            committed: None,
            head: None,
            files: Vec::new(),
        });
    }
    // The thread's uncommitted work becomes a commit on its branch.
    let committed = if state != head_of(req.worktree)? {
        let mut c = git(req.worktree);
        c.args(["add", "-A", "."]);
        ok(
            c,
            "stage the thread's work",
            "check the worktree (git status).",
        )?;
        let mut c = git(req.worktree);
        identity(&mut c, req.worktree);
        c.args([
            "commit",
            "--quiet",
            "--no-verify",
            "-m",
            &commit_message(req),
        ]);
        ok(
            c,
            "commit the thread's work on its branch",
            "check the worktree (git status).",
        )?;
        Some(head_of(req.worktree)?)
    } else {
        None
    };
    let message = format!("threadbase: merge {} ({})", req.branch, req.thread);
    let mut c = git(repo);
    identity(&mut c, repo);
    match req.mode {
        MergeMode::Merge => {
            c.args(["merge", "--no-ff", "--no-edit", "-m", &message, req.branch]);
        }
        MergeMode::Squash => {
            c.args(["merge", "--squash", req.branch]);
        }
    }
    let out = run(c)?;
    if !out.status.success() {
        let mut abort = git(repo);
        abort.args(["merge", "--abort"]);
        let _ = run(abort);
        let mut reset = git(repo);
        reset.args(["reset", "--merge"]);
        let _ = run(reset);
        return Err(refuse(format!(
            "Cannot merge {}: git stopped: {}. The merge was aborted; the main tree is as it was. Repair: resolve it by hand (git -C {} merge {}), then commit.",
            req.thread,
            String::from_utf8_lossy(&out.stdout).trim(),
            repo.display(),
            req.branch
        )));
    }
    if req.mode == MergeMode::Squash {
        let mut c = git(repo);
        identity(&mut c, repo);
        c.args(["commit", "--quiet", "--no-verify", "-m", &message]);
        if let Err(e) = ok(c, "commit the squashed changes", "check git status.") {
            let mut reset = git(repo);
            reset.args(["reset", "--merge"]);
            let _ = run(reset);
            return Err(e);
        }
    }
    Ok(Merged {
        committed,
        head: Some(head_of(repo)?),
        files,
    })
}

fn commit_message(req: &MergeRequest<'_>) -> String {
    format!(
        "threadbase: uncommitted work of {} on {}",
        req.thread, req.branch
    )
}

fn list(items: &[&String]) -> String {
    const SHOWN: usize = 10;
    let mut s = items
        .iter()
        .take(SHOWN)
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > SHOWN {
        s.push_str(&format!(" and {} more", items.len() - SHOWN));
    }
    s
}

/// The main tree's current branch, or `HEAD` when detached.
pub fn branch_name(repo: &Path) -> String {
    let mut c = git(repo);
    c.args(["symbolic-ref", "--quiet", "--short", "HEAD"]);
    match run(c) {
        Ok(o) if o.status.success() => line(String::from_utf8_lossy(&o.stdout).into_owned()),
        _ => "HEAD".to_string(),
    }
}

fn is_ancestor(repo: &Path, a: &str, b: &str) -> Result<bool> {
    let mut c = git(repo);
    c.args(["merge-base", "--is-ancestor", a, b]);
    Ok(run(c)?.status.success())
}

/// Whether a thread's work is in the main tree's current branch: its worktree has nothing
/// uncommitted and its branch is merged (an ancestor of `HEAD`, or squashed in: merging it
/// would change nothing). A worktree whose folder is gone counts by its branch alone.
pub fn is_merged(repo: &Path, worktree: &Path, branch: &str) -> Result<bool> {
    let tip = if worktree.exists() {
        let state = snapshot(worktree, "threadbase: state")?;
        if state != head_of(worktree)? {
            return Ok(false);
        }
        state
    } else {
        let mut c = git(repo);
        c.args(["rev-parse", "--verify", "--quiet", branch]);
        let out = run(c)?;
        if !out.status.success() {
            return Ok(false);
        }
        line(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let head = head_of(repo)?;
    if is_ancestor(repo, &tip, &head)? {
        return Ok(true);
    }
    let mut c = git(repo);
    c.args(["merge-tree", "--write-tree", "--no-messages", &head, &tip]);
    let out = run(c)?;
    Ok(out.status.success()
        && line(String::from_utf8_lossy(&out.stdout).into_owned()) == tree_of(repo, &head)?)
}

/// Removes a worktree's folder (whatever it holds) and its branch. A folder already gone is
/// pruned from git's list; a branch already gone is no error.
pub fn remove(repo: &Path, worktree: &Path, branch: &str) -> Result<()> {
    let _lock = lock(&common_dir(repo)?)?;
    if worktree.exists() {
        let mut c = git(repo);
        c.args(["worktree", "remove", "--force", "--force"])
            .arg(worktree);
        ok(
            c,
            &format!("remove the worktree {}", worktree.display()),
            "close what holds files open in it, then clean again.",
        )?;
    } else {
        let mut c = git(repo);
        c.args(["worktree", "prune"]);
        ok(
            c,
            "prune the worktree list",
            "check the repository (git worktree list).",
        )?;
    }
    let mut c = git(repo);
    c.args([
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("refs/heads/{branch}"),
    ]);
    if run(c)?.status.success() {
        let mut c = git(repo);
        c.args(["branch", "-D", branch]);
        ok(
            c,
            &format!("delete the branch {branch}"),
            "check that no work tree has it checked out (git worktree list).",
        )?;
    }
    Ok(())
}

/// The folders under `<repo>/.threadbase/worktrees/` (for `check`'s orphan search).
pub fn folders(repo: &Path) -> Vec<PathBuf> {
    let Ok(dir) = std::fs::read_dir(repo.join(WORKTREES_DIR)) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = dir
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().map(|t| t.is_dir()).unwrap_or(false))
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

/// An error for a reference that names a thread without a worktree.
pub fn not_isolated(reference: &str, verb: &str) -> Error {
    Error::new(
        ErrorCode::InvalidParams,
        format!(
            "Cannot {verb} {reference}: the thread is not isolated (it has no worktree; it ran in its parent's directory). Repair: review its changes with git in that directory, or start threads with THREADBASE_ISOLATION=worktree in serve's environment so each gets a worktree."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worktrees_cwd_stands_for_the_same_place_in_its_project() {
        let p = plan(
            Path::new("/repo"),
            Path::new("sub/dir"),
            "abc",
            "fix it",
            "a1b2c3",
        );
        assert_eq!(project_dir(&p.cwd), Path::new("/repo/sub/dir"));
        let top = plan(Path::new("/repo"), Path::new(""), "abc", "t", "a1b2c3");
        assert_eq!(project_dir(&top.cwd), Path::new("/repo"));
        // Anything else is itself, a `.threadbase` folder without a worktree's name too.
        for dir in ["/repo/sub", "/repo/.threadbase/worktrees", "/", "rel/dir"] {
            assert_eq!(project_dir(Path::new(dir)), Path::new(dir));
        }
    }

    #[test]
    fn names_keep_safe_characters_only() {
        assert_eq!(name_part("fix_auth"), "fix_auth");
        assert_eq!(name_part("a b/c:d"), "a_b_c_d");
        assert_eq!(name_part("-x"), "t-x");
        assert_eq!(name_part(""), "t");
        assert_eq!(name_part(&"x".repeat(60)).len(), 40);
    }

    #[test]
    fn a_plan_puts_the_cwd_at_the_same_place_inside() {
        let p = plan(Path::new("/r"), Path::new("src/a"), "abc", "fix", "3f2a01");
        assert_eq!(p.path, Path::new("/r/.threadbase/worktrees/fix-3f2a01"));
        assert_eq!(
            p.cwd,
            Path::new("/r/.threadbase/worktrees/fix-3f2a01/src/a")
        );
        assert_eq!(p.branch, "threadbase/fix-3f2a01");
        let top = plan(Path::new("/r"), Path::new(""), "abc", "fix", "3f2a01");
        assert_eq!(top.cwd, top.path);
    }
}
