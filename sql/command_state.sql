-- Where a request stands (primary key), polled by the serve that wrote it.
SELECT {command_status_row} FROM commands WHERE id = ?1
