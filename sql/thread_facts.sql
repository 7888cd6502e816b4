-- A thread's facts in one statement (a poll's, a wait's: store/facts.rs `of_thread`): its row,
-- then each part as the one-thread query of its own would read it, LEFT JOINed so that a part
-- with no row reads as NULLs: its retained output (thread_output's primary key), its usage
-- (thread_usage's), its queue position while it waits for a slot (threads_queue_waiting), its
-- oldest pending question (ui_requests_pending), what needs the user (the view
-- thread_attention, the id pushed into it), its worktree (thread_worktrees' primary key), the
-- host whose lease ran out while it is live (as sql/threads_unreachable.sql), and last its
-- retained events as one JSON array of [seq, at, type, data] (thread_events' primary-key range,
-- oldest first). Every part is a lookup by the id ?1; nothing scans.
SELECT {thread_row}, o.*, u.*, qp.*, r.*, a.*, w.*, h.*, {thread_facts_row}
FROM threads AS t
LEFT JOIN (SELECT {output_row} FROM thread_output WHERE thread_id = ?1) AS o ON true
LEFT JOIN (SELECT {usage_row} FROM thread_usage WHERE thread_id = ?1) AS u ON true
LEFT JOIN (SELECT {queue_position_row} FROM threads AS t
           WHERE t.id = ?1 AND t.queued_at IS NOT NULL AND t.dequeued_at IS NULL
             AND t.status = 'live') AS qp ON true
LEFT JOIN (SELECT {question_row} FROM ui_requests AS r
           WHERE r.thread_id = ?1 AND r.state = 'pending' ORDER BY r.id LIMIT 1) AS r ON true
LEFT JOIN (SELECT {attention_row} FROM thread_attention AS a WHERE a.thread_id = ?1) AS a ON true
LEFT JOIN (SELECT {worktree_row} FROM thread_worktrees AS w WHERE w.thread_id = ?1) AS w ON true
LEFT JOIN (SELECT {unreachable_row}
           FROM threads AS t
           JOIN managers AS m ON m.id = t.manager_id
           JOIN host_serves AS h
             ON h.host_id = CASE WHEN t.owner_pid IS NOT NULL THEN t.host_id ELSE m.host_id END
           WHERE t.id = ?1 AND t.status = 'live'
           GROUP BY h.host_id
           HAVING max(h.heartbeat_at) <= (SELECT l.cutoff FROM host_lease l)) AS h ON true
LEFT JOIN (SELECT json_group_array(json_array(e.seq, e.at, e.type, e.data)) AS events
           FROM (SELECT e.seq, e.at, e.type, e.data FROM thread_events AS e
                 WHERE e.thread_id = ?1 ORDER BY e.seq) AS e) AS ev ON true
WHERE t.id = ?1
