-- The web view's "needs you" band (issue 50): every thread the view thread_attention says needs
-- the user, with its path, tree and host, oldest first (at most ?1). The view is judged per
-- thread from its own rows; the few rows it yields are sorted.
SELECT {web_need_row}
FROM thread_attention a
CROSS JOIN threads t ON t.id = a.thread_id
ORDER BY a.since, a.path
LIMIT ?1
