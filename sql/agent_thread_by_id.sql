-- One contract B thread by id.
SELECT {agent_row}
FROM threads
WHERE id = ?1
