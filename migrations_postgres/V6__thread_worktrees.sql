-- threadbase PostgreSQL schema, version 6 (SQLite's version 17): each isolated thread's git
-- worktree (issue 48, `THREADBASE_ISOLATION=worktree` and contract B's `"isolation":
-- "worktree"` agent types). A thread started, forked or spawned in a git work tree with
-- isolation on runs in a worktree of its own, `<repo>/.threadbase/worktrees/<task name>-<short
-- id>`, on a new branch `threadbase/<task name>-<short id>` made from `base_commit`. The row is
-- written in the transaction that reserves the thread; `removed_at` is set by `threadbase
-- worktree clean` when it removes the folder and the branch (nothing else deletes a worktree:
-- stop, close, archive and restore keep it). `diff`, `merge`, `worktree list`, `show`, `tree`,
-- `top`, the web view and `check` read it.
-- The web page's Merge: a `commands` row of kind 'merge' (see SQLite's V17).
ALTER TABLE commands DROP CONSTRAINT commands_kind_check;
ALTER TABLE commands ADD CONSTRAINT commands_kind_check
    CHECK (kind IN ('stop', 'force_stop', 'interrupt', 'send', 'resume', 'merge'));

CREATE TABLE thread_worktrees (
    -- Why (primary key): a thread has at most one worktree, read by its id (poll, show,
    -- diff, merge).
    thread_id   text COLLATE "C" PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    -- The main work tree's root (the repository the worktree belongs to).
    repo        text COLLATE "C" NOT NULL,
    -- The worktree's folder (absolute).
    path        text COLLATE "C" NOT NULL,
    branch      text COLLATE "C" NOT NULL,
    -- The commit the branch was made from: what `diff` compares against.
    base_commit text COLLATE "C" NOT NULL,
    created_at  text COLLATE "C" NOT NULL,
    removed_at  text COLLATE "C"
);

-- Why: `check` looks up the row owning each folder under `.threadbase/worktrees/` by path,
-- and no two threads may own one folder.
CREATE UNIQUE INDEX thread_worktrees_by_path ON thread_worktrees (path);

-- A thread's kept answers show its worktree (the snapshot's `worktree` member): a change of
-- the row (its removal by `clean`) drops them.
CREATE FUNCTION thread_snapshots_stale_on_worktree() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER thread_snapshots_stale_on_worktree AFTER UPDATE ON thread_worktrees
    FOR EACH ROW EXECUTE FUNCTION thread_snapshots_stale_on_worktree();
