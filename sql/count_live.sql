-- Live threads of a manager that hold a slot, for PI_THREADS_MAX_THREADS (the threads_live
-- partial index): a queued row still waiting for a slot (THREADBASE_QUEUE=1) holds none.
SELECT count(*) FROM threads
WHERE manager_id = ?1 AND status = 'live' AND (queued_at IS NULL OR dequeued_at IS NOT NULL)
