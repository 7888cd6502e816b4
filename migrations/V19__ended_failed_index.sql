-- threadbase schema, version 19: the closed threads that ended failed, found without reading
-- every closed thread (issue 50).
--
-- Why: the web page's "needs you" band lists every thread the view thread_attention says
-- needs the user, and a closed thread that ended failed (exit kind failed, an exit code other
-- than 0 or none, a signal) and is not archived is one (`failed`). Such rows are few however
-- many closed threads the database keeps, so a partial index of exactly them (by id, as the
-- view is entered) keeps the band's cost to the live threads and these. The WHERE is the
-- view's own condition for an ended failure, word for word.
CREATE INDEX threads_ended_failed ON threads (id)
    WHERE status = 'closed' AND archived = 0
      AND (exit_kind = 'failed'
           OR (exit_kind = 'exited'
               AND (exit_code IS NULL OR exit_code <> 0 OR exit_signal IS NOT NULL)));
