-- The retained events of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one primary-key range of thread_events per id; the caller groups and orders them.
SELECT j.key, e.seq, e.at, e.type, e.data
FROM json_each(?1) AS j JOIN thread_events AS e ON e.thread_id = j.value
