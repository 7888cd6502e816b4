-- The live-thread limit's refusal: this manager's live threads that sit idle (each holds a slot
-- and a Pi process until stopped), longest idle first, a few of them. Walks the live threads
-- of the manager in sort order (threads_live_by_sort_key: at most PI_THREADS_MAX_THREADS rows).
SELECT {idle_thread_row} FROM threads
WHERE manager_id = ?1 AND status = 'live' AND phase = 'idle'
ORDER BY last_event_at, sort_key
LIMIT ?2
