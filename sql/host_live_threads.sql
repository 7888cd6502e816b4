-- The live threads held on one host (?1): what `threadbase host forget` closes. Read from the
-- live rows only (partial index threads_live).
SELECT t.id FROM threads t WHERE t.status = 'live' AND t.host_id = ?1 ORDER BY t.id
