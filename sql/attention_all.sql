-- Every thread that needs the user (the view thread_attention, V16), for the views that show
-- a whole database (`tree`, `list`, `usage`, `top`): a row per such thread. Only a live thread
-- or a closed one that ended failed can need the user, so only those are pushed into the view,
-- by id: the live ones from the partial index threads_live, the failed ones from V19's
-- threads_ended_failed (its WHERE, word for word); the other closed threads, however many,
-- are never read. (`top` reads this after every change it sees.)
SELECT {attention_row}
FROM (SELECT t.id FROM threads t WHERE t.status = 'live'
      UNION ALL
      SELECT t.id FROM threads t
      WHERE t.status = 'closed' AND t.archived = 0
        AND (t.exit_kind = 'failed'
             OR (t.exit_kind = 'exited'
                 AND (t.exit_code IS NULL OR t.exit_code <> 0 OR t.exit_signal IS NOT NULL)))) AS c
JOIN thread_attention AS a ON a.thread_id = c.id
