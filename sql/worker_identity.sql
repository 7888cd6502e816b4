-- Contract C idempotent spawn: the coordinator and request fingerprint stored for a worker id.
SELECT coordinator_id, fingerprint FROM threads WHERE id = ?1
