-- Working (starting or running) threads of a registry; the partial index threads_agent_active.
SELECT count(*) FROM threads WHERE manager_id = ?1 AND agent_state IN ('starting', 'running')
