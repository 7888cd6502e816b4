-- threadbase schema, version 14: the host and boot columns of V13 take the names DESIGN pins
-- (issue 33: "column `host_id` on `managers` and `threads`"), the same names `host_serves`
-- uses, so `SELECT … FROM threads t JOIN host_serves h USING (host_id)` reads as it should.
-- What they hold is unchanged: the host (THREADBASE_HOST_ID, else the machine id) and the boot
-- of the serve that owns the row's process; NULL on a row written before V13. No index, as in
-- V13: they are read beside the owner's pid on rows already found.
ALTER TABLE managers RENAME COLUMN owner_host TO host_id;
ALTER TABLE managers RENAME COLUMN owner_boot TO boot_id;
ALTER TABLE threads RENAME COLUMN owner_host TO host_id;
ALTER TABLE threads RENAME COLUMN owner_boot TO boot_id;
