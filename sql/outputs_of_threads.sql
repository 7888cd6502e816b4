-- The retained output of the threads in the JSON array ?1, by position in that array (a list's
-- batch): one primary-key lookup of thread_output per id.
SELECT {batch_row}, {output_row}
FROM json_each(?1) AS j JOIN thread_output AS o ON o.thread_id = j.value
