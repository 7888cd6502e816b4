-- Whether the database keeps budgets (schema version 15 or later); `usage` and `budget` may
-- open a database no newer serve has migrated yet.
SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'budgets'
