-- `threadbase host forget`: the host's serve rows go (its threads were closed first).
DELETE FROM host_serves WHERE host_id = ?1
