-- The migrations refinery recorded as applied, in order, for the store's up-to-date check at
-- open (store::up_to_date). A table of one row per migration: no index needed.
SELECT {migration_row} FROM refinery_schema_history ORDER BY version
