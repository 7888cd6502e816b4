-- The own usage of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one thread_usage primary-key lookup per id.
SELECT {batch_row}, {usage_row}
FROM json_each(?1) AS j JOIN thread_usage AS u ON u.thread_id = j.value
