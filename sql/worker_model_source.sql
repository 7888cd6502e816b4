-- Contract C: whether a worker's model is known yet, and the session file that records it.
SELECT {worker_model_source_row} FROM threads WHERE id = ?1
