-- The retained stderr tail and how many bytes were cut before it.
SELECT {output_stderr_row} FROM thread_output WHERE thread_id = ?1
