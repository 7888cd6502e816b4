-- threadbase schema, version 11: contract B as the subagent manager 0.19 has it (issue 29).
-- Every new fact is a column of the row it belongs to, so it survives a restart of serve.

-- What a contract B child was launched with: the resolved model (`provider/model-id`, NULL
-- when no model was resolved and the child runs with its parent's flags), its thinking level,
-- and its tool set as a JSON object ({"filtering": "allowed", "tools": [...]} and the like;
-- NULL when no filtering applies). Read with the row by its key; no index.
ALTER TABLE threads ADD COLUMN agent_model TEXT;
ALTER TABLE threads ADD COLUMN agent_thinking TEXT;
ALTER TABLE threads ADD COLUMN agent_tools TEXT;

-- 1 while the thread's current run was started without a caller waiting for it (a detached
-- agent_spawn, a resuming agent_steer): its result counts for the final recap (`finalRecap`).
ALTER TABLE threads ADD COLUMN agent_detached INTEGER NOT NULL DEFAULT 0;

-- When `reap` forgot the thread (contract B no longer knows it; the row stays for SQL and
-- usage).
ALTER TABLE threads ADD COLUMN agent_reaped_at TEXT;

-- The report-only timeout (`timeoutMs` of agent_spawn / agent_steer): its deadline in epoch
-- milliseconds and its length; both NULL when no timer is armed. (A column with a CHECK makes
-- SQLite test the whole schema, TEMP views included, so it comes after every column the row
-- views read.)
ALTER TABLE threads ADD COLUMN agent_timeout_at INTEGER;
ALTER TABLE threads ADD COLUMN agent_timeout_ms INTEGER
    CHECK (agent_timeout_ms IS NULL OR agent_timeout_ms > 0);

-- Why: each serve looks up the next deadline among the timers of the runs it holds after every
-- change and fires the due ones; this partial index holds only armed timers (a handful), by
-- owner and deadline, so that is one short range.
CREATE INDEX threads_agent_timers ON threads (owner_pid, agent_timeout_at)
    WHERE agent_timeout_at IS NOT NULL;

-- A notice's structured details beyond its text (a timeout notice's `timeoutMs` and
-- `recentOutput`, a recap's results), as JSON; NULL for the others.
ALTER TABLE mailbox ADD COLUMN details TEXT;
-- 1 while a detached child's result is held back for the final recap (`finalRecap`); the row
-- stays pending, so a crash loses none.
ALTER TABLE mailbox ADD COLUMN recap_held INTEGER NOT NULL DEFAULT 0 CHECK (recap_held IN (0, 1));
