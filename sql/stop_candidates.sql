-- `threadbase stop PATTERN…`: every live thread (optionally of one manager) with what the
-- stop needs: its owner, to choose between a command row and the restore pass. The glob itself
-- is matched in Rust (globset); live rows are few and come from the partial index threads_live.
-- A queued row never launched (THREADBASE_QUEUE=1) has no owner of its own: its manager's
-- serve carries the stop out (it takes the row out of the queue).
SELECT t.id, t.path, m.session_id,
       CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_pid ELSE t.owner_pid END AS owner_pid,
       CASE WHEN t.queued_at IS NOT NULL AND t.launch_seq = 0 THEN m.owner_started_at
            ELSE t.owner_started_at END AS owner_started_at
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live' AND (?1 IS NULL OR m.session_id = ?1)
ORDER BY t.sort_key, t.manager_id
