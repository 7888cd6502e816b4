-- How many detached runs reporting to :recipient are still working in a registry (partial
-- index threads_agent_active holds only the working threads of each registry; named, since
-- the planner would otherwise read every contract B row of the registry).
SELECT count(*) AS outstanding FROM threads INDEXED BY threads_agent_active
WHERE manager_id = :registry AND agent_state IN ('starting', 'running') AND agent_detached = 1
  AND coalesce(parent_path, '/root') = :recipient
