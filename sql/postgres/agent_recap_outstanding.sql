-- sql/agent_recap_outstanding.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index).
SELECT count(*) AS outstanding FROM threads
WHERE manager_id = :registry AND agent_state IN ('starting', 'running') AND agent_detached = 1
  AND coalesce(parent_path, '/root') = :recipient
