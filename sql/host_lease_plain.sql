-- The lease's cutoff on a database older than the view host_lease (schema version 14 to 19,
-- read as it is by a read-only command): :secs seconds before now by the database's clock, in
-- the heartbeats' ISO text; no outage is known.
SELECT strftime('%Y-%m-%dT%H:%M:%fZ', julianday('now') - :secs / 86400.0) AS cutoff,
       NULL AS outage_until
