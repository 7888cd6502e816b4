-- sql/host_lease_plain.sql on PostgreSQL: the server's clock_timestamp() in the heartbeats' ISO
-- text, for SQLite's julianday and strftime.
SELECT to_char((clock_timestamp() - :secs * interval '1 second') AT TIME ZONE 'UTC',
               'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS cutoff,
       CAST(NULL AS text) AS outage_until
