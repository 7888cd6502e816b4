-- Contract C: admits a worker's only report; the primary key refuses a second one.
INSERT INTO reports (worker_id, verdict, summary, evidence, message_id, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
