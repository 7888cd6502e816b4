-- Contract C: a worker's stored report (one per worker).
SELECT verdict, summary, evidence FROM reports WHERE worker_id = ?1
