-- The serve rows of this host (:host) that no serve refreshes any more: a heartbeat older than
-- :secs seconds (a serve that died without removing its row, or one of an earlier boot). Run
-- with each heartbeat; host_serves' primary key starts with the host.
DELETE FROM host_serves
WHERE host_id = :host AND julianday(heartbeat_at) < julianday('now') - :secs / 86400.0
