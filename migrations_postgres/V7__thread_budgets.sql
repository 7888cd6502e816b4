-- threadbase schema (PostgreSQL), version 7: SQLite's V18, a cap per thread (issue 49). Named
-- V7 (not V6) because another branch adds its own V6 (worktrees); the two are independent.
--
-- `budgets` keeps a third scope, `thread` (`threadbase budget set --scope thread`), and a cap
-- on a thread's turns; `thread_events` allows `budget_warned` and `budget_stopped`.
ALTER TABLE budgets ADD COLUMN turns bigint CHECK (turns IS NULL OR turns > 0);
ALTER TABLE budgets DROP CONSTRAINT budgets_scope_check;
ALTER TABLE budgets ADD CONSTRAINT budgets_scope_check
    CHECK (scope IN ('tree', 'team', 'thread'));
ALTER TABLE budgets DROP CONSTRAINT budgets_check;
ALTER TABLE budgets ADD CONSTRAINT budgets_check
    CHECK (tokens IS NOT NULL OR usd IS NOT NULL OR turns IS NOT NULL);

ALTER TABLE thread_events DROP CONSTRAINT thread_events_type_check;
ALTER TABLE thread_events ADD CONSTRAINT thread_events_type_check CHECK (type IN (
    'thread_started', 'thread_resumed', 'thread_forked', 'thread_archived',
    'thread_stopping', 'thread_closed', 'thread_error',
    'turn_started', 'turn_completed', 'tool_started', 'tool_completed',
    'assistant_message', 'ui_request', 'thread_adopted', 'budget_warned', 'budget_stopped'));
