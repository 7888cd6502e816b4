-- The web view's action result: one command row by primary key (its thread, kind, state and
-- result), so the page shows how the owning serve carried it out.
SELECT id, thread_id, kind, state, result FROM commands WHERE id = ?1
