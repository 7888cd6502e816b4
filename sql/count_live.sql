-- Live threads of a manager, for PI_THREADS_MAX_THREADS (the threads_live partial index).
SELECT count(*) FROM threads WHERE manager_id = ?1 AND status = 'live'
