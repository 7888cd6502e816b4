-- Every thread's own usage, for listings that show it beside each thread (one scan of
-- thread_usage instead of one lookup per listed thread).
SELECT {usage_thread_row}, {usage_row}
FROM thread_usage
