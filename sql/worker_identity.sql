-- Contract C idempotent spawn: the coordinator and request fingerprint stored for a worker id.
SELECT {worker_identity_row} FROM threads WHERE id = ?1
