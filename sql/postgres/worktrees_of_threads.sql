-- sql/worktrees_of_threads.sql on PostgreSQL: the JSON array ?1 is read with
-- jsonb_array_elements_text WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {batch_row}, {worktree_row}
FROM (SELECT value, ord - 1 AS key
      FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS a (value, ord)) AS j JOIN thread_worktrees AS w ON w.thread_id = j.value
