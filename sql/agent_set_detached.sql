-- Whether a thread's current run was started without a caller waiting for it (by key).
UPDATE threads SET agent_detached = :detached WHERE id = :id
