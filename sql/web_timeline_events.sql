-- The web view's timeline of one tree (issue 50): the events that change what a thread is doing
-- (launches, turns, questions, stops, closes, and the first sign of work after a question), of
-- the first ?2 threads of root session ?1's tree in tree order. One range of
-- thread_places_by_key, then one primary-key range of thread_events per thread.
SELECT {web_timeline_row}
FROM (SELECT thread_id, tree_key FROM thread_places INDEXED BY thread_places_by_key
      WHERE root_session = ?1 ORDER BY tree_key LIMIT ?2) k
CROSS JOIN thread_events e ON e.thread_id = k.thread_id
WHERE e.type IN ('thread_started', 'thread_resumed', 'turn_started', 'turn_completed',
                 'ui_request', 'tool_started', 'assistant_message', 'thread_stopping',
                 'thread_closed', 'thread_error')
ORDER BY k.tree_key, e.seq
