-- PostgreSQL's text of sql/web_needs.sql (no INDEXED BY): the live threads that need the user.
SELECT {web_need_row}
FROM threads t
JOIN thread_attention a ON a.thread_id = t.id
WHERE t.status = 'live'
ORDER BY a.since, a.path
LIMIT ?1
