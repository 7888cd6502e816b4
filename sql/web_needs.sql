-- The web view's "needs you" band (issue 50): every thread the view thread_attention says
-- needs the user, with its path, tree and host, oldest first (at most ?1): the live threads,
-- from the partial index threads_live (live rows only, however many closed ones the database
-- holds), and the closed ones that ended failed, from the partial index threads_ended_failed
-- (V19: exactly those rows); each is pushed into the view by id, as
-- sql/attention_of_threads.sql does, so the cost grows with those threads only.
SELECT {web_need_row}
FROM (SELECT t.id FROM threads t INDEXED BY threads_live WHERE t.status = 'live'
      UNION ALL
      SELECT t.id FROM threads t INDEXED BY threads_ended_failed
      WHERE t.status = 'closed' AND t.archived = 0
        AND (t.exit_kind = 'failed'
             OR (t.exit_kind = 'exited'
                 AND (t.exit_code IS NULL OR t.exit_code <> 0 OR t.exit_signal IS NOT NULL)))) AS c
CROSS JOIN threads t ON t.id = c.id
CROSS JOIN thread_attention a ON a.thread_id = t.id
ORDER BY a.since, a.path
LIMIT ?1
