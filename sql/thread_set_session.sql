-- Records the session file a thread's process uses.
UPDATE threads SET session_file = :file, session_id = :session_id, updated_at = :at WHERE id = :id
