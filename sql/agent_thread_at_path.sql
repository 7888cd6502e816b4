-- One contract B thread by registry and path (the UNIQUE (manager_id, path) index answers it).
SELECT * FROM agent_rows WHERE manager_id = ?1 AND path = ?2
