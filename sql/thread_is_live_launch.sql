-- Whether a thread's given launch is still live (primary key lookup).
SELECT status = 'live' FROM threads WHERE id = ?1 AND launch_seq = ?2
