-- Contract C: a worker's stored report (one per worker).
SELECT {report_row} FROM reports r WHERE worker_id = ?1
