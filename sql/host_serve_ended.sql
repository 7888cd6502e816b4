-- A serve that ends removes its heartbeat row (host, boot, pid, start).
DELETE FROM host_serves WHERE host_id = ?1 AND boot_id = ?2 AND pid = ?3 AND started_at = ?4
