-- Records a new launch of a thread's process: the process identity, its owner (this serve, on
-- this host and boot),
-- a fresh launch number (closes of older launches are ignored), and a cleared exit.
UPDATE threads
SET status = 'live', phase = 'starting', pid = :pid, pgid = :pgid, process_started_at = :started,
    owner_pid = :owner_pid, owner_started_at = :owner_started, host_id = :host_id,
    boot_id = :boot_id, launch_seq = launch_seq + 1,
    stop_requested = 0, exit_kind = NULL, exit_code = NULL, exit_signal = NULL,
    exit_message = NULL, exit_synthetic = 0, archived = 0, live_started_at = :now,
    idle_started_at = NULL, stall_ms = :stall_ms, updated_at = :now
WHERE id = :id
RETURNING launch_seq
