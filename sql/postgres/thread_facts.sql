-- sql/thread_facts.sql on PostgreSQL: the events aggregated with json_agg (… ORDER BY seq; NULL
-- over no rows, so coalesced to an empty array) of json_build_array, `data` (jsonb) as its
-- text, as SQLite's json_array gives the column's text.
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
LEFT JOIN (SELECT coalesce(json_agg(json_build_array(e.seq, e.at, e.type, e.data::text)
                                    ORDER BY e.seq), '[]') AS events
           FROM thread_events AS e WHERE e.thread_id = ?1) AS ev ON true
WHERE t.id = ?1
