-- One contract B thread by registry and path (the UNIQUE (manager_id, path) index answers it).
SELECT {agent_row}
FROM threads
WHERE manager_id = ?1 AND path = ?2
