-- PostgreSQL's text of sql/web_timeline_events.sql (no INDEXED BY): the timeline's events of
-- the first ?2 threads of root session ?1's tree in tree order.
SELECT {web_timeline_row}
FROM (SELECT thread_id, tree_key FROM thread_places
      WHERE root_session = ?1 ORDER BY tree_key LIMIT ?2) k
JOIN thread_events e ON e.thread_id = k.thread_id
WHERE e.type IN ('thread_started', 'thread_resumed', 'turn_started', 'turn_completed',
                 'ui_request', 'tool_started', 'assistant_message', 'thread_stopping',
                 'thread_closed', 'thread_error')
ORDER BY k.tree_key, e.seq
