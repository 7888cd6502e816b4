-- Where each session ran and when it started, for the heading of its tree: its managers,
-- contract A's first, then the oldest (the first row per session is used). Managers are few.
SELECT {root_manager_row}
FROM managers
ORDER BY session_id, contract <> 'thread', created_at
