-- The prompt a queued thread was started with, for its launch.
SELECT prompt FROM threads WHERE id = ?1
