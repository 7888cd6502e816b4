-- sql/command_send_under_way.sql on PostgreSQL: no INDEXED BY (an index hint SQLite needs;
-- PostgreSQL's planner chooses the index).
SELECT EXISTS (SELECT 1 FROM commands
               WHERE thread_id = ?1 AND state = 'pending' AND kind = 'send')
    OR EXISTS (SELECT 1 FROM commands
               WHERE thread_id = ?1 AND state = 'running' AND kind = 'send')
