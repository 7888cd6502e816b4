-- With the queue on (THREADBASE_QUEUE=1), the idle threads of a manager that yield their slot
-- to rows waiting for one (THREADBASE_QUEUE_IDLE_MS), each with the waiting row it frees a slot
-- for; no row while nothing waits. The candidates are the live, idle threads holding a slot
-- that this serve (:owner_pid, :owner_started) holds, longest idle first (idle_started_at, the
-- start of the idle stretch). The k-th of them frees the slot of the waiting row at position
-- k + the slots free or freeing already (a free slot is claimed by queue_claim.sql, a stopping
-- thread frees its own), so each waiting row waits on one yield. `due`: idle since :cutoff
-- (now minus THREADBASE_QUEUE_IDLE_MS) at least; ISO text compares in time order, and both
-- sides come from this serve's clock. The serve stops the due ones and wakes for the first
-- that is not. Reads the partial indexes of the waiting rows and the live rows (a handful).
WITH waiting AS (
    SELECT path, row_number() OVER (ORDER BY rowid) AS position
    FROM threads
    WHERE manager_id = :manager AND queued_at IS NOT NULL AND dequeued_at IS NULL
      AND status = 'live'
),
slots AS (
    SELECT CAST(:max AS bigint) - count(*)
           + coalesce(sum(CASE WHEN phase = 'stopping' THEN 1 ELSE 0 END), 0) AS ahead
    FROM threads
    WHERE manager_id = :manager AND status = 'live'
      AND (queued_at IS NULL OR dequeued_at IS NOT NULL)
),
idle AS (
    SELECT id, path, idle_started_at,
           row_number() OVER (ORDER BY idle_started_at, rowid) AS turn
    FROM threads
    WHERE manager_id = :manager AND status = 'live' AND phase = 'idle'
      AND owner_pid = :owner_pid AND owner_started_at = :owner_started
      AND idle_started_at IS NOT NULL AND stop_requested = 0
      AND (queued_at IS NULL OR dequeued_at IS NOT NULL)
)
SELECT {queue_yield_row}
FROM idle i CROSS JOIN slots s
JOIN waiting w ON w.position = i.turn + CASE WHEN s.ahead > 0 THEN s.ahead ELSE 0 END
ORDER BY i.turn
