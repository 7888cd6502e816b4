-- A thread's retained output.
SELECT {output_row}
FROM thread_output WHERE thread_id = ?1
