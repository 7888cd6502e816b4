-- Contract B threads reserved to run without a live process (a resume whose serve died
-- before the launch), with the reserving owner (partial index threads_agent_active).
SELECT {unlaunched_agent_row} FROM threads t
WHERE t.agent_state IN ('starting', 'running') AND t.status = 'closed'
