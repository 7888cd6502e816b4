-- The newest ?2 retained events of each thread in the JSON array ?1 (a list's batch): a
-- primary-key lookup of the thread for its last_seq, then one primary-key range of
-- thread_events (a thread's retained events are the contiguous seqs ending at last_seq).
-- j.key is the id's position; the caller groups by it.
SELECT {batch_row}, {event_row}
FROM json_each(?1) AS j
JOIN threads AS t ON t.id = j.value
JOIN thread_events AS e ON e.thread_id = t.id AND e.seq > t.last_seq - ?2
