-- `threadbase check`: closed threads that record no exit kind.
SELECT id, path FROM threads WHERE status = 'closed' AND exit_kind IS NULL
