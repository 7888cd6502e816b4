-- threadbase PostgreSQL schema, version 8 (SQLite's version 19): the closed threads that ended
-- failed, for the web page's "needs you" band; see SQLite's V19 for why.
CREATE INDEX threads_ended_failed ON threads (id)
    WHERE status = 'closed' AND archived = 0
      AND (exit_kind = 'failed'
           OR (exit_kind = 'exited'
               AND (exit_code IS NULL OR exit_code <> 0 OR exit_signal IS NOT NULL)));
