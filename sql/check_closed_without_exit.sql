-- `threadbase check`: closed threads that record no exit kind.
SELECT {check_closed_without_exit_row} FROM threads WHERE status = 'closed' AND exit_kind IS NULL
