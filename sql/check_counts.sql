-- `threadbase check`: how many rows each checked table holds (full counts; a check reads everything).
SELECT (SELECT count(*) FROM managers), (SELECT count(*) FROM threads),
       (SELECT count(*) FROM threads WHERE status = 'live'), (SELECT count(*) FROM thread_events),
       (SELECT count(*) FROM mailbox), (SELECT count(*) FROM commands)
