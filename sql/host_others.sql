-- Whether another host than ?1 has serve rows (the heartbeat's last statement): a serve whose
-- database no other host uses skips the look for unreachable hosts in its answers
-- (Store::hosts_to_check). The primary key of host_serves, host first.
SELECT count(*) FROM host_serves WHERE host_id <> ?1
