-- threadbase schema, version 21: a serve whose supervision is not running says so in its
-- heartbeat row (issue 46, "supervision never silently stops").
--
-- A serve's row watcher carries out the command rows other processes write for its threads
-- (a `threadbase stop` from another host), delivers its caller's notices and runs on a
-- connection of its own. When that connection cannot be had (the server's max_connections,
-- a role's CONNECTION LIMIT, a restart) the serve keeps answering through its writer and
-- readers while the watcher retries, and its heartbeat, written through the writer, records:
--    degraded_since   when its supervision stopped running, by the serve's clock (ISO text,
--                     UTC, as heartbeats are), and
--    degraded_reason  why (the connection's error);
-- both NULL while it runs. `threadbase host list` shows such a serve as degraded. A serve that
-- cannot write at all cannot say so: its heartbeat ages until its host's lease runs out.
ALTER TABLE host_serves ADD COLUMN degraded_since TEXT;
ALTER TABLE host_serves ADD COLUMN degraded_reason TEXT;
