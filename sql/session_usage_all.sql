-- Every root session's own turns (session_usage, in primary-key order), for `threadbase usage`.
SELECT {usage_session_row}, {usage_row}
FROM session_usage ORDER BY session_id
