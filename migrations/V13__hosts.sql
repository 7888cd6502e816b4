-- threadbase schema, version 13: which host, and which boot of it, a row's processes live on,
-- and the hosts' leases (issue 33). A pid, a process group and a start time mean something only on the machine that
-- recorded them, and only until it reboots; with one team database shared by several hosts, a
-- serve acts (signals, restores, closes as stale) only on rows of its own host and boot.
--
-- The host is THREADBASE_HOST_ID, else the machine id (else the kernel's host name); the boot
-- is the kernel's boot id. Both are written with the owner's pid and start time, by the same
-- statements. NULL: a row written before hosts were recorded, read as the reading host's (such
-- a database had one host). No index: a host's columns are read beside the owner's pid, on rows
-- already found, and the two queries that pick rows by host (`host list`'s count of a host's
-- live threads, `host forget`'s) read the live rows only.

-- The serve that owns a manager (its owner_pid) lives on this host and boot.
ALTER TABLE managers ADD COLUMN owner_host TEXT;
ALTER TABLE managers ADD COLUMN owner_boot TEXT;
-- The serve that holds a thread (its owner_pid) and the thread's own process (pid, pgid) live
-- on this host and boot.
ALTER TABLE threads ADD COLUMN owner_host TEXT;
ALTER TABLE threads ADD COLUMN owner_boot TEXT;

-- One row per serve running on a host, refreshed by it every 5 s with the database's clock (not
-- the host's): a host is up while one of its serves' heartbeat is younger than the lease (30 s),
-- and unreachable since its last heartbeat after that (`threadbase host list`). A serve removes
-- its row when it ends; a row of a serve that died is dropped by its host's next heartbeat
-- after two leases, or by `threadbase host forget`. The primary key is also the index every
-- statement on the table uses (host first: the heartbeat, the prune, the list's groups).
CREATE TABLE host_serves (
    host_id      TEXT NOT NULL,
    boot_id      TEXT NOT NULL,
    pid          INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    first_at     TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    PRIMARY KEY (host_id, boot_id, pid, started_at)
);
