-- Threads retained by a registry, completed ones included (contract B's total limit).
SELECT count(*) FROM threads WHERE manager_id = ?1
