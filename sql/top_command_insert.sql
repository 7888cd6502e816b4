-- `threadbase top`'s emergency stop: a control request the owning `serve` carries out.
INSERT INTO commands (thread_id, kind, created_at) VALUES (?1, ?2, ?3)
