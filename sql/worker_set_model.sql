-- Contract C: the model the worker's process reported ({providerID, id} as JSON text).
UPDATE threads SET model = ?2 WHERE id = ?1 AND model IS NULL
