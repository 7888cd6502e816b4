-- Closes one launch of a thread with its exit. A real exit may replace a synthesized one of
-- the same launch; a close of a superseded launch changes nothing.
UPDATE threads
SET status = 'closed', phase = :phase, exit_kind = :kind, exit_code = :code, exit_signal = :signal,
    exit_message = :message, exit_synthetic = :synthetic, idle_started_at = NULL, updated_at = :at
WHERE id = :id AND launch_seq = :launch AND (status = 'live' OR exit_synthetic = 1)
