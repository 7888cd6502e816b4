-- threadbase schema, version 14: the host and boot columns of V13 take the names DESIGN pins
-- (issue 33: "column `host_id` on `managers` and `threads`"), the same names `host_serves`
-- uses, so `SELECT … FROM threads t JOIN host_serves h USING (host_id)` reads as it should.
-- What they hold is unchanged: the host (THREADBASE_HOST_ID, else the machine id) and the boot
-- of the serve that owns the row's process; NULL on a row written before V13. No index, as in
-- V13: they are read beside the owner's pid on rows already found.
ALTER TABLE managers RENAME COLUMN owner_host TO host_id;
ALTER TABLE managers RENAME COLUMN owner_boot TO boot_id;
ALTER TABLE threads RENAME COLUMN owner_host TO host_id;
ALTER TABLE threads RENAME COLUMN owner_boot TO boot_id;

-- The team view in SQL (issue 33: "thread_forest spans every host, with the host shown"):
-- `thread_forest` gains, last, the host that holds (or held) each thread: its serve's, or
-- for a row not launched yet its manager's serve's (the holder rule). The other columns are
-- V4's, in V4's order.
DROP VIEW thread_forest;
CREATE VIEW thread_forest AS
SELECT t.id, t.path, m.session_id AS manager_session, m.contract, p.root_session,
       p.forest_parent_id, p.level, p.tree_key, t.task_name, t.name, t.status, t.phase,
       t.agent_state, t.exit_kind, t.archived, t.created_at, t.last_event_at,
       CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END AS host_id
FROM thread_places p
JOIN threads t ON t.id = p.thread_id
JOIN managers m ON m.id = t.manager_id
ORDER BY p.root_session, p.tree_key;
