-- threadbase PostgreSQL schema, version 4 (SQLite's version 15): budgets kept in the database
-- (issue 33, "budgets can be set per team database and are checked across every host in the
-- reserving transaction"). `THREADBASE_BUDGET_TOKENS` / `_USD` cap one root session's whole
-- tree, but only for the serves whose environment sets them; on a database several hosts
-- share, a cap set here holds for every serve of every host, read inside the same write
-- transaction that reserves the work (start, fork, resume, send, steer, spawn), so two hosts
-- cannot both pass it at once.
--
-- One row per scope, set by `threadbase budget set --scope tree|team`:
-- - `tree`: the caps the variables set, on each root session's whole tree (its threads'
--   tree_usage row and its own turns' session_usage row);
-- - `team`: caps on the whole database's spend (every tree's tree_usage row and every
--   session's session_usage row: two sums over one row per root session, never over threads).
-- Where a variable and a row both cap a tree, the lower cap is reached first.
CREATE TABLE budgets (
    -- Why (primary key): the check reads both scopes' rows, and `budget set` replaces one.
    scope  text COLLATE "C" PRIMARY KEY CHECK (scope IN ('tree', 'team')),
    tokens bigint CHECK (tokens IS NULL OR tokens >= 0),
    usd    double precision CHECK (usd IS NULL OR usd >= 0),
    -- When and from which host it was set (the host's id, THREADBASE_HOST_ID or machine id).
    set_at text COLLATE "C" NOT NULL,
    set_by text COLLATE "C" NOT NULL,
    CHECK (tokens IS NOT NULL OR usd IS NOT NULL)
);
