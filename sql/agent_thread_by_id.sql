-- One contract B thread by id.
SELECT * FROM agent_rows WHERE id = ?1
