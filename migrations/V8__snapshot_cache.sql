-- threadbase schema, version 8: still threads' serialized answers, kept so that a list or a
-- poll copies bytes instead of reading events and output and shaping them again.
--
-- A thread's contract A snapshot (and its poll result) is a pure function of its rows, so a
-- still thread's (closed, or live and idle: neither changes until its rows do) is rendered
-- once and kept here. The cache is never the truth: a row is only
-- ever written by a transaction that rendered it from the rows it read inside that same write
-- transaction, and the triggers below delete it in the transaction of any later change to
-- those rows. `shape` names the build that rendered it (a hash of the crate's source): a
-- build reads only its own rows, so an upgrade never serves an old shape. Deleting rows here
-- at any time is safe; they are rendered again on the next read.

CREATE TABLE thread_snapshots (
    thread_id TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    -- 'snapshot': the `ThreadRuntimeSnapshot` JSON; 'poll': a poll's whole result JSON.
    view      TEXT NOT NULL CHECK (view IN ('snapshot', 'poll')),
    detail    TEXT NOT NULL CHECK (detail IN ('summary', 'tail', 'full')),
    shape     TEXT NOT NULL,
    json      TEXT NOT NULL,
    -- 'snapshot' at 'summary': the thread's line of a list's content text; else NULL.
    line      TEXT,
    -- Why: every read is an equality lookup of one thread's view at one detail (a list's
    -- batch is a json_each join on it), and a thread's rows go together on invalidation.
    PRIMARY KEY (thread_id, view, detail)
);

-- Any change to the thread row invalidates. This covers events too: every append of events
-- bumps `threads.last_seq` in the same transaction (src/store/events.rs), and the ring trim
-- only runs inside an append.
CREATE TRIGGER thread_snapshots_stale_on_thread AFTER UPDATE ON threads
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.id;
END;

-- The retained output (answer, partial text, stderr) is a separate row.
CREATE TRIGGER thread_snapshots_stale_on_output_insert AFTER INSERT ON thread_output
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
END;

CREATE TRIGGER thread_snapshots_stale_on_output_update AFTER UPDATE ON thread_output
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = NEW.thread_id;
END;

CREATE TRIGGER thread_snapshots_stale_on_output_delete AFTER DELETE ON thread_output
BEGIN
    DELETE FROM thread_snapshots WHERE thread_id = OLD.thread_id;
END;
