-- sql/web_subtree_totals.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index); a plain JOIN for SQLite's CROSS JOIN … ON (which
-- only fixes SQLite's join order); the JSON array ?1 is read with jsonb_array_elements_text
-- WITH ORDINALITY (json_each's key is the 0-based position).
SELECT {web_subtree_totals_row}
FROM jsonb_array_elements_text(CAST(?1 AS jsonb)) WITH ORDINALITY AS j (value, ord)
JOIN thread_places a ON a.thread_id = j.value
JOIN thread_places d
     ON d.root_session = a.root_session
     AND d.tree_key >= a.tree_key AND d.tree_key < a.tree_key || '0'
     AND (length(d.tree_key) = length(a.tree_key)
          OR substr(d.tree_key, length(a.tree_key) + 1, 1) = '/')
JOIN thread_usage u ON u.thread_id = d.thread_id
GROUP BY a.thread_id
