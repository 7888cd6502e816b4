-- Where a request stands (primary key), polled by the serve that wrote it.
SELECT state, result FROM commands WHERE id = ?1
