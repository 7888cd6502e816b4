-- `threadbase stop`: whether a thread it asked to stop has closed yet, and how.
SELECT status, exit_kind FROM threads WHERE id = ?1
