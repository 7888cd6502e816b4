-- `threadbase stop`: whether a thread it asked to stop has closed yet, and how.
SELECT {stop_outcome_row} FROM threads WHERE id = ?1
