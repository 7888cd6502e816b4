-- threadbase schema, version 10: spend where the user looks (issue 28, item 2).
--
-- 1. A root Pi session's own turns are part of its tree's spend. The root session is not a
--    supervised child, so nothing ingests its events: its Pi extension reports the session's
--    cumulative usage (recomputed from the session's entries) to its serve, which keeps it
--    here, one row per root session. `usage` and the budgets add it to the tree's total.
-- 2. A tool result tells the parent Pi session what its children spent since the last one
--    did (Pi 1.6 adds a tool result's `usage` to the session's totals: its footer and
--    `get_session_stats`). What each session was told so far is kept here, so a child's
--    spend reaches its parent session once, across repeated polls and serve restarts.
-- 3. Contract A's poll, wait and list texts show each thread's tokens and cost, so a change
--    of a thread's usage invalidates its kept answers, like a change of its other rows.

-- The usage of a root session's own turns (its assistant messages, `usage` entries and
-- compactions, as Pi's session stats count them, without the spend of threadbase's tools'
-- results, which is its children's and counted in their rows). Cumulative: each report sets
-- the row to the larger of what it had and what is reported, so a report that arrives late
-- or twice changes nothing.
CREATE TABLE session_usage (
    -- Why (primary key): the budget check and `usage` look a root session's row up by id.
    session_id         TEXT    PRIMARY KEY,
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_usd           REAL    NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    turns              INTEGER NOT NULL DEFAULT 0 CHECK (turns >= 0),
    tool_calls         INTEGER NOT NULL DEFAULT 0 CHECK (tool_calls >= 0),
    updated_at         TEXT    NOT NULL
) WITHOUT ROWID;

-- What the tool results of a Pi session have reported of the spend below it (the threads of
-- its tree below the session: every thread of a root session's tree, or a managed child's
-- subtree without itself). A tool result carries the difference between the spend below and
-- this row, and the same transaction moves the row up to the spend below.
CREATE TABLE usage_told (
    -- Why (primary key): each tool result of a session reads and moves its own row.
    session_id         TEXT    PRIMARY KEY,
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    cost_usd           REAL    NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    updated_at         TEXT    NOT NULL
) WITHOUT ROWID;

-- A thread's kept answers show its usage: a change of it drops them (V8's rule).
CREATE TRIGGER thread_snapshots_stale_on_usage AFTER UPDATE ON thread_usage
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
END;
