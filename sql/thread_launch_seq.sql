-- The current launch number of a thread (primary key lookup).
SELECT launch_seq FROM threads WHERE id = ?1
