-- The web view's "needs you" band (issue 50): every live thread the view thread_attention says
-- needs the user, with its path, tree and host, oldest first (at most ?1). The live threads come
-- from the partial index threads_live (live rows only, however many closed ones the database
-- holds), and each is pushed into the view by id, as sql/attention_of_threads.sql does, so the
-- cost grows with the live threads. A closed thread that ended failed is not listed here: its
-- row says closed/failed (no index finds those without reading every closed thread).
SELECT {web_need_row}
FROM threads t INDEXED BY threads_live
CROSS JOIN thread_attention a ON a.thread_id = t.id
WHERE t.status = 'live'
ORDER BY a.since, a.path
LIMIT ?1
