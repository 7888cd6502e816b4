-- PostgreSQL's text of sql/web_needs.sql (no INDEXED BY): the live threads and the closed
-- ones that ended failed that need the user.
SELECT {web_need_row}
FROM (SELECT t.id FROM threads t WHERE t.status = 'live'
      UNION ALL
      SELECT t.id FROM threads t
      WHERE t.status = 'closed' AND t.archived = 0
        AND (t.exit_kind = 'failed'
             OR (t.exit_kind = 'exited'
                 AND (t.exit_code IS NULL OR t.exit_code <> 0 OR t.exit_signal IS NOT NULL)))) AS c
JOIN threads t ON t.id = c.id
JOIN thread_attention a ON a.thread_id = t.id
ORDER BY a.since, a.path
LIMIT ?1
