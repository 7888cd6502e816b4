-- Whether a send to a thread is still waiting to be carried out or being carried out (a wait
-- on a thread another serve holds is not settled while one is): the partial indexes
-- commands_pending and commands_running hold only those rows.
SELECT EXISTS (SELECT 1 FROM commands INDEXED BY commands_pending
               WHERE thread_id = ?1 AND state = 'pending' AND kind = 'send')
    OR EXISTS (SELECT 1 FROM commands INDEXED BY commands_running
               WHERE thread_id = ?1 AND state = 'running' AND kind = 'send')
