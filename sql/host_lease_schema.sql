-- Whether the database has the view host_lease (schema version 20 or later); read-only commands
-- may open a database no newer serve has migrated yet.
SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name = 'host_lease'
