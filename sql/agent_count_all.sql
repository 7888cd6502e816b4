-- Threads retained by a registry, completed ones included (contract B's total limit); reaped
-- ones are forgotten and free their slot.
SELECT count(*) FROM threads WHERE manager_id = ?1 AND agent_reaped_at IS NULL
