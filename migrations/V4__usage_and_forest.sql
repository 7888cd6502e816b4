-- threadbase schema, version 4: one tree per root session across every manager in it, and
-- what each thread spent (tokens and cost from Pi's per-message usage), per thread, per
-- subtree and per tree.
--
-- Every child Pi runs its own serve, so its own manager. The tree is stitched from rows: a
-- thread hangs under its parent thread (`parent_id`, else the thread at its `parent_path` in
-- the same manager) or, at the top of its manager, under the thread whose session that manager
-- is (`managers.self_thread_id`, else the thread whose id is the manager's session id: a
-- contract C worker's own serve). A thread with none of these starts a tree whose root session
-- is its manager's session. The place is computed once, when the thread is inserted (its
-- parent always exists by then), and never moves.

CREATE TABLE thread_places (
    thread_id        TEXT    PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    -- The session at the top of the tree (the user's own Pi session, or a contract B root).
    root_session     TEXT    NOT NULL,
    -- The thread this one hangs under; NULL at the top of the tree.
    forest_parent_id TEXT,
    -- `/`-joined segments `<task name with '_' as '!'> <thread id>` from the top of the tree
    -- down to this thread, so a subtree is one key range and siblings sort by name.
    tree_key         TEXT    NOT NULL CHECK (substr(tree_key, 1, 1) = '/'),
    -- 1 at the top of the tree.
    level            INTEGER NOT NULL CHECK (level >= 1)
) WITHOUT ROWID;

-- Why: a subtree is the range tree_key > K||'/' AND tree_key < K||'0' inside one root
-- (subtree_usage, `threadbase usage REF`), and a whole tree in display order is the range of
-- one root_session, so both cost O(log n + k) whatever else the database holds.
CREATE UNIQUE INDEX thread_places_by_key ON thread_places (root_session, tree_key);

-- What each thread spent: the usage of every assistant message its Pi processes completed,
-- plus the usage Pi 1.6 reports beside turns (a tool result's nested model calls, a `usage`
-- session entry, a compaction), as Pi's own session cost counts them; added by the ingest
-- writer in the same transaction as the events. Resumes go on counting; a fork is a new
-- thread and starts at zero.
CREATE TABLE thread_usage (
    thread_id          TEXT    PRIMARY KEY REFERENCES threads (id) ON DELETE CASCADE,
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_usd           REAL    NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    -- Completed assistant messages counted (also how a restore pass knows which messages of
    -- the session file a crashed serve never recorded).
    turns              INTEGER NOT NULL DEFAULT 0 CHECK (turns >= 0),
    tool_calls         INTEGER NOT NULL DEFAULT 0 CHECK (tool_calls >= 0),
    updated_at         TEXT    NOT NULL
) WITHOUT ROWID;

-- The running total of each root session's whole tree, kept by the triggers below in the
-- same transaction as every change of thread_usage, so a budget check is one primary-key
-- lookup however large the tree.
CREATE TABLE tree_usage (
    root_session       TEXT    PRIMARY KEY,
    threads            INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    output_tokens      INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL    NOT NULL DEFAULT 0,
    turns              INTEGER NOT NULL DEFAULT 0,
    tool_calls         INTEGER NOT NULL DEFAULT 0,
    updated_at         TEXT    NOT NULL
) WITHOUT ROWID;

-- Places for the threads that exist already, parents first.
WITH RECURSIVE
    up (id, parent) AS (
        SELECT t.id, coalesce(
                   (SELECT p.id FROM threads p WHERE p.id = t.parent_id AND p.id <> t.id),
                   (SELECT p.id FROM threads p
                    WHERE p.manager_id = t.manager_id AND p.path = t.parent_path AND p.id <> t.id),
                   (SELECT p.id FROM threads p WHERE p.id = m.self_thread_id AND p.id <> t.id),
                   (SELECT p.id FROM threads p WHERE p.id = m.session_id AND p.id <> t.id))
        FROM threads t JOIN managers m ON m.id = t.manager_id
    ),
    placed (id, root, parent, tree_key, level) AS (
        SELECT u.id, m.session_id, NULL,
               '/' || replace(replace(t.task_name, '_', '!'), '/', '!') || ' ' || t.id, 1
        FROM up u JOIN threads t ON t.id = u.id JOIN managers m ON m.id = t.manager_id
        WHERE u.parent IS NULL
        UNION ALL
        SELECT u.id, pl.root, pl.id,
               pl.tree_key || '/' || replace(replace(t.task_name, '_', '!'), '/', '!') || ' ' || t.id,
               pl.level + 1
        FROM placed pl JOIN up u ON u.parent = pl.id JOIN threads t ON t.id = u.id
    )
INSERT INTO thread_places (thread_id, root_session, forest_parent_id, tree_key, level)
SELECT id, root, parent, tree_key, level FROM placed;

-- Rows whose parent links form a cycle (hand-edited data) start trees of their own.
INSERT INTO thread_places (thread_id, root_session, forest_parent_id, tree_key, level)
SELECT t.id, m.session_id, NULL,
       '/' || replace(replace(t.task_name, '_', '!'), '/', '!') || ' ' || t.id, 1
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE NOT EXISTS (SELECT 1 FROM thread_places p WHERE p.thread_id = t.id);

-- Threads recorded before this version spent nothing that is known.
INSERT INTO thread_usage (thread_id, updated_at) SELECT id, created_at FROM threads;

INSERT INTO tree_usage (root_session, threads, updated_at)
SELECT root_session, count(*), strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM thread_places GROUP BY root_session;

-- A new thread gets its place (from its parent's, which exists) and its zero usage row.
CREATE TRIGGER threads_placed AFTER INSERT ON threads
BEGIN
    INSERT INTO thread_places (thread_id, root_session, forest_parent_id, tree_key, level)
    SELECT NEW.id, coalesce(up.root_session, m.session_id), up.thread_id,
           coalesce(up.tree_key, '') || '/'
               || replace(replace(NEW.task_name, '_', '!'), '/', '!') || ' ' || NEW.id,
           coalesce(up.level, 0) + 1
    FROM managers m
    LEFT JOIN thread_places up ON up.thread_id = coalesce(
        (SELECT p.thread_id FROM thread_places p WHERE p.thread_id = NEW.parent_id),
        (SELECT p.thread_id FROM threads x JOIN thread_places p ON p.thread_id = x.id
         WHERE x.manager_id = NEW.manager_id AND x.path = NEW.parent_path),
        (SELECT p.thread_id FROM thread_places p WHERE p.thread_id = m.self_thread_id),
        (SELECT p.thread_id FROM thread_places p WHERE p.thread_id = m.session_id))
    WHERE m.id = NEW.manager_id;
    INSERT INTO thread_usage (thread_id, updated_at) VALUES (NEW.id, NEW.created_at);
END;

CREATE TRIGGER thread_places_counted AFTER INSERT ON thread_places
BEGIN
    INSERT INTO tree_usage (root_session, threads, updated_at)
    VALUES (NEW.root_session, 1, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
    ON CONFLICT (root_session) DO UPDATE SET threads = threads + 1;
END;

-- Every change of a thread's usage moves its tree's total by the same amount.
CREATE TRIGGER thread_usage_rolled_up AFTER UPDATE ON thread_usage
BEGIN
    UPDATE tree_usage SET
        input_tokens = input_tokens + NEW.input_tokens - OLD.input_tokens,
        output_tokens = output_tokens + NEW.output_tokens - OLD.output_tokens,
        cache_read_tokens = cache_read_tokens + NEW.cache_read_tokens - OLD.cache_read_tokens,
        cache_write_tokens = cache_write_tokens + NEW.cache_write_tokens - OLD.cache_write_tokens,
        cost_usd = cost_usd + (NEW.cost_usd - OLD.cost_usd),
        turns = turns + NEW.turns - OLD.turns,
        tool_calls = tool_calls + NEW.tool_calls - OLD.tool_calls,
        updated_at = max(updated_at, NEW.updated_at)
    WHERE root_session = (SELECT root_session FROM thread_places WHERE thread_id = NEW.thread_id);
END;

-- A deleted thread (only by hand: the engine never deletes one) leaves its tree's total
-- before the cascade removes its place and usage.
CREATE TRIGGER threads_unplaced BEFORE DELETE ON threads
BEGIN
    UPDATE tree_usage SET
        threads = tree_usage.threads - 1,
        input_tokens = tree_usage.input_tokens - u.input_tokens,
        output_tokens = tree_usage.output_tokens - u.output_tokens,
        cache_read_tokens = tree_usage.cache_read_tokens - u.cache_read_tokens,
        cache_write_tokens = tree_usage.cache_write_tokens - u.cache_write_tokens,
        cost_usd = tree_usage.cost_usd - u.cost_usd,
        turns = tree_usage.turns - u.turns,
        tool_calls = tree_usage.tool_calls - u.tool_calls
    FROM thread_places p JOIN thread_usage u ON u.thread_id = p.thread_id
    WHERE p.thread_id = OLD.id AND tree_usage.root_session = p.root_session;
END;

-- Every thread with the root session of the tree it belongs to, across the managers of
-- children's own serves, in tree order (a parent before its descendants, siblings by name).
CREATE VIEW thread_forest AS
SELECT t.id, t.path, m.session_id AS manager_session, m.contract, p.root_session,
       p.forest_parent_id, p.level, p.tree_key, t.task_name, t.name, t.status, t.phase,
       t.agent_state, t.exit_kind, t.archived, t.created_at, t.last_event_at
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
JOIN managers m ON m.id = t.manager_id
ORDER BY p.root_session, p.tree_key;

-- What each thread and all of its descendants (in every manager of the tree) spent: for each
-- thread, one range of thread_places_by_key (itself and the keys below it).
CREATE VIEW subtree_usage AS
SELECT a.thread_id, t.path, a.root_session, a.tree_key, count(*) AS threads,
       sum(u.input_tokens) AS input_tokens, sum(u.output_tokens) AS output_tokens,
       sum(u.cache_read_tokens) AS cache_read_tokens,
       sum(u.cache_write_tokens) AS cache_write_tokens,
       sum(u.cost_usd) AS cost_usd, sum(u.turns) AS turns, sum(u.tool_calls) AS tool_calls
FROM thread_places a
JOIN threads t ON t.id = a.thread_id
JOIN thread_places d ON d.root_session = a.root_session
     AND d.tree_key >= a.tree_key AND d.tree_key < a.tree_key || '0'
     AND (length(d.tree_key) = length(a.tree_key)
          OR substr(d.tree_key, length(a.tree_key) + 1, 1) = '/')
JOIN thread_usage u ON u.thread_id = d.thread_id
GROUP BY a.root_session, a.tree_key, a.thread_id;
