-- Arms (or re-arms, replacing a pending one) a working thread's report-only timer: its length
-- and its deadline in epoch ms. A thread that is not working, or is stopping, keeps none.
UPDATE threads SET agent_timeout_ms = :ms, agent_timeout_at = :at
WHERE id = :id AND agent_state IN ('starting', 'running') AND agent_stop_requested = 0
