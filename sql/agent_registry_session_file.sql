-- The main session's file as its contract B registry records it (children inherit its context
-- and live beside it), by primary key.
SELECT session_file FROM managers WHERE id = ?1
