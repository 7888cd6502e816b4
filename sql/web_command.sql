-- The web view's action result: one command row by primary key (its thread, kind, state and
-- result), so the page shows how the owning serve carried it out.
SELECT {web_command_row} FROM commands WHERE id = ?1
