-- Claims `:free` slots of a manager's queue lane for its oldest waiting rows (THREADBASE_QUEUE=1,
-- every contract): `:free` is the lane's limit minus the slots held, counted in the same
-- transaction (store::queue::claim). A claimed row holds its slot from here on; its launch
-- follows (queue_to_launch.sql). A contract B row (with an agent_state) says it is starting.
-- Rank by rowid, the reservation order (threads_queue_waiting).
UPDATE threads
SET dequeued_at = :at, phase = 'starting', updated_at = :at,
    status_text = CASE WHEN agent_state IS NULL THEN status_text ELSE 'Starting' END
WHERE id IN (
    SELECT id FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
    ORDER BY rowid
    LIMIT :free
)
