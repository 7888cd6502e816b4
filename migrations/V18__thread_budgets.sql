-- threadbase schema, version 18: a cap per thread (issue 49). Named V18 (not V17) because
-- another branch adds its own V17 (worktrees); the two are independent.
--
-- 1. `budgets` keeps a third scope, `thread`: caps that hold for every thread of the database
--    (`threadbase budget set --scope thread --tokens N | --usd X | --turns N`), beside the
--    environment's THREADBASE_THREAD_BUDGET_TOKENS / _USD / THREADBASE_THREAD_MAX_TURNS; the
--    smallest cap that applies wins. `turns` is a cap on a thread's completed assistant
--    messages (thread_usage.turns); only scope `thread` uses it.
ALTER TABLE budgets ADD COLUMN turns INTEGER CHECK (turns IS NULL OR turns > 0);

-- 2. The events of a cap: `budget_warned` (the thread passed THREADBASE_BUDGET_WARN of a cap
--    and was asked to wrap up) and `budget_stopped` (it reached the cap and was stopped).
--
-- SQLite cannot alter a CHECK, and rebuilding `budgets` or `thread_events` would cost a copy
-- of every event; widening a CHECK changes no stored byte, so the tables' text in
-- sqlite_schema is edited in place, as V16 does (SQLite's "Making Other Kinds Of Table Schema
-- Changes"). The ALTER above runs first: it computes where the new column goes from the text
-- as it was parsed. The new lists:
--   budgets:       CHECK (scope IN ('tree', 'team', 'thread'))
--                  CHECK (tokens IS NOT NULL OR usd IS NOT NULL OR turns IS NOT NULL)
--   thread_events: CHECK (type IN (…, 'thread_adopted', 'budget_warned', 'budget_stopped'))
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(replace(sql,
                  'CHECK (scope IN (''tree'', ''team''))',
                  'CHECK (scope IN (''tree'', ''team'', ''thread''))'),
                  'CHECK (tokens IS NOT NULL OR usd IS NOT NULL)',
                  'CHECK (tokens IS NOT NULL OR usd IS NOT NULL OR turns IS NOT NULL)')
WHERE type = 'table' AND name = 'budgets';
UPDATE sqlite_schema
SET sql = replace(sql,
                  '''ui_request'', ''thread_adopted''))',
                  '''ui_request'', ''thread_adopted'', ''budget_warned'', ''budget_stopped''))')
WHERE type = 'table' AND name = 'thread_events';
PRAGMA writable_schema = RESET;
-- A DDL statement bumps the schema cookie, so every other connection reads the new text.
CREATE TABLE schema_v18_bump (x INTEGER);
DROP TABLE schema_v18_bump;
