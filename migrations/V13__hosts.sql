-- threadbase schema, version 13: which host, and which boot of it, a row's processes live on
-- (issue 33). A pid, a process group and a start time mean something only on the machine that
-- recorded them, and only until it reboots; with one team database shared by several hosts, a
-- serve acts (signals, restores, closes as stale) only on rows of its own host and boot.
--
-- The host is THREADBASE_HOST_ID, else the machine id (else the kernel's host name); the boot
-- is the kernel's boot id. Both are written with the owner's pid and start time, by the same
-- statements. NULL: a row written before hosts were recorded, read as the reading host's (such
-- a database had one host). No index: no query looks rows up by host; they are read beside
-- the owner's pid, on rows already found.

-- The serve that owns a manager (its owner_pid) lives on this host and boot.
ALTER TABLE managers ADD COLUMN owner_host TEXT;
ALTER TABLE managers ADD COLUMN owner_boot TEXT;
-- The serve that holds a thread (its owner_pid) and the thread's own process (pid, pgid) live
-- on this host and boot.
ALTER TABLE threads ADD COLUMN owner_host TEXT;
ALTER TABLE threads ADD COLUMN owner_boot TEXT;
