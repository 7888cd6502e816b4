-- Whether a row is queued and not yet launched (waiting for a slot, or claimed and launching).
SELECT {queue_state_row}
FROM threads WHERE id = ?1
