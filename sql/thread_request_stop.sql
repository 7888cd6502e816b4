-- Marks a stop request and freezes the phase at stopping.
UPDATE threads SET stop_requested = 1, phase = 'stopping', idle_started_at = NULL, updated_at = :at
WHERE id = :id AND status = 'live'
