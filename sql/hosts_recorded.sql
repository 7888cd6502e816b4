-- Whether the database records hosts (`threads.host_id`, schema version 14 or later): the
-- read-only commands open databases of every version as they are, and show hosts only when
-- there are some.
SELECT count(*) FROM pragma_table_info('threads') WHERE name = 'host_id'
