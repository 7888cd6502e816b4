-- threadbase schema, version 3: indexes for the list filters that keep few rows of a big
-- manager, so that a `list` costs what it returns, not what the manager ever kept.

-- Why: `list` with `state: live` (with or without `parent`/`ancestor`) reads only live rows,
-- already in list order; a manager keeps every closed thread it ever ran, and without this the
-- live ones were found by walking all of them (sql/list_*_live.sql).
CREATE INDEX threads_live_by_sort_key ON threads (manager_id, sort_key) WHERE status = 'live';

-- Why: `list` with `visibility: archived` reads only archived rows, in list order, for the same
-- reason (sql/list_*_archived.sql).
CREATE INDEX threads_archived_by_sort_key ON threads (manager_id, sort_key) WHERE archived = 1;
