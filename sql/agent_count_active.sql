-- Working (starting or running) threads of a registry; the partial index threads_agent_active.
-- A queued row still waiting for a slot (THREADBASE_QUEUE=1) holds none.
SELECT count(*) FROM threads WHERE manager_id = ?1 AND agent_state IN ('starting', 'running')
  AND (queued_at IS NULL OR dequeued_at IS NOT NULL)
