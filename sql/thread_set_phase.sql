-- A live thread's phase; idle_started_at marks when an idle stretch began (for idle cleanup).
UPDATE threads
SET phase = :phase,
    updated_at = :at,
    idle_started_at = CASE WHEN :phase = 'idle' THEN coalesce(idle_started_at, :at) END
WHERE id = :id AND status = 'live' AND phase <> 'stopping'
