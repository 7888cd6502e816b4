-- A thread's place in its tree: root session and key (thread_places primary key).
SELECT root_session, tree_key FROM thread_places WHERE thread_id = ?1
