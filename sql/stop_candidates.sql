-- `threadbase stop PATTERN…`: every live thread (optionally of one manager) with what the
-- stop needs: its owner, to choose between a command row and the restore pass. The glob itself
-- is matched in Rust (globset); live rows are few and come from the partial index threads_live.
-- A queued row never launched (THREADBASE_QUEUE=1) has no owner of its own: its manager's
-- serve carries the stop out (it takes the row out of the queue).
SELECT {stop_candidate_row}
FROM threads t JOIN managers m ON m.id = t.manager_id
WHERE t.status = 'live' AND (?1 IS NULL OR m.session_id = ?1)
ORDER BY t.sort_key, t.manager_id
