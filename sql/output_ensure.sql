-- Creates a thread's output row if it has none.
INSERT INTO thread_output (thread_id) VALUES (?1) ON CONFLICT (thread_id) DO NOTHING
