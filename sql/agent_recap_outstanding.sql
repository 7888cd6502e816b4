-- How many detached runs reporting to :recipient are still working in a registry (partial
-- index threads_agent_active holds only the working threads of each registry).
SELECT count(*) AS outstanding FROM threads
WHERE manager_id = :registry AND agent_state IN ('starting', 'running') AND agent_detached = 1
  AND coalesce(parent_path, '/root') = :recipient
