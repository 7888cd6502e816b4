-- Fires one timer exactly once: clears it when its deadline (:at) is still the armed one and
-- has passed; returns the row only while the thread is working and not stopping (a timer of a
-- thread that settled or is stopping is just cleared). A re-arm meanwhile changes :at, so the
-- new timer stays.
UPDATE threads SET agent_timeout_ms = NULL, agent_timeout_at = NULL
WHERE id = :id AND agent_timeout_at = :at
RETURNING agent_state IN ('starting', 'running') AND agent_stop_requested = 0 AS due
