-- A still thread's view (?2) at a detail level (?3) as this build (?4) rendered it, with its
-- list line, if it did: one primary-key lookup (a poll).
SELECT {kept_row} FROM thread_snapshots
WHERE thread_id = ?1 AND view = ?2 AND detail = ?3 AND shape = ?4
