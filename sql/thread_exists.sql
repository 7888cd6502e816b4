-- Whether a thread id is recorded (primary key lookup).
SELECT EXISTS (SELECT 1 FROM threads WHERE id = ?1)
