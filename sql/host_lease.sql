-- The lease's cutoff (a heartbeat at or before it has lapsed) and, while the database came back
-- from an outage less than a lease ago, when that window ends: the view host_lease (V20), one
-- row computed from host_serves' handful of rows.
SELECT cutoff, outage_until FROM host_lease
